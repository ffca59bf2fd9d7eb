"""How many replicas each broker holds against what it registered it can host; pure.

A broker registers ``max_replicas`` (from its open-file budget, or ``--max-replicas``;
0 from a broker that states no limit). The controller's decisions that add replicas to
brokers (topic creation, partition increase, reassignment) ask ``capacity_problem`` with
what they would add, and refuse the whole topic or partition when any broker would go
past its limit, so nothing is half created. Replicas count where they are assigned:
the replica list of every partition (both sides of a reassignment in progress) and the
partitions of topic creations still in flight.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from metadata_quorum.image import MetadataImage

SIZING_DOC = "docs/operations.md, Sizing"


def replica_counts(image: MetadataImage) -> Counter[int]:
    """Replicas assigned to each broker."""
    counts: Counter[int] = Counter()
    for topic in image.topics.values():
        for p in topic.partitions.values():
            counts.update(p.replicas)
    for pending in image.pending_partitions.values():
        for p in pending.values():
            counts.update(p.replicas)
    return counts


def added_replicas(replica_lists: Iterable[Iterable[int]]) -> Counter[int]:
    """Replicas per broker of some new replica lists."""
    added: Counter[int] = Counter()
    for replicas in replica_lists:
        added.update(replicas)
    return added


def capacity_problem(image: MetadataImage, held: Counter[int], added: Counter[int], what: str) -> str | None:
    """Why adding ``added`` replicas to brokers already holding ``held`` goes past a broker's
    limit (the first such broker, by id), or None. ``what`` names the request in the message."""
    for broker_id in sorted(added):
        broker = image.brokers.get(broker_id)
        limit = broker.max_replicas if broker is not None else 0
        after = held[broker_id] + added[broker_id]
        if limit and after > limit:
            return (
                f"{what} would put {after} replicas on broker {broker_id} ({held[broker_id]} now + {added[broker_id]}), "
                f"over its capacity of {limit} (max_replicas, from its open-file limit or --max-replicas); refused, "
                f"nothing changed: add brokers, raise that broker's open-file limit or --max-replicas, or ask for fewer "
                f"partitions or replicas ({SIZING_DOC})"
            )
    return None
