"""Kafka-compatible key hashing, sticky partitioning of unkeyed records, round-robin, and
choosing a partitioner by name."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_plane.client.partitioner import RoundRobinPartitioner, StickyPartitioner, make_partitioner, murmur2, partition_for_key


@pytest.mark.parametrize(
    "data, expected",
    [  # Kafka's UtilsTest.testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data, expected):
    assert murmur2(data) == expected


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_key_partition_is_stable_and_in_range(key, count):
    assert 0 <= partition_for_key(key, count) < count
    assert partition_for_key(key, count) == partition_for_key(bytes(key), count)


BATCH = 1000


def test_keyed_records_ignore_stickiness():
    partitioner = StickyPartitioner(BATCH, rng=random.Random(1))
    assert partitioner.partition("t", b"k", 12) == partition_for_key(b"k", 12)


def test_unkeyed_records_stick_until_batch_size_bytes_went_there_and_their_batch_is_full():
    """KIP-794: a batch closing is no reason to move (a stream of lone records would then go
    to every partition at once); the bytes sent there are."""
    partitioner = StickyPartitioner(BATCH, rng=random.Random(1))
    first = partitioner.partition("t", None, 6)
    for _ in range(9):
        partitioner.on_append("t", first, 100, False, 6)
    partitioner.on_append("t", first, 99, True, 6)  # a full batch, but 999 bytes went there
    assert all(partitioner.partition("t", None, 6) == first for _ in range(10))
    partitioner.on_append("t", first, 1, False, 6)  # 1,000 bytes, its batch not yet full: stays
    assert partitioner.partition("t", None, 6) == first
    partitioner.on_append("t", first, 1, True, 6)
    moved = partitioner.partition("t", None, 6)
    assert moved != first


def test_twice_batch_size_moves_on_even_with_the_batch_open():
    partitioner = StickyPartitioner(BATCH, rng=random.Random(5))
    first = partitioner.partition("t", None, 6)
    partitioner.on_append("t", first, 2 * BATCH - 1, False, 6)
    assert partitioner.partition("t", None, 6) == first
    partitioner.on_append("t", first, 1, False, 6)
    assert partitioner.partition("t", None, 6) != first


def test_an_append_to_a_partition_the_topic_has_left_counts_for_nothing():
    partitioner = StickyPartitioner(BATCH, rng=random.Random(2))
    first = partitioner.partition("t", None, 6)
    partitioner.on_append("t", first, 2 * BATCH, True, 6)
    second = partitioner.partition("t", None, 6)
    partitioner.on_append("t", first, 2 * BATCH, True, 6)  # a thread that chose `first` before the move
    assert partitioner.partition("t", None, 6) == second


def test_single_partition_topic():
    partitioner = StickyPartitioner(BATCH, rng=random.Random(3))
    assert partitioner.partition("t", None, 1) == 0
    partitioner.on_append("t", 0, 2 * BATCH, True, 1)
    assert partitioner.partition("t", None, 1) == 0


def test_sticky_spreads_over_partitions():
    partitioner = StickyPartitioner(BATCH, rng=random.Random(4))
    seen = set()
    for _ in range(100):
        current = partitioner.partition("t", None, 4)
        seen.add(current)
        partitioner.on_append("t", current, BATCH, True, 4)
    assert seen == {0, 1, 2, 3}


def test_the_next_partition_has_a_leader_and_a_long_queue_makes_one_less_likely():
    """KIP-794's adaptive choice: weight = most batches waiting + 1 - a partition's own, and a
    partition with no known leader is never chosen while another has one."""
    loads = [0, None, 10, 0]  # partition 1: no leader; partition 2: ten batches waiting
    partitioner = StickyPartitioner(BATCH, lambda topic, count: loads, rng=random.Random(6))
    chosen = []
    for _ in range(2000):
        current = partitioner.partition("t", None, 4)
        chosen.append(current)
        partitioner.on_append("t", current, 2 * BATCH, True, 4)
    assert 1 not in chosen
    assert 0 < chosen.count(2) < 0.15 * len(chosen) < chosen.count(0)  # weights 11, 1, 11 (less the one just left)
    assert all(a != b for a, b in zip(chosen, chosen[1:]))  # always another partition


def test_with_no_leader_known_anywhere_any_other_partition_will_do():
    partitioner = StickyPartitioner(BATCH, lambda topic, count: [None] * count, rng=random.Random(7))
    first = partitioner.partition("t", None, 3)
    partitioner.on_append("t", first, 2 * BATCH, True, 3)
    assert partitioner.partition("t", None, 3) != first


def test_round_robin_cycles_per_topic_and_ignores_keys():
    partitioner = RoundRobinPartitioner()
    keys = [b"same", None, b"same", b"other", None, b"same", b"same"]
    assert [partitioner.partition("t", key, 3) for key in keys] == [0, 1, 2, 0, 1, 2, 0]
    assert [partitioner.partition("u", None, 2) for _ in range(3)] == [0, 1, 0]  # its own turn
    assert partitioner.partition("t", None, 3) == 1  # "t" went on where it was


def test_round_robin_follows_a_grown_partition_count():
    partitioner = RoundRobinPartitioner()
    assert [partitioner.partition("t", None, 2) for _ in range(2)] == [0, 1]
    assert [partitioner.partition("t", None, 4) for _ in range(4)] == [2, 3, 0, 1]


@given(st.lists(st.one_of(st.none(), st.binary(max_size=8)), min_size=1, max_size=200), st.integers(min_value=1, max_value=50))
def test_round_robin_spreads_evenly(keys, count):
    partitioner = RoundRobinPartitioner()
    chosen = [partitioner.partition("t", key, count) for key in keys]
    per_partition = [chosen.count(p) for p in range(count)]
    assert max(per_partition) - min(per_partition) <= 1


def test_partitioners_by_name():
    assert isinstance(make_partitioner("sticky", BATCH), StickyPartitioner)
    assert isinstance(make_partitioner("round-robin", BATCH), RoundRobinPartitioner)
    with pytest.raises(ValueError, match=r"use one of \['round-robin', 'sticky'\]"):
        make_partitioner("murmur", BATCH)
