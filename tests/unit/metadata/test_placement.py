"""Placement: Kafka's rack-unaware assignment spreads leaders and followers evenly."""

from __future__ import annotations

from collections import Counter

import pytest

from metadata_quorum.placement import assign_replicas


@pytest.mark.parametrize("brokers,partitions,rf", [((1, 2, 3), 6, 3), ((1, 2, 3), 6, 1), ((1, 2, 3, 4), 12, 2), ((5, 9), 4, 2), ((1, 2, 3, 4, 5), 50, 3)])
@pytest.mark.parametrize("start", [0, 1, 7])
def test_leaders_spread_evenly_and_replicas_distinct(brokers, partitions, rf, start):
    assignment = assign_replicas(brokers, partitions, rf, start)
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1
    replica_load = Counter(b for replicas in assignment.values() for b in replicas)
    assert max(replica_load.values()) - min(replica_load.get(b, 0) for b in brokers) <= 1


def test_added_partitions_continue_the_pattern():
    whole = assign_replicas((1, 2, 3), 6, 2, start_index=4)
    head = assign_replicas((1, 2, 3), 3, 2, start_index=4)
    tail = assign_replicas((1, 2, 3), 3, 2, start_index=4, first_partition=3)
    assert {**head, **tail} == whole


def test_start_index_rotates_first_leader():
    assert assign_replicas((1, 2, 3), 1, 1, 0)[0] == (1,)
    assert assign_replicas((1, 2, 3), 1, 1, 1)[0] == (2,)
