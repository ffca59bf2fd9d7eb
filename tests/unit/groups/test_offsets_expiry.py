"""Committed offsets expire (Kafka's offsets.retention.minutes): the pure decision
(`offsets_expiry.expire`) and the coordinator shell's timer over a fake replica manager with
an injected clock. An empty group keeps its offsets for the retention counted from when it
became empty (or from its last commit), then loses them and is deleted; a member joining
resets that; offsets in an open transaction never expire; a coordinator replaying the log
finds the same groups."""

from __future__ import annotations

import asyncio

from data_plane.groups import offsets_expiry, record_codec
from data_plane.groups.coordinator import GroupCoordinator, TxnProducer
from data_plane.groups.membership import GroupSettings, Heartbeat
from data_plane.groups.offsets import OffsetToCommit
from data_plane.groups.state import CommittedOffset, Group, GroupEpoch, GroupRecord, MemberSubscription, RecordType
from data_plane.record_batch import decode_batch
from tests.unit.groups.test_coordinator_shell import FakeReplicas, join
from tests.unit.groups.test_txn_offsets import write_marker

RETENTION_MS = 10_000
SETTINGS = GroupSettings(offsets_retention_ms=RETENTION_MS, offsets_retention_check_interval_ms=1)  # every tick checks


def empty_group(empty_since_ms: int, commits: dict[tuple[str, int], int]) -> Group:
    """A group with no members, empty since ``empty_since_ms``, with offsets committed at the given times."""
    group = Group("g", GroupEpoch(3, "uniform", (), empty_since_ms))
    group.offsets = {tp: CommittedOffset(7, commit_timestamp_ms=at) for tp, at in commits.items()}
    return group


def test_an_empty_group_keeps_its_offsets_for_the_retention_then_loses_them_and_is_deleted():
    group = empty_group(5000, {("t", 0): 1000, ("t", 1): 2000})
    assert offsets_expiry.expire(group, 5000 + RETENTION_MS - 1, RETENTION_MS, set()) is None
    change = offsets_expiry.expire(group, 5000 + RETENTION_MS, RETENTION_MS, set())
    assert change is not None and change.group.deleted and not change.group.offsets
    tombstoned = [(r.key.type, r.key.topic, r.key.partition) for r in change.records if r.value is None]
    assert tombstoned[:2] == [(RecordType.OFFSET, "t", 0), (RecordType.OFFSET, "t", 1)]  # offsets before the group
    assert (RecordType.GROUP_EPOCH, "", 0) == tombstoned[-1] and len(change.records) == len(tombstoned)


def test_a_group_that_never_had_members_counts_from_its_last_commit():
    group = empty_group(0, {("t", 0): 1000, ("t", 1): 4000})
    assert offsets_expiry.expire(group, 4000 + RETENTION_MS - 1, RETENTION_MS, set()) is None
    assert offsets_expiry.expire(group, 4000 + RETENTION_MS, RETENTION_MS, set()).group.deleted


def test_offsets_in_an_open_transaction_keep_the_group():
    group = empty_group(0, {("t", 0): 1000})
    assert offsets_expiry.expire(group, 10 * RETENTION_MS, RETENTION_MS, {("t", 1)}) is None


def test_a_group_with_members_keeps_the_offsets_of_what_it_subscribes_to_and_loses_the_others():
    group = Group("g", GroupEpoch(2, "uniform", (("t", 4),)))
    group.members = {"a": MemberSubscription(topic_names=("t",))}
    group.offsets = {("t", 0): CommittedOffset(7, commit_timestamp_ms=0), ("old", 0): CommittedOffset(3, commit_timestamp_ms=0)}
    assert offsets_expiry.expire(group, RETENTION_MS - 1, RETENTION_MS, set()) is None
    change = offsets_expiry.expire(group, RETENTION_MS, RETENTION_MS, set())
    assert set(change.group.offsets) == {("t", 0)} and not change.group.deleted
    assert [(r.key.topic, r.value) for r in change.records] == [("old", None)]


# ---------------------------------------------------------------------------- the shell's timer


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


async def coordinator_at(replicas: FakeReplicas, clock: Clock) -> GroupCoordinator:
    coordinator = GroupCoordinator(1, replicas, SETTINGS, clock_ms=clock)
    coordinator.sync_leadership()
    await coordinator.shards[0].task
    assert coordinator.shards[0].loaded
    return coordinator


async def tick_at(coordinator: GroupCoordinator, clock: Clock, now: int) -> None:
    """Tick at ``now`` and wait until what the tick started is written and applied."""
    clock.now = now
    coordinator.tick()
    shard = coordinator.shards[0]
    for _ in range(1000):
        if not shard.expiring and not shard.queues:
            return
        await asyncio.sleep(0)
    raise AssertionError("the timer's writes did not complete")


