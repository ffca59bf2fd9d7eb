"""Checks on what each consumer saw, in the order it saw it: offsets that go backwards or
jump, a high watermark or log start that goes down, records above the high watermark."""

from __future__ import annotations

from collections.abc import Iterator

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts


def non_monotonic_polls(facts: PartitionFacts) -> Iterator[Anomaly]:
    """A consumer's next offset not above its previous one, within a run between seeks."""
    for process, track in sorted(facts.consumers.items()):
        for run in track.runs:
            for (before, _), (after, value) in zip(run, run[1:]):
                if after <= before:
                    yield Anomaly(
                        "non-monotonic-poll",
                        facts.partition,
                        f"{process} read offset {after} ({value!r}) after offset {before}",
                        {"process": process, "previous_offset": before, "offset": after},
                    )


def skipping_polls(facts: PartitionFacts) -> Iterator[Anomaly]:
    """A consumer's next offset beyond previous + 1 where a skipped offset holds a record.

    Offsets are dense (every offset below the HW holds a record), so any gap the final read
    or another read fills was skipped."""
    known = facts.offset_values
    for process, track in sorted(facts.consumers.items()):
        for run in track.runs:
            for (before, _), (after, _) in zip(run, run[1:]):
                skipped = [o for o in range(before + 1, after) if o in known]
                if skipped:
                    yield Anomaly(
                        "skipping-poll",
                        facts.partition,
                        f"{process} read offset {after} right after {before}, skipping {len(skipped)} records from {skipped[0]}",
                        {"process": process, "previous_offset": before, "offset": after, "skipped": skipped[:20]},
                    )


def watermarks_backwards(facts: PartitionFacts) -> Iterator[Anomaly]:
    """A consumer told a lower high watermark or log start than it was told before."""
    for process, track in sorted(facts.consumers.items()):
        for kind, seen in (("hw-backwards", track.high_watermarks), ("log-start-backwards", track.log_starts)):
            for (_, before), (at_s, after) in zip(seen, seen[1:]):
                if after < before:
                    what = "high watermark" if kind == "hw-backwards" else "log start offset"
                    yield Anomaly(
                        kind,
                        facts.partition,
                        f"{process} saw the {what} go from {before} to {after} at {at_s:.2f}s",
                        {"process": process, "before": before, "after": after, "at_s": round(at_s, 3)},
                    )


def reads_above_hw(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Records handed out at or above the high watermark of the same answer."""
    for process, offset, hw in facts.reads_above_hw:
        yield Anomaly(
            "read-above-hw",
            facts.partition,
            f"{process} read offset {offset} in an answer whose high watermark was {hw}",
            {"process": process, "offset": offset, "high_watermark": hw},
        )
    final = facts.final
    if final is not None:
        for offset, value in final.reads:
            if offset >= final.high_watermark:
                yield Anomaly(
                    "read-above-hw",
                    facts.partition,
                    f"the final read got offset {offset} ({value!r}) above its high watermark {final.high_watermark}",
                    {"process": "final-read", "offset": offset, "high_watermark": final.high_watermark},
                )
