"""Kafka's ACL integers and filters in kraftlog's words (data_plane/kafka/acl_apis.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from data_plane.kafka.acl_apis import ANY, MATCH, AclFilter, Untranslatable, binding_of, matching
from server_common.authorizer import CLUSTER_NAME, AclBinding

ACLS = [
    AclBinding("User:a", "*", "topic", "orders", "literal", "read", "allow"),
    AclBinding("User:a", "*", "topic", "ord", "prefixed", "write", "allow"),
    AclBinding("User:b", "*", "topic", "*", "literal", "describe", "deny"),
    AclBinding("User:b", "*", "group", "orders", "literal", "read", "allow"),
    AclBinding("User:c", "*", "cluster", CLUSTER_NAME, "literal", "alter", "allow"),
]


def kafka_filter(resource_type=ANY, name=None, pattern=ANY, principal=None, host=None, operation=ANY, permission=ANY):
    return AclFilter.of(SimpleNamespace(resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
                                        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission))


def test_any_matches_everything_and_each_field_narrows() -> None:
    assert matching(ACLS, kafka_filter()) == sorted(ACLS, key=repr)
    assert matching(ACLS, kafka_filter(principal="User:a", operation=4)) == [ACLS[1]]
    assert matching(ACLS, kafka_filter(resource_type=3)) == [ACLS[3]]


def test_match_finds_every_binding_that_applies_to_a_name() -> None:
    """Kafka's MATCH: the literal name, the wildcard and every prefix covering it, of the type."""
    assert matching(ACLS, kafka_filter(resource_type=2, name="orders", pattern=MATCH)) == sorted(ACLS[:3], key=repr)
    assert matching(ACLS, kafka_filter(resource_type=2, name="orders", pattern=3)) == [ACLS[0]]


def test_the_cluster_is_kafka_cluster_on_the_wire() -> None:
    assert matching(ACLS, kafka_filter(name="kafka-cluster")) == [ACLS[4]]
    creation = SimpleNamespace(resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3, principal="User:d", host="*",
                               operation=7, permission_type=3)
    assert binding_of(creation) == AclBinding("User:d", "*", "cluster", CLUSTER_NAME, "literal", "alter", "allow")


@pytest.mark.parametrize("field, value", [("resource_type", 6), ("resource_pattern_type", 1), ("operation", 13), ("permission_type", 0)])
def test_a_value_kraftlog_has_no_meaning_for_is_refused_naming_the_ones_it_has(field: str, value: int) -> None:
    creation = dict(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:d", host="*", operation=3, permission_type=3)
    with pytest.raises(Untranslatable, match="use one of"):
        binding_of(SimpleNamespace(**{**creation, field: value}))
