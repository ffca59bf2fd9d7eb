"""Replica placement for new partitions: Kafka's rack-unaware ``assignReplicasToBrokers``.

Partition p's first replica (its preferred leader) is broker ``(p + start_index) % n``, so
leaders go round-robin over the brokers; the other replicas follow at a shift that grows
every n partitions, so followers spread too. Pure: the caller picks ``start_index`` (the
controller derives it from the topic id, so different topics start on different brokers).
"""

from __future__ import annotations

from typing import Sequence


def assign_replicas(
    broker_ids: Sequence[int],
    partition_count: int,
    replication_factor: int,
    start_index: int,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition + partition_count - 1``."""
    brokers = sorted(broker_ids)
    n = len(brokers)
    assert 1 <= replication_factor <= n, f"replication factor {replication_factor} needs at least that many brokers, have {n}"
    start = start_index % n
    shift = start_index % n
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(first_partition, first_partition + partition_count):
        # the shift moves on every n partitions counted from 0, as in Kafka, so that partitions
        # added later continue the same pattern
        replica_shift = shift + partition // n
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (replica_shift + j) % (n - 1)) % n])
        assignment[partition] = tuple(replicas)
    return assignment
