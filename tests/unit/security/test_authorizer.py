"""The ACL authorizer core: matching, deny wins, implied operations, super users, default deny."""

import pytest

from server_common.authorizer import AclBinding, Authorizer


def acl(principal: str, operation: str, name: str = "orders", permission: str = "allow", pattern: str = "literal", host: str = "*", rtype: str = "topic") -> AclBinding:
    return AclBinding(principal, host, rtype, name, pattern, operation, permission)


def test_default_deny_and_literal_allow() -> None:
    authz = Authorizer([acl("User:alice", "write")])
    assert authz.authorize("User:alice", "10.0.0.1", "write", "topic", "orders")
    assert not authz.authorize("User:alice", "10.0.0.1", "read", "topic", "orders")  # no ACL: deny
    assert not authz.authorize("User:bob", "10.0.0.1", "write", "topic", "orders")
    assert not authz.authorize("User:alice", "10.0.0.1", "write", "topic", "orders2")
    assert not authz.authorize("User:alice", "10.0.0.1", "write", "group", "orders")


def test_deny_wins_over_allow_and_wildcards() -> None:
    authz = Authorizer([acl("User:*", "all", "*"), acl("User:mallory", "write", "pay", "deny", "prefixed")])
    assert authz.authorize("User:mallory", "h", "write", "topic", "orders")
    assert not authz.authorize("User:mallory", "h", "write", "topic", "payments")  # denied by the prefix
    assert authz.authorize("User:alice", "h", "write", "topic", "payments")


def test_implied_describe_and_host() -> None:
    authz = Authorizer([acl("User:alice", "read", host="10.0.0.1"), acl("User:alice", "alter_configs", rtype="cluster", name="kraftlog-cluster")])
    assert authz.authorize("User:alice", "10.0.0.1", "describe", "topic", "orders")
    assert not authz.authorize("User:alice", "10.0.0.2", "describe", "topic", "orders")
    assert authz.authorize("User:alice", "x", "describe_configs", "cluster", "kraftlog-cluster")
    # a DENY of READ does not imply a DENY of DESCRIBE (Kafka's rule: implication is for allows)
    authz = Authorizer([acl("User:alice", "describe"), acl("User:alice", "read", permission="deny")])
    assert authz.authorize("User:alice", "h", "describe", "topic", "orders")


def test_super_users_bypass_acls() -> None:
    authz = Authorizer([acl("User:broker-1", "all", "*", "deny")], super_users=["User:broker-1"])
    assert authz.authorize("User:broker-1", "h", "cluster_action", "cluster", "kraftlog-cluster")


def test_memo_answers_the_same() -> None:
    authz = Authorizer([acl("User:alice", "write")])
    assert [authz.authorize("User:alice", "h", "write", "topic", "orders") for _ in range(3)] == [True] * 3


def test_validate_names_the_bad_field() -> None:
    with pytest.raises(ValueError, match="unknown operation 'wrte'"):
        acl("User:alice", "wrte").validate()
    with pytest.raises(ValueError, match="User:NAME"):
        acl("alice", "write").validate()


@pytest.mark.parametrize("acls, allowed", [
    ([], False),
    ([acl("User:alice", "write")], True),  # WRITE on one topic: KIP-679's idempotent produce
    ([acl("User:*", "write", "logs-", pattern="prefixed")], True),
    ([acl("User:alice", "read")], False),
    ([acl("User:alice", "write"), acl("User:alice", "write", "orders", "deny")], False),  # the only allow, denied
    ([acl("User:alice", "write", "ord", pattern="prefixed"), acl("User:alice", "write", "orders", "deny")], True),  # 'ord-x' stays allowed
    ([acl("User:alice", "write", "ord", pattern="prefixed"), acl("User:*", "write", "o", "deny", "prefixed")], False),
    ([acl("User:alice", "write"), acl("User:alice", "all", "*", "deny")], False),
    ([acl("User:alice", "write", host="10.0.0.9")], False),  # another host
])
def test_authorize_any_topic(acls: list[AclBinding], allowed: bool) -> None:
    assert Authorizer(acls).authorize_any("User:alice", "10.0.0.1", "write", "topic") is allowed
    assert Authorizer(acls, super_users=["User:alice"]).authorize_any("User:alice", "10.0.0.1", "write", "topic")


def test_a_refusal_by_a_deny_names_the_deny_to_remove_not_an_allow_that_cannot_win() -> None:
    from server_common.authorization import AccessControl
    from server_common.principal import Identity, set_identity

    acls = {acl("User:alice", "all", "*"): True, acl("User:alice", "write", "sec", "deny", "prefixed"): True}
    access = AccessControl(lambda: acls, (), enabled=True)
    set_identity(Identity("User:alice", host="10.0.0.1"))
    message = access.refusal("write", "topic", "secret")
    assert message is not None and "DENY" in message and "acls create" not in message
    assert "kraftlog acls delete --principal User:alice --host * --operation write --deny --topic sec --prefixed" in message
    assert Authorizer(acls).matching_deny("User:alice", "10.0.0.1", "read", "topic", "secret") is None
    no_allow = access.refusal("write", "group", "g")  # nothing matches: the advice is an allow
    assert no_allow is not None and "kraftlog acls create --principal User:alice --operation write --group g" in no_allow
