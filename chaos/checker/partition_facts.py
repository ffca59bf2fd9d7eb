"""What a history says about each partition, gathered once for every check to use.

Writes by outcome, every (offset, value) anyone observed, each consumer's reads in the order
it made them (split where it seeked), every high watermark and log start anyone was told
(with when it was true, as far as the history can say), and the final read. Checks stay small and pure
because they only ask questions of these facts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from chaos.history import ConvergenceOp, FinalReadOp, Op, PollOp, ReplicaOp, Read, SeekOp, SendOp


@dataclass
class ConsumerTrack:
    """One consumer's view of one partition: runs of reads between seeks."""

    runs: list[list[Read]] = field(default_factory=lambda: [[]])


@dataclass(frozen=True)
class Watermark:
    """A high watermark or log start offset ``process`` was told by ``end_s``.

    ``timed`` when the value was also true at some moment at or after ``start_s``: an
    answer to a request sent then (the observer's ListOffsets, the final read). A
    consumer's value is not timed: the fetch answer or stream message that carried it may
    have been built long before the consumer took it (fetched ahead, queued in the stream),
    so it is only known to be true by ``end_s``."""

    process: str
    start_s: float
    end_s: float
    value: int
    timed: bool


@dataclass
class PartitionFacts:
    """Everything the history says about one partition."""

    partition: int
    acked: dict[str, int] = field(default_factory=dict)  # value -> acknowledged offset
    sent_to: dict[str, int] = field(default_factory=dict)  # every value sent in the run (any partition) -> its partition
    failed: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    read_values: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))  # value -> offsets read at
    offset_values: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))  # offset -> values (reads and acks)
    polled: dict[str, int] = field(default_factory=dict)  # value -> offset, read by a consumer poll
    consumers: dict[str, ConsumerTrack] = field(default_factory=lambda: defaultdict(ConsumerTrack))
    high_watermarks: list[Watermark] = field(default_factory=list)  # consumers', the observer's and the final read's
    log_starts: list[Watermark] = field(default_factory=list)
    reads_above_hw: list[tuple[str, int, int]] = field(default_factory=list)  # (process, offset, hw)
    final: FinalReadOp | None = None
    replicas: list[ReplicaOp] = field(default_factory=list)  # of every comparison
    convergence: list[ConvergenceOp] = field(default_factory=list)  # one per comparison

    def replicas_by_label(self) -> dict[str, list[ReplicaOp]]:
        """The replicas of each comparison (after healing, after each restart), by broker."""
        grouped: dict[str, list[ReplicaOp]] = {}
        for replica in sorted(self.replicas, key=lambda r: r.broker):
            grouped.setdefault(replica.label, []).append(replica)
        return grouped

    @property
    def final_values(self) -> dict[str, int]:
        """value -> offset in the final read (empty when there was none)."""
        return {value: offset for offset, value in (self.final.reads if self.final else [])}

    def final_covers(self, offset: int) -> bool:
        """Whether the final read reached ``offset`` (so a write there must appear in it):
        up to the HW when it completed, else up to the last record it got."""
        final = self.final
        return final is not None and final.log_start <= offset < self.final_end

    @property
    def final_end(self) -> int:
        """Where the final read ended: its HW when it completed, else one past the last
        record it got (0 when there was none)."""
        final = self.final
        if final is None:
            return 0
        return final.high_watermark if final.complete else (final.reads[-1][0] + 1 if final.reads else final.log_start)

    @property
    def highest_hw_observed(self) -> int:
        """The highest HW anyone was told before the final read (0 when none): every offset
        below it was committed, so a complete final read must reach it."""
        return max((w.value for w in self.high_watermarks if w.process != FINAL_READ), default=0)

    def committed_and_gone(self, offset: int) -> bool:
        """Whether ``offset`` lies below the highest HW observed yet beyond what a complete
        final read reached: a committed record the log no longer holds."""
        final = self.final
        return final is not None and final.complete and final.high_watermark <= offset < self.highest_hw_observed


FINAL_READ = "final-read"  # the process name of the final read's watermarks


def gather(ops: list[Op]) -> dict[int, PartitionFacts]:
    """Facts per partition from a history's ops (in the order they were recorded)."""
    facts: dict[int, PartitionFacts] = {}
    sent_to: dict[str, int] = {}

    def of(partition: int) -> PartitionFacts:
        return facts.setdefault(partition, PartitionFacts(partition, sent_to=sent_to))

    polls = sorted((op for op in ops if isinstance(op, (PollOp, SeekOp))), key=_consumer_order)
    for op in ops:
        if isinstance(op, SendOp):
            sent_to[op.value] = op.partition
            _add_send(of(op.partition), op)
        elif isinstance(op, FinalReadOp):
            assert of(op.partition).final is None, f"two final reads of partition {op.partition}"
            of(op.partition).final = op
            _observe(of(op.partition), op.reads)
            # Every worker has stopped before the final read: its watermarks come after all.
            of(op.partition).high_watermarks.append(Watermark(FINAL_READ, op.at_s, op.at_s, op.high_watermark, timed=True))
            of(op.partition).log_starts.append(Watermark(FINAL_READ, op.at_s, op.at_s, op.log_start, timed=True))
        elif isinstance(op, ReplicaOp):
            of(op.partition).replicas.append(op)
        elif isinstance(op, ConvergenceOp):
            of(op.partition).convergence.append(op)
    for op in polls:
        if isinstance(op, SeekOp):
            track = of(op.partition).consumers[op.process]
            if track.runs[-1]:
                track.runs.append([])
            continue
        for partition in set(op.reads) | set(op.high_watermarks) | set(op.log_starts):
            _add_poll(of(partition), op, partition)
    return facts


def _consumer_order(op: PollOp | SeekOp) -> float:
    """Polls in the order the consumer made them (a consumer makes one at a time)."""
    return op.at_s if isinstance(op, SeekOp) else op.invoke_s


def _add_send(facts: PartitionFacts, op: SendOp) -> None:
    if op.outcome == "ok":
        assert op.offset is not None, f"acknowledged send of {op.value} without an offset"
        facts.acked[op.value] = op.offset
        facts.offset_values[op.offset].add(op.value)
    elif op.outcome == "failed":
        facts.failed.add(op.value)
    else:
        facts.unknown.add(op.value)


def _add_poll(facts: PartitionFacts, op: PollOp, partition: int) -> None:
    track = facts.consumers[op.process]
    reads = op.reads.get(partition, [])
    hw = op.high_watermarks.get(partition)
    timed = not op.reads  # an observation (offsets asked, no records): its answer came to this request
    if hw is not None:
        facts.high_watermarks.append(Watermark(op.process, op.invoke_s, op.complete_s, hw, timed))
        facts.reads_above_hw.extend((op.process, offset, hw) for offset, _ in reads if offset >= hw)
    if partition in op.log_starts:
        facts.log_starts.append(Watermark(op.process, op.invoke_s, op.complete_s, op.log_starts[partition], timed))
    track.runs[-1].extend(reads)
    for offset, value in reads:
        facts.polled.setdefault(value, offset)
    _observe(facts, reads)


def _observe(facts: PartitionFacts, reads: list[Read]) -> None:
    for offset, value in reads:
        facts.read_values[value].add(offset)
        facts.offset_values[offset].add(value)