async def member_commits_and_leaves(coordinator: GroupCoordinator, clock: Clock, member: str, left_at: int) -> None:
    answer = await coordinator.heartbeat(join(member))
    await coordinator.commit("g", member, answer.member_epoch, [OffsetToCommit("t", 0, 5)])
    clock.now = left_at
    await coordinator.heartbeat(Heartbeat("g", member, -1))


def logged(replicas: FakeReplicas) -> list[GroupRecord]:
    return [record_codec.decode(k, v) for b in replicas.partition.batches for batch in [decode_batch(b)] if not batch.header.is_control
            for k, v in zip(batch.keys, batch.values)]


def test_a_group_empty_past_the_retention_is_deleted_through_the_log_and_a_successor_agrees():
    async def scenario():
        replicas, clock = FakeReplicas(), Clock()
        coordinator = await coordinator_at(replicas, clock)
        await member_commits_and_leaves(coordinator, clock, "a", left_at=1000)
        assert coordinator.group("g").metadata.empty_since_ms == 1000
        await tick_at(coordinator, clock, 1000 + RETENTION_MS - 1)
        assert coordinator.group("g").offsets[("t", 0)].offset == 5
        successor = await coordinator_at(replicas, clock)  # a failover now: the same group, empty since the same moment
        assert successor.group("g") == coordinator.group("g")
        await tick_at(coordinator, clock, 1000 + RETENTION_MS)
        assert coordinator.group("g") is None
        assert [r.key.type for r in logged(replicas)[-3:]] == [RecordType.OFFSET, RecordType.TARGET_EPOCH, RecordType.GROUP_EPOCH]
        assert all(r.value is None for r in logged(replicas)[-3:])
        assert (await coordinator_at(replicas, clock)).group("g") is None  # a failover after it: gone there too
    asyncio.run(scenario())


def test_a_member_joining_resets_the_retention():
    async def scenario():
        replicas, clock = FakeReplicas(), Clock()
        coordinator = await coordinator_at(replicas, clock)
        await member_commits_and_leaves(coordinator, clock, "a", left_at=1000)
        clock.now = 5000
        await coordinator.heartbeat(join("b"))
        assert coordinator.group("g").metadata.empty_since_ms == 0
        await tick_at(coordinator, clock, 1000 + RETENTION_MS)  # b is a member
        clock.now = 20_000
        await coordinator.heartbeat(Heartbeat("g", "b", -1))
        assert coordinator.group("g").metadata.empty_since_ms == 20_000
        await tick_at(coordinator, clock, 20_000 + RETENTION_MS - 1)
        assert coordinator.group("g").offsets[("t", 0)].offset == 5
        await tick_at(coordinator, clock, 20_000 + RETENTION_MS)
        assert coordinator.group("g") is None
    asyncio.run(scenario())


def test_a_live_member_keeps_the_offsets_past_the_retention():
    async def scenario():
        replicas, clock = FakeReplicas(), Clock()
        coordinator = await coordinator_at(replicas, clock)
        answer = await coordinator.heartbeat(join("a"))
        await coordinator.commit("g", "a", answer.member_epoch, [OffsetToCommit("t", 0, 5)])
        for now in range(1000, 3 * RETENTION_MS, 5000):  # heartbeats keep the member's session alive
            clock.now = now
            await coordinator.heartbeat(Heartbeat("g", "a", answer.member_epoch, owned=answer.assignment))
            await tick_at(coordinator, clock, now)
        assert coordinator.group("g").offsets[("t", 0)].offset == 5 and "a" in coordinator.group("g").members
    asyncio.run(scenario())


def test_offsets_in_an_open_transaction_are_kept_until_its_marker():
    async def scenario():
        replicas, clock = FakeReplicas(), Clock()
        coordinator = await coordinator_at(replicas, clock)
        await coordinator.txn_commit("g", TxnProducer(7, 0, "tx"), "", -1, [OffsetToCommit("t", 1, 9)])
        await coordinator.commit("g", "", -1, [OffsetToCommit("t", 0, 5)])
        await tick_at(coordinator, clock, 3 * RETENTION_MS)
        assert coordinator.group("g").offsets[("t", 0)].offset == 5 and coordinator.unstable("g") == {("t", 1)}
        await write_marker(replicas, coordinator, 7, commit=True)
        assert coordinator.group("g").offsets[("t", 1)].offset == 9
        await tick_at(coordinator, clock, 4 * RETENTION_MS)
        assert coordinator.group("g") is None
    asyncio.run(scenario())
