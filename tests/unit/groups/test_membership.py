"""The heartbeat core against simulated members: whatever sequence of joins, leaves,
heartbeats (with or without reporting revocations), static leaves and rejoins, timeouts and
new topics, no partition is ever owned by two members, and replaying the records (whole, or
compacted to the latest value per key, through the byte codec) gives exactly the live state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from data_plane.groups import offsets, record_codec
from data_plane.groups.membership import GroupSettings, Heartbeat, expire, heartbeat
from data_plane.groups.offsets import OffsetToCommit
from data_plane.groups.state import Group, replay
from server_common.errors import ErrorCode

SETTINGS = GroupSettings(session_timeout_ms=1000, heartbeat_interval_ms=100, rebalance_timeout_ms=5000)
GROUP = "g"


class Sim:
    """A group, its record log, a clock, and each member's own view (epoch, what it owns)."""

    def __init__(self, settings: GroupSettings = SETTINGS, topics: dict[str, int] | None = None) -> None:
        self.settings = settings
        self.topics = dict(topics or {"t": 6})
        self.group: Group | None = None
        self.records: list = []
        self.now = 0
        self.views: dict[str, tuple[int, frozenset]] = {}

    def beat(self, member: str, report: bool = True, instance_id: str = "", epoch: int | None = None, **fields):
        my_epoch, owned = self.views.get(member, (0, frozenset()))
        request = Heartbeat(GROUP, member, my_epoch if epoch is None else epoch, instance_id=instance_id,
                            owned=owned if report else None, **fields)
        if request.member_epoch == 0:
            request = Heartbeat(**{**request.__dict__, "subscription_changed": True, "topic_names": fields.get("topic_names", ("t",))})
        outcome = heartbeat(self.group, request, self.topics, self.settings, self.now)
        self._commit(outcome.change)
        answer = outcome.answer
        if answer.error == ErrorCode.NONE and answer.member_epoch >= 0:
            self.views[member] = (answer.member_epoch, answer.assignment if answer.assignment is not None else owned)
        elif answer.error != ErrorCode.NONE or answer.member_epoch < 0:
            self.views.pop(member, None)
        return answer

    def tick(self, ms: int) -> None:
        self.now += ms
        if self.group is not None:
            change = expire(self.group, self.topics, self.now)
            if change is not None:
                self._commit(change)
        # a client whose heartbeats have not succeeded for its session timeout drops its
        # partitions on its own (as the coordinator removed it): the views follow
        members = self.group.members if self.group is not None else {}
        self.views = {m: v for m, v in self.views.items() if m in members}

    def _commit(self, change) -> None:
        if change.records or self.group is not None:
            self.group = None if change.group.deleted else change.group
        self.records.extend(change.records)
        if self.group is not None and not self.settings.assign_before_revoke:
            owners = [tp for c in self.group.current.values() for tp in c.owned]
            assert len(owners) == len(set(owners)), f"a partition owned twice: {self.group.current}"

    def live(self) -> dict[str, Group]:
        return {GROUP: self.group} if self.group is not None else {}

    def members_owning_twice(self) -> bool:
        owners = [tp for c in self.group.current.values() for tp in c.owned]
        return len(owners) != len(set(owners))


def compacted(records):
    """What log compaction keeps once tombstones are past delete.retention.ms: the latest
    value of each key, in log order, without tombstones."""
    latest = {}
    for index, record in enumerate(records):
        latest[record.key] = (index, record)
    return [r for _, r in sorted(latest.values(), key=lambda x: x[0]) if r.value is not None]


def through_bytes(records):
    return [record_codec.decode(*record_codec.encode(r)) for r in records]


