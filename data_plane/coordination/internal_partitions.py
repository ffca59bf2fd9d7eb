"""What the group and transaction coordinators share about the internal partitions they run on
(`__consumer_offsets`, `__transaction_state`): which of them this broker leads, replaying one
from its log into memory, and waiting until the HW covers what was replayed.

A coordinator's state is the replay of its partition, so a new leader must replay to its log
end and then wait until that end is committed before it answers: what it replayed above the
HW could still be truncated by the next leader change."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog

from data_plane.wakeups import wait_until_woken, woken_by
from data_plane.coordination import Refused
from server_common.internal_topics import offsets_partition
from data_plane.record_batch import DecodedBatch, decode_batches
from server_common.errors import ErrorCode

LOAD_READ_BYTES = 1 << 20  # one read while replaying an internal partition
HW_WAIT_BACKSTOP_S = 1.0  # a load waits on the partition's HW wakeups; this only bounds a missed one
LOAD_RETRY_MS = 1000  # after a failed load (a damaged range being repaired, say): not a retry per timer tick

log = structlog.get_logger("kraftlog.coordinator")


def partition_count(replicas, topic: str) -> int:
    """Partitions of ``topic`` in the broker's metadata image (0 before the topic exists)."""
    image = replicas.image
    described = image.topics.get(topic) if image is not None else None
    return len(described.partitions) if described is not None else 0


def led_partitions(replicas, topic: str) -> dict[int, int]:
    """Index → leader epoch of each online partition of ``topic`` this broker leads."""
    led: dict[int, int] = {}
    for index in range(partition_count(replicas, topic)):
        partition = replicas.partitions.get((topic, index))
        if partition is not None and partition.is_leader and partition.offline_reason is None:
            led[index] = partition.state.leader_epoch
    return led


async def replay(partition, on_batch: Callable[[DecodedBatch], int]) -> tuple[int, int]:
    """Feed every batch from the log start to the current log end to ``on_batch`` (which
    returns how many records it took), yielding to the event loop between reads so a large
    partition does not stall the broker. Returns (the log end replayed to, records)."""
    end = partition.log_end_offset
    offset, records = partition.log_start_offset, 0
    while offset < end:
        data = partition.read(offset, LOAD_READ_BYTES, end)
        if not data:
            break
        for batch in decode_batches(data):
            offset = batch.header.next_offset
            records += on_batch(batch)
        await asyncio.sleep(0)
    return end, records


async def wait_until_committed(partition, end: int, still_wanted: Callable[[], bool]) -> bool:
    """Wait until the partition's HW reaches ``end`` (the new leader's HW catches up with its
    followers' next fetches); False if ``still_wanted`` turned false first."""
    while partition.high_watermark < end:
        with woken_by([partition.waiter()]) as moved:
            if partition.high_watermark >= end:
                break
            await wait_until_woken(moved, HW_WAIT_BACKSTOP_S)
        if not still_wanted():
            return False
    return True


@dataclass
class Shard:
    """A coordinator's state of one internal partition it leads at ``leader_epoch``: what
    `LedShards` keeps of every shard; each coordinator's shard adds its own state."""

    partition: int
    leader_epoch: int
    loaded: bool = False  # replayed to the log end, and that end committed
    active: bool = True  # False once unloaded: a write or load still running must stop
    task: asyncio.Task | None = None  # the load


S = TypeVar("S", bound=Shard)


class LedShards(Generic[S]):
    """A coordinator's shards of one internal topic: one per partition this broker leads,
    keyed by index, each living for the leader epoch it was started in. ``sync`` (on every
    metadata change and timer tick) starts a shard and its load for each partition newly led,
    and unloads the others; a shard whose load failed is not started again for LOAD_RETRY_MS."""

    def __init__(
        self, topic: str, broker_id: int, replicas, clock_ms: Callable[[], int], new_shard: Callable[[int, int], S],
        load: Callable[[S], Awaitable[None]], unloaded: Callable[[S, str], None],
    ) -> None:
        """``load`` replays a new shard (raising on failure); ``unloaded`` releases what a
        shard holds beyond its load task and logs it."""
        self.topic = topic
        self.broker_id = broker_id
        self.replicas = replicas  # the broker's ReplicaManager
        self.clock_ms = clock_ms
        self.by_index: dict[int, S] = {}
        self._new_shard = new_shard
        self._load = load
        self._unloaded = unloaded
        self._retry_at_ms: dict[int, int] = {}
        self._log = log.bind(broker_id=broker_id, topic=topic)

    def partition_count(self) -> int:
        return partition_count(self.replicas, self.topic)

    def loaded(self) -> list[S]:
        """The shards replayed and committed: the ones whose state may be listed."""
        return [shard for shard in self.by_index.values() if shard.loaded]

    def sync(self) -> None:
        led = led_partitions(self.replicas, self.topic)
        for index, shard in list(self.by_index.items()):
            if led.get(index) != shard.leader_epoch:
                self.unload(shard, "leadership moved")
        now = self.clock_ms()
        for index, epoch in led.items():
            if index not in self.by_index and self._retry_at_ms.get(index, 0) <= now:
                shard = self.by_index[index] = self._new_shard(index, epoch)
                shard.task = asyncio.ensure_future(self._guarded_load(shard))

    def unload(self, shard: S, why: str) -> None:
        shard.active = False
        if shard.task is not None:
            shard.task.cancel()
        if self.by_index.get(shard.partition) is shard:
            del self.by_index[shard.partition]
        self._unloaded(shard, why)

    async def _guarded_load(self, shard: S) -> None:
        try:
            await self._load(shard)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing load must not leave a shard answering "loading" forever
            self._log.exception("loading a coordinator partition failed; retrying", partition=shard.partition,
                                leader_epoch=shard.leader_epoch, retry_in_ms=LOAD_RETRY_MS)
            self._retry_at_ms[shard.partition] = self.clock_ms() + LOAD_RETRY_MS
            self.unload(shard, "load failed")

    def shard_for(self, key: str, what: str, find_hint: str = "") -> S:
        """The loaded shard that coordinates ``key`` (a group or transactional id, named by
        ``what`` in errors), or Refused NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
        saying where to go. ``find_hint``: how FindCoordinator must be called to create the topic."""
        count = self.partition_count()
        if count == 0:
            raise Refused(ErrorCode.NOT_COORDINATOR, f"the {self.topic} topic does not exist yet: call FindCoordinator"
                                 f"{find_hint} (it creates it) and retry")
        index = offsets_partition(key, count)
        shard = self.by_index.get(index)
        leader = self.replicas.leader_hint(self.topic, index).leader_id
        if shard is None and leader == self.broker_id:  # led here by metadata; the timer starts the shard within a tick
            raise Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"broker {self.broker_id} is starting to load "
                                 f"{self.topic}-{index}: retry shortly")
        if shard is None:
            raise Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} does not coordinate {what} {key!r} "
                                 f"({self.topic}-{index} is led by broker {leader}): call FindCoordinator and retry there")
        if not shard.loaded:
            raise Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"broker {self.broker_id} is loading {self.topic}-{index}: retry shortly")
        return shard
