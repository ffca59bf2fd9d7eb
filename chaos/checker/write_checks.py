"""Checks on what became of each write: lost, unseen, duplicated, at two offsets, read after
a definite failure (Jepsen's Kafka workload anomalies that apply to a log without
transactions); and on the log itself: holes in the final read, values nobody sent."""

from __future__ import annotations

from collections.abc import Iterator

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts


def lost_writes(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Committed writes (acknowledged, or read by a consumer, which sees only committed
    records) that the final read should hold at their offset but does not hold anywhere:
    it covers the offset, or it completed short of the highest HW anyone observed."""
    final_values = facts.final_values
    committed = {**facts.polled, **facts.acked}  # the acknowledged offset wins where both exist
    for value, offset in sorted(committed.items(), key=lambda item: item[1]):
        if value in final_values or not (facts.final_covers(offset) or facts.committed_and_gone(offset)):
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
        if value not in final_values and not facts.final_covers(offset) and not facts.committed_and_gone(offset):
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


def final_read_gaps(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Offsets the final read covers but got no record for: offsets are dense (no
    transactions or compaction in the workload), so every one below the HW holds a record."""
    final = facts.final
    if final is None:
        return
    got = {offset for offset, _ in final.reads}
    end = facts.final_end
    missing = [offset for offset in range(final.log_start, end) if offset not in got]
    if missing:
        yield Anomaly(
            "final-read-gap",
            facts.partition,
            f"the final read from {final.log_start} to {end} got no record at {len(missing)} offsets, from {missing[0]}",
            {"log_start": final.log_start, "end": end, "missing": missing[:20], "missing_count": len(missing)},
        )


def unsent_values(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Values a read (a consumer's, the final read's or a replica's) returned that no
    producer sent to this partition: invented, corrupted, or another partition's."""
    reads = [(value, offset, "a read") for value, offsets in facts.read_values.items() for offset in offsets]
    reads += [(value, offset, f"broker {r.broker}'s replica") for r in facts.replicas for offset, value in (r.reads or [])]
    reported: set[str] = set()
    for value, offset, where in sorted(reads, key=lambda item: (item[1], item[0])):
        if facts.sent_to.get(value) == facts.partition or value in reported:
            continue
        reported.add(value)
        elsewhere = facts.sent_to.get(value)
        why = f"it was sent to partition {elsewhere}" if elsewhere is not None else "no producer sent it"
        yield Anomaly(
            "unsent-value",
            facts.partition,
            f"{where} returned {value!r} at offset {offset}, but {why}",
            {"value": value, "offset": offset, "where": where, "sent_to_partition": elsewhere},
        )