operations = st.lists(st.tuples(
    st.sampled_from(["beat", "beat-silent", "leave", "static-leave", "rejoin", "tick", "new-topic"]),
    st.sampled_from(["a", "b", "c", "d"]),
), max_size=60)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_no_partition_owned_twice_and_replay_equals_live(ops):
    sim = Sim(topics={"t": 6, "u": 3})
    for op, member in ops:
        static = "i-" + member if member in ("c", "d") else ""
        if op == "beat":
            sim.beat(member, instance_id=static, topic_names=("t", "u"))
        elif op == "beat-silent":  # a heartbeat that does not report (has not revoked yet)
            sim.beat(member, report=False, instance_id=static, topic_names=("t", "u"))
        elif op == "leave" and member in sim.views:
            sim.beat(member, epoch=-1)
        elif op == "static-leave" and member in sim.views:
            sim.beat(member, epoch=-2)
        elif op == "rejoin":
            sim.views.pop(member, None)
            sim.beat(member, instance_id=static, topic_names=("t", "u"))
        elif op == "tick":
            sim.tick(400)
        elif op == "new-topic":
            sim.topics[f"n{len(sim.topics)}"] = 2
        # the members' own views are disjoint too (each owns at most what the coordinator gave it)
        views = [tp for _, owned in sim.views.values() for tp in owned]
        assert len(views) == len(set(views)), sim.views
        assert replay(through_bytes(sim.records)) == sim.live()
    assert replay(through_bytes(compacted(sim.records))) == sim.live()


def converge(sim: Sim, members) -> None:
    for _ in range(10):
        for m in members:
            sim.beat(m)
    assert sim.group.state() == "stable", sim.group


def test_revoked_partitions_move_only_after_the_owner_reports_them_revoked():
    sim = Sim()
    sim.beat("a")
    assert sim.views["a"][1] == frozenset(("t", p) for p in range(6))
    sim.beat("b")
    assert sim.views["b"][1] == frozenset()
    sim.beat("a", report=False)  # told to revoke three; keeps owning them until it says so
    assert len(sim.group.current["a"].pending_revocation) == 3
    sim.beat("b")
    assert sim.views["b"][1] == frozenset(), "b must not get a's partitions before a revoked them"
    sim.beat("a")  # reports owning only the three it keeps
    sim.beat("b")
    assert len(sim.views["b"][1]) == 3 and sim.group.state() == "stable"


def test_unsafe_assign_before_revoke_hands_partitions_over_early():
    """The negative control: the same sequence ends with a partition owned twice."""
    sim = Sim(settings=GroupSettings(session_timeout_ms=1000, assign_before_revoke=True))
    sim.beat("a")
    sim.beat("b")
    sim.beat("a", report=False)  # told to revoke three, has not yet
    sim.beat("b")
    assert sim.views["b"][1] & sim.group.current["a"].pending_revocation, "b got partitions a has not revoked"
    assert sim.members_owning_twice()  # the coordinator's own state (its assignment log) shows it


def test_stale_epoch_is_fenced_and_unknown_member_refused():
    sim = Sim()
    sim.beat("a")
    sim.beat("b")
    epoch = sim.views["a"][0]
    assert sim.beat("a", epoch=epoch + 5).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert sim.beat("zz", epoch=3).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member():
    sim = Sim()
    converge(sim, ["a", "b"])
    for _ in range(3):
        sim.tick(400)
        sim.beat("a")
    assert set(sim.group.members) == {"a"}
    sim.beat("a")
    assert sim.views["a"][1] == frozenset(("t", p) for p in range(6))


def test_static_member_restarts_without_a_rebalance_and_static_leave_keeps_the_assignment():
    sim = Sim()
    sim.beat("a", instance_id="i-a")
    sim.beat("b")
    converge(sim, ["a", "b"])
    epoch, owned = sim.group.epoch, sim.views["a"][1]
    sim.beat("a", epoch=-2)
    assert sim.group.current["a"].assigned == owned  # kept for the member's return
    sim.beat("b")
    assert sim.group.state() == "stable" and sim.group.epoch == epoch
    sim.beat("a2", instance_id="i-a")  # the restarted process, a new member id
    assert sim.group.epoch == epoch and sim.views["a2"][1] == owned and "a" not in sim.group.members
    assert sim.beat("a3", instance_id="i-a").error == ErrorCode.UNRELEASED_INSTANCE_ID


