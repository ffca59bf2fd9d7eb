"""Chooses the partition for a record, by one of two partitioners a producer selects by name.

`sticky` (the default, Kafka's default): keyed records use the same function as Kafka's Java
client (murmur2, seed 0x9747b28c, sign bit cleared, modulo the partition count), so a key
lands on the same partition number whichever client wrote it. Records without a key stick
to one partition until its open batch is closed, then move on (KIP-480): batches fill up
instead of every partition getting a sliver of each linger period, which means fewer,
larger requests.

`round-robin` (Kafka's RoundRobinPartitioner): every record, keyed or not, goes to the
topic's next partition in turn, for an even spread record by record when keys are skewed or
absent, at the cost of smaller batches and of the key's partition affinity.
"""

from __future__ import annotations

import random
import struct

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


class StickyPartitioner:
    """Keyed records by hash; unkeyed records to a per-topic partition that changes only
    when `on_new_batch` reports that the current one's batch was closed."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partition_count: int) -> int:
        """The partition for a record of `topic` with `key`."""
        if key is not None:
            return partition_for_key(key, partition_count)
        current = self._sticky.get(topic)
        if current is None or current >= partition_count:
            current = self._sticky[topic] = self._rng.randrange(partition_count)
        return current

    def on_new_batch(self, topic: str, previous: int, partition_count: int) -> int:
        """Moves the topic's sticky partition off `previous` (whose batch just closed)."""
        current = self._sticky.get(topic)
        if current is not None and current != previous:
            return current  # someone already moved on since `previous` was chosen
        if partition_count > 1:
            choice = self._rng.randrange(partition_count - 1)
            current = choice if choice < previous else choice + 1
        else:
            current = 0
        self._sticky[topic] = current
        return current


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


PARTITIONERS = {"sticky": StickyPartitioner, "round-robin": RoundRobinPartitioner}


def make_partitioner(name: str) -> StickyPartitioner | RoundRobinPartitioner:
    """The partitioner a producer's `partitioner=` names; a clear error for any other name."""
    if name not in PARTITIONERS:
        raise ValueError(f"partitioner={name!r}: use one of {sorted(PARTITIONERS)}")
    return PARTITIONERS[name]()
