"""Checks on what became of each write: lost, unseen, duplicated, at two offsets, read after
a definite failure (Jepsen's Kafka workload anomalies that apply to a log without
transactions)."""

from __future__ import annotations

from collections.abc import Iterator

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts


def lost_writes(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Committed writes (acknowledged, or read by a consumer, which sees only committed
    records) that the final read should hold at their offset but does not hold anywhere."""
    final_values = facts.final_values
    committed = {**facts.polled, **facts.acked}  # the acknowledged offset wins where both exist
    for value, offset in sorted(committed.items(), key=lambda item: item[1]):
        if value in final_values or not facts.final_covers(offset):
            continue
        how = "acknowledged" if value in facts.acked else "read by a consumer"
        found = sorted(v for o, v in facts.final.reads if o == offset) if facts.final else []
        yield Anomaly(
            "lost-write",
            facts.partition,
            f"{value!r} was {how} at offset {offset} but the final read holds {found[0]!r} there" if found
            else f"{value!r} was {how} at offset {offset} but the final read has nothing there",
            {"value": value, "offset": offset, "acknowledged": value in facts.acked, "final_value": found[0] if found else None},
        )


def unseen(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Acknowledged writes absent from the final read whose offset it never reached."""
    final_values = facts.final_values
    for value, offset in sorted(facts.acked.items(), key=lambda item: item[1]):
        if value not in final_values and not facts.final_covers(offset):
            reached = facts.final.high_watermark if facts.final else None
            yield Anomaly(
                "unseen",
                facts.partition,
                f"{value!r} was acknowledged at offset {offset}; the final read ended at {reached}",
                {"value": value, "offset": offset, "final_high_watermark": reached},
            )


def duplicates(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Values at two or more offsets, counting the acknowledged offset as one of them."""
    for value, read_at in sorted(facts.read_values.items()):
        offsets = set(read_at)
        if value in facts.acked:
            offsets.add(facts.acked[value])
        if len(offsets) > 1:
            yield Anomaly(
                "duplicate",
                facts.partition,
                f"{value!r} appears at offsets {sorted(offsets)}",
                {"value": value, "offsets": sorted(offsets)},
            )


def inconsistent_offsets(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Offsets that hold more than one value across acknowledgements and reads."""
    for offset, values in sorted(facts.offset_values.items()):
        if len(values) > 1:
            yield Anomaly(
                "inconsistent-offsets",
                facts.partition,
                f"offset {offset} holds {len(values)} values: {sorted(values)}",
                {"offset": offset, "values": sorted(values)},
            )


def aborted_reads(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Values read although their send definitely failed."""
    for value in sorted(facts.failed & set(facts.read_values)):
        yield Anomaly(
            "aborted-read",
            facts.partition,
            f"{value!r} failed definitely when sent, yet was read at {sorted(facts.read_values[value])}",
            {"value": value, "offsets": sorted(facts.read_values[value])},
        )