def test_static_leave_expires_after_the_session_timeout():
    sim = Sim()
    sim.beat("a", instance_id="i-a")
    sim.beat("b")
    converge(sim, ["a", "b"])
    sim.beat("a", epoch=-2)
    for _ in range(4):
        sim.tick(400)
        sim.beat("b")
    assert set(sim.group.members) == {"b"} and len(sim.views["b"][1]) == 6


def test_regex_subscription_picks_up_topics_created_later():
    sim = Sim(topics={"orders-1": 2})
    sim.beat("a", topic_regex="orders-.*", topic_names=())
    assert sim.views["a"][1] == {("orders-1", 0), ("orders-1", 1)}
    sim.topics["orders-2"] = 1
    sim.topics["__consumer_offsets"] = 3
    sim.beat("a")
    assert sim.views["a"][1] == {("orders-1", 0), ("orders-1", 1), ("orders-2", 0)}


def test_commits_check_the_member_epoch():
    sim = Sim()
    sim.beat("a")
    epoch = sim.views["a"][0]
    change, errors = offsets.commit(sim.group, GROUP, "a", epoch, [OffsetToCommit("t", 0, 5, 3, "meta")], 0)
    assert errors[("t", 0)][0] == ErrorCode.NONE
    sim._commit(change)
    assert offsets.fetch(sim.group, [("t", 0)])[("t", 0)].offset == 5
    for member, member_epoch, code in [("a", epoch - 1, ErrorCode.STALE_MEMBER_EPOCH), ("a", epoch + 1, ErrorCode.FENCED_MEMBER_EPOCH),
                                       ("x", epoch, ErrorCode.UNKNOWN_MEMBER_ID), ("", -1, ErrorCode.NON_EMPTY_GROUP)]:
        with pytest.raises(offsets.Refused) as refused:
            offsets.commit(sim.group, GROUP, member, member_epoch, [OffsetToCommit("t", 0, 9)], 0)
        assert refused.value.code == code
    with pytest.raises(offsets.Refused):
        offsets.delete_group(sim.group, GROUP)
    sim.beat("a", epoch=-1)
    change, _ = offsets.commit(sim.group, GROUP, "", -1, [OffsetToCommit("t", 1, 7)], 0)  # admin commit: group empty
    sim._commit(change)
    sim._commit(offsets.delete_group(sim.group, GROUP))
    assert sim.group is None and replay(through_bytes(sim.records)) == {}
    assert replay(through_bytes(compacted(sim.records))) == {}


def test_a_subscription_resolves_only_to_topics_the_members_principal_may_see() -> None:
    """By name or by pattern, a topic the member's principal may not DESCRIBE is never resolved
    for it nor assigned; another member that may see it gets it; and the principal is kept in
    the member's record, so a coordinator that loads the group decides the same."""
    visible = lambda sub, topic: topic != "secret" or sub.principal == "User:admin"
    topics = {"t": 2, "secret": 2}
    by_name = Heartbeat(GROUP, "m1", 0, subscription_changed=True, topic_names=("t", "secret"), principal="User:alice")
    first = heartbeat(None, by_name, topics, SETTINGS, 0, visible)
    assert first.answer.assignment == frozenset({("t", 0), ("t", 1)})
    assert dict(first.change.group.metadata.subscribed_topics) == {"t": 2}
    by_pattern = Heartbeat(GROUP, "m2", 0, subscription_changed=True, topic_regex=".*", principal="User:bob")
    second = heartbeat(first.change.group, by_pattern, topics, SETTINGS, 0, visible)
    assert not {tp for tp in second.change.group.targets["m2"] if tp[0] == "secret"}
    assert dict(second.change.group.metadata.subscribed_topics) == {"t": 2}
    admin = Heartbeat(GROUP, "m3", 0, subscription_changed=True, topic_regex=".*", principal="User:admin")
    third = heartbeat(second.change.group, admin, topics, SETTINGS, 0, visible)
    assert third.change.group.targets["m3"] >= {("secret", 0), ("secret", 1)}
    assert replay(record_codec.decode(*record_codec.encode(r)) for r in first.change.records)[GROUP].members["m1"].principal == "User:alice"
