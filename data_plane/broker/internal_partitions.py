"""What the group and transaction coordinators share about the internal partitions they run on
(`__consumer_offsets`, `__transaction_state`): which of them this broker leads, replaying one
from its log into memory, and waiting until the HW covers what was replayed.

A coordinator's state is the replay of its partition, so a new leader must replay to its log
end and then wait until that end is committed before it answers: what it replayed above the
HW could still be truncated by the next leader change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from data_plane.broker.wakeups import wait_until_woken, woken_by
from data_plane.record_batch import DecodedBatch, decode_batches

LOAD_READ_BYTES = 1 << 20  # one read while replaying an internal partition
HW_WAIT_BACKSTOP_S = 1.0  # a load waits on the partition's HW wakeups; this only bounds a missed one


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
