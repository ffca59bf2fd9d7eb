"""The coordinator shell over a fake replica manager (a log in memory, writes that succeed or
fail on command): loading replays the partition; a write that fails leaves the group as it
was and answers a retriable error; a write whose outcome is unknown reloads the state from
the log; losing leadership unloads; a coordinator that takes over rebuilds the same groups."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from data_plane.partition_errors import PartitionError
from data_plane.requests import ProduceResult
from data_plane.groups.coordinator import GroupCoordinator
from data_plane.groups.membership import GroupSettings, Heartbeat, Refused
from data_plane.groups.offsets import OffsetToCommit
from server_common.internal_topics import OFFSETS_TOPIC
from data_plane.record_batch import read_header, stamp_batch
from server_common.errors import ErrorCode


@dataclass
class FakePartition:
    """One offsets partition's log: batches stamped with offsets; HW = log end (acks=all done)."""

    leader_epoch: int = 1
    is_leader: bool = True
    offline_reason: str | None = None
    batches: list[bytes] = field(default_factory=list)
    log_end_offset: int = 0
    log_start_offset: int = 0

    @property
    def state(self):
        return SimpleNamespace(leader_epoch=self.leader_epoch)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    def append(self, batch: bytes) -> None:
        buf = bytearray(batch)
        stamp_batch(buf, 0, self.log_end_offset, self.leader_epoch)
        self.batches.append(bytes(buf))
        self.log_end_offset = read_header(buf).next_offset

    def read(self, offset: int, max_bytes: int, upto: int) -> bytes:
        return b"".join(b for b in self.batches if offset <= read_header(b).base_offset < upto)


class FakeReplicas:
    def __init__(self) -> None:
        self.partition = FakePartition()
        self.partitions = {(OFFSETS_TOPIC, 0): self.partition}
        topics = {OFFSETS_TOPIC: SimpleNamespace(partitions={0: None}), "t": SimpleNamespace(partitions={i: None for i in range(4)})}
        self.image = SimpleNamespace(topics=topics)
        self.fail_with: ErrorCode | None = None
        self.append_on_failure = False
        self.replicated: asyncio.Event | None = None  # when set: a write appends, then waits for it (its HW wait)
        self.appended = asyncio.Event()  # set at each append

    async def produce(self, acks, timeout_ms, items, transactional_id=""):
        [item] = items
        result = ProduceResult(item.topic, item.partition)
        if self.fail_with is None or self.append_on_failure:
            result.base_offset = self.partition.log_end_offset
            self.partition.append(item.batches)
            self.appended.set()
        if self.replicated is not None:
            await self.replicated.wait()
        if self.fail_with is not None:
            result.error = PartitionError(self.fail_with, "injected")
        return [result]

    def leader_hint(self, topic, index):
        return SimpleNamespace(leader_id=-1)


async def loaded(replicas: FakeReplicas) -> GroupCoordinator:
    coordinator = GroupCoordinator(1, replicas, GroupSettings(), clock_ms=lambda: 1000)
    coordinator.sync_leadership()
    await coordinator.shards[0].task
    assert coordinator.shards[0].loaded
    return coordinator


def join(member: str) -> Heartbeat:
    return Heartbeat("g", member, 0, subscription_changed=True, topic_names=("t",), owned=frozenset())


def test_a_failed_write_changes_nothing_and_a_new_coordinator_rebuilds_the_same_groups():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        first = await coordinator.heartbeat(join("a"))
        assert len(first.assignment) == 4
        before = coordinator.group("g").copy()
        replicas.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(Refused) as refused:
            await coordinator.heartbeat(join("b"))
        assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert coordinator.group("g") == before and "b" not in coordinator.group("g").members
        replicas.fail_with = None
        await coordinator.heartbeat(join("b"))
        successor = await loaded(replicas)  # another broker taking the partition over: same log
        assert successor.group("g") == coordinator.group("g")
    asyncio.run(scenario())


def test_an_outcome_unknown_write_reloads_from_the_log():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.heartbeat(join("a"))
        replicas.fail_with, replicas.append_on_failure = ErrorCode.REQUEST_TIMED_OUT, True
        with pytest.raises(Refused):
            await coordinator.heartbeat(join("b"))
        replicas.fail_with = None
        await coordinator.shards[0].task  # the reload
        assert set(coordinator.group("g").members) == {"a", "b"}  # the log had it: so does memory
    asyncio.run(scenario())


def test_losing_leadership_unloads_and_answers_not_coordinator():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.heartbeat(join("a"))
        replicas.partition.is_leader = False
        coordinator.sync_leadership()
        with pytest.raises(Refused) as refused:
            await coordinator.heartbeat(join("b"))
        assert refused.value.code == ErrorCode.NOT_COORDINATOR
    asyncio.run(scenario())


def test_concurrent_requests_of_one_group_share_a_write():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        answers = await asyncio.gather(*(coordinator.heartbeat(join(m)) for m in "abcd"))
        assert all(a.error == ErrorCode.NONE for a in answers)
        assert len(replicas.partition.batches) == 1
        assert set(coordinator.group("g").members) == set("abcd")
    asyncio.run(scenario())


def test_offsets_and_a_group_are_deleted_through_the_shell():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        await coordinator.commit("g", "", -1, [OffsetToCommit("t", 0, 5), OffsetToCommit("t", 1, 6)])
        assert await coordinator.delete_offsets("g", [("t", 0)]) == {("t", 0): (ErrorCode.NONE, "")}
        assert set(coordinator.group("g").offsets) == {("t", 1)}
        await coordinator.delete_group("g")
        assert coordinator.group("g") is None
    asyncio.run(scenario())
