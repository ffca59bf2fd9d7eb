"""Every kraftlog error code has a Kafka answer, and no two kraftlog codes that mean different
things collapse into one Kafka code by accident."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.error_codes import TO_KAFKA, to_kafka
from server_common.errors import ErrorCode


def test_every_kraftlog_code_has_a_kafka_code():
    assert set(TO_KAFKA) == set(ErrorCode)


def test_the_mapping_is_one_to_one():
    assert len(set(TO_KAFKA.values())) == len(TO_KAFKA)


def test_names_match_where_kafka_has_the_same_name():
    same = [c for c in ErrorCode if c.name.lower() in KafkaError.__members__]
    assert len(same) > 50
    assert [c for c in same if TO_KAFKA[c].name != c.name.lower()] == []


def test_a_number_this_broker_does_not_know_is_an_unknown_server_error():
    assert to_kafka(9999) is KafkaError.unknown_server_error
    assert to_kafka(int(ErrorCode.NOT_LEADER_OR_FOLLOWER)) is KafkaError.not_leader_or_follower
