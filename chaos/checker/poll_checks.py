"""Checks on what consumers were told: reads that jump over records, a high watermark or log
start that goes down (for anyone, in real time), records above the high watermark.

Offsets that go backwards within a consumer are not checked here: the client hands out only
records at or after its position (it cuts batches that start below it), so no history could
show them (a broker serving records below the fetch offset is invisible to a client's history
and is left to the broker's own fetch tests)."""

from __future__ import annotations

from collections.abc import Iterator

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts, Watermark


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
    """A high watermark or log start offset told lower than one told before: in one
    process's own order, or, for an answer timed by its request (the observer's, the final
    read's), lower than anyone had been told before that request was sent. The final read
    comes after everything, so its HW must reach the highest HW anyone was told."""
    for kind, seen in (("hw-backwards", facts.high_watermarks), ("log-start-backwards", facts.log_starts)):
        what = "high watermark" if kind == "hw-backwards" else "log start offset"
        for before, after in _regressions(seen):
            yield Anomaly(
                kind,
                facts.partition,
                f"{after.process} was told the {what} {after.value} (by {after.end_s:.2f}s), after {before.process} "
                f"had been told {before.value} (by {before.end_s:.2f}s)",
                {"process": after.process, "before": before.value, "after": after.value, "before_process": before.process,
                 "at_s": round(after.end_s, 3)},
            )


def _regressions(seen: list[Watermark]) -> Iterator[tuple[Watermark, Watermark]]:
    """(the highest earlier value, the lower later one) for each observation below what was
    known before it: one sweep in start order over the observations ended before each
    (compared only with timed observations) and each process's own earlier ones."""
    by_end = sorted(seen, key=lambda w: w.end_s)
    highest: Watermark | None = None
    mine: dict[str, Watermark] = {}  # process -> its highest so far, in its own order
    ended = 0
    for after in sorted(seen, key=lambda w: w.start_s):
        while ended < len(by_end) and by_end[ended].end_s < after.start_s:
            if highest is None or by_end[ended].value > highest.value:
                highest = by_end[ended]
            ended += 1
        own = mine.get(after.process)
        anyone = highest if after.timed else None
        before = max((w for w in (anyone, own) if w is not None), key=lambda w: w.value, default=None)
        if before is not None and after.value < before.value:
            yield before, after
        if own is None or after.value > own.value:
            mine[after.process] = after


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
