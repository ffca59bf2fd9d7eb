"""Chooses the partition for a record, by one of two partitioners a producer selects by name.

`sticky` (the default, Kafka's default): keyed records use the same function as Kafka's Java
client (murmur2, seed 0x9747b28c, sign bit cleared, modulo the partition count), so a key
lands on the same partition number whichever client wrote it. Records without a key stick
to one partition until `batch_size` bytes have gone to it, then move on to another at random
(Kafka's uniform sticky partitioner, KIP-794): the move waits for the partition's open batch
to fill, or for twice `batch_size`, so that no half-filled batch is left behind. The next
partition is one with a known leader, the ones with fewer batches waiting more likely (KIP-794's
adaptive choice: a slow or failing broker's partitions, whose batches pile up, get fewer new
records; a partition with no leader gets none while another has one). Moving on
each time a batch closed (KIP-480, its predecessor) spread a stream of lone records over
every partition at once: each record found a partition with nothing in flight and went as a
request of its own, where sticking to one partition lets the records that arrive during its
request's round trip leave together in the next (record_accumulator.py), fewer requests for
the same records.

`round-robin` (Kafka's RoundRobinPartitioner): every record, keyed or not, goes to the
topic's next partition in turn, for an even spread record by record when keys are skewed or
absent, at the cost of smaller batches and of the key's partition affinity.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: a signed 32-bit hash of `data`."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    words = length // 4
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[words * 4 :]
    extra = len(tail)
    if extra >= 3:
        h ^= tail[2] << 16
    if extra >= 2:
        h ^= tail[1] << 8
    if extra >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    """Kafka's default partition for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partition_count


@dataclass
class _Stint:
    """A topic's sticky partition and the bytes of unkeyed records sent to it so far."""

    partition: int
    produced_bytes: int = 0


# Per partition of a topic: the batches waiting to be sent, or None when it has no known leader.
PartitionLoads = Callable[[str, int], Sequence[int | None]]


class StickyPartitioner:
    """Keyed records by hash; unkeyed records to a per-topic partition that moves on once
    `batch_size` bytes went to it (`on_append`), to one chosen by ``loads`` (none: any)."""

    def __init__(self, batch_size: int, loads: PartitionLoads | None = None, rng: random.Random | None = None) -> None:
        assert batch_size > 0, batch_size
        self._batch_size = batch_size
        self._loads = loads
        self._rng = rng or random.Random()
        self._stints: dict[str, _Stint] = {}

    def partition(self, topic: str, key: bytes | None, partition_count: int) -> int:
        """The partition for a record of `topic` with `key`."""
        if key is not None:
            return partition_for_key(key, partition_count)
        stint = self._stints.get(topic)
        if stint is None or stint.partition >= partition_count:
            stint = self._stints[topic] = _Stint(self._next(topic, -1, partition_count))
        return stint.partition

    def on_append(self, topic: str, partition: int, size_bytes: int, batch_full: bool, partition_count: int) -> None:
        """Counts ``size_bytes`` of unkeyed records appended to ``partition`` (which `partition`
        chose) and moves the topic on once `batch_size` bytes went there and ``batch_full``
        (the batch they went into is full), or once twice that went there in any case
        (Kafka's `BuiltInPartitioner.updatePartitionInfo`)."""
        stint = self._stints.get(topic)
        if stint is None or stint.partition != partition:
            return  # someone already moved on since `partition` was chosen
        stint.produced_bytes += size_bytes
        if stint.produced_bytes >= 2 * self._batch_size or (batch_full and stint.produced_bytes >= self._batch_size):
            self._stints[topic] = _Stint(self._next(topic, partition, partition_count))

    def _next(self, topic: str, previous: int, partition_count: int) -> int:
        """A partition other than ``previous`` (unless it is the only one), at random among those
        with a known leader (any, when none has one), weighted by the most batches waiting at
        any of them plus one, less its own (Kafka's `BuiltInPartitioner.nextPartition`)."""
        if partition_count <= 1:
            return 0
        loads = self._loads(topic, partition_count) if self._loads is not None else [0] * partition_count
        others = [p for p in range(partition_count) if p != previous]
        led = [p for p in others if loads[p] is not None]
        if not led:
            return self._rng.choice(others)
        most = max(loads[p] or 0 for p in led)
        return self._rng.choices(led, [most + 1 - (loads[p] or 0) for p in led])[0]


class RoundRobinPartitioner:
    """Each topic's records to partitions 0, 1, 2, ... in turn, whatever their key."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partition_count: int) -> int:
        """The partition after the one this topic's previous record got (key ignored)."""
        assert partition_count > 0
        turn = self._next.get(topic, 0)
        self._next[topic] = turn + 1
        return turn % partition_count


PARTITIONERS = ("sticky", "round-robin")


def make_partitioner(name: str, batch_size: int, loads: PartitionLoads | None = None) -> StickyPartitioner | RoundRobinPartitioner:
    """The partitioner a producer's `partitioner=` names (``batch_size`` and ``loads``: the
    producer's, for the sticky one); a clear error for any other name."""
    if name == "sticky":
        return StickyPartitioner(batch_size, loads)
    if name == "round-robin":
        return RoundRobinPartitioner()
    raise ValueError(f"partitioner={name!r}: use one of {sorted(PARTITIONERS)}")
