"""Checks that the replicas of a partition agree on everything both of them have committed.

Records below a replica's high watermark are committed, so any two replicas must hold the
same records in the range both have below their HWs. With records in hand the check says
where they first differ; with only checksums (CRC over the bytes below the HW) it can
compare replicas whose HWs and log starts are equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts
from chaos.history import ReplicaOp


def replicas_differ(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Pairs of replicas that disagree below both their high watermarks."""
    for a, b in combinations(sorted(facts.replicas, key=lambda r: r.broker), 2):
        difference = _first_difference(a, b)
        if difference is not None:
            yield Anomaly(
                "replicas-differ",
                facts.partition,
                f"brokers {a.broker} and {b.broker} differ below their high watermarks ({a.high_watermark}, {b.high_watermark}): {difference}",
                {"brokers": [a.broker, b.broker], "high_watermarks": [a.high_watermark, b.high_watermark], "difference": difference},
            )


def _first_difference(a: ReplicaOp, b: ReplicaOp) -> str | None:
    """Where the two replicas' committed records first differ, or None when they agree (or
    cannot be compared)."""
    start, end = max(a.log_start, b.log_start), min(a.high_watermark, b.high_watermark)
    if a.reads is not None and b.reads is not None:
        left = {o: v for o, v in a.reads if start <= o < end}
        right = {o: v for o, v in b.reads if start <= o < end}
        for offset in range(start, end):
            if left.get(offset) != right.get(offset):
                return f"offset {offset}: {left.get(offset)!r} vs {right.get(offset)!r}"
        return None
    same_range = (a.log_start, a.high_watermark) == (b.log_start, b.high_watermark)
    if same_range and a.checksum is not None and b.checksum is not None and a.checksum != b.checksum:
        return f"checksums {a.checksum:#010x} vs {b.checksum:#010x} over offsets {start}..{end - 1}"
    return None
