"""The checker: a history in, every anomaly with examples and the run's counts out.

Pure code (no clock, no I/O), so it is tested on synthetic histories, and a saved history
can be checked again after the checker improves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from chaos.checker import poll_checks, power_loss_notes, replica_checks, write_checks
from chaos.checker.anomaly import KINDS, Anomaly
from chaos.checker.partition_facts import PartitionFacts, gather
from chaos.history import ConvergenceOp, FaultOp, FinalReadOp, Op, PollOp, ReplicaOp, SendOp

CHECKS: tuple[Callable[[PartitionFacts], Iterator[Anomaly]], ...] = (
    write_checks.lost_writes,
    write_checks.unseen,
    write_checks.duplicates,
    write_checks.inconsistent_offsets,
    write_checks.aborted_reads,
    write_checks.final_read_gaps,
    write_checks.unsent_values,
    poll_checks.skipping_polls,
    poll_checks.watermarks_backwards,
    poll_checks.reads_above_hw,
    replica_checks.replicas_differ,
    replica_checks.under_replicated,
    replica_checks.replicas_unanswered,
)
EXAMPLES_MAX = 10


@dataclass
class CheckResult:
    """The verdict: ``valid`` only when no anomaly of any kind was found."""

    anomalies: list[Anomaly]
    counts: dict[str, int] = field(default_factory=dict)  # operation counts, by what and outcome
    incomplete_final_reads: list[int] = field(default_factory=list)
    comparisons: list[dict] = field(default_factory=list)  # replica comparisons: how many replicas each compared
    final_reads: list[dict] = field(default_factory=list)  # per partition: how far the final read got, against the HW observed

    @property
    def valid(self) -> bool:
        return not self.anomalies

    @property
    def by_kind(self) -> dict[str, list[Anomaly]]:
        """Anomalies grouped by kind, in the order of ``KINDS``."""
        grouped: dict[str, list[Anomaly]] = {}
        for anomaly in self.anomalies:
            grouped.setdefault(anomaly.kind, []).append(anomaly)
        return {kind: grouped[kind] for kind in KINDS if kind in grouped}

    def to_json(self) -> dict:
        """The report's ``check`` section: verdict, counts and up to EXAMPLES_MAX examples a kind."""
        return {
            "valid": self.valid,
            "anomaly_counts": {kind: len(found) for kind, found in self.by_kind.items()},
            "anomalies": {
                kind: [{"partition": a.partition, "message": a.message, **a.details} for a in found[:EXAMPLES_MAX]]
                for kind, found in self.by_kind.items()
            },
            "counts": self.counts,
            "incomplete_final_reads": self.incomplete_final_reads,
            "replica_comparisons": self.comparisons,
            "final_reads": self.final_reads,
        }


def check(ops: list[Op]) -> CheckResult:
    """Runs every check over every partition the history mentions."""
    facts = gather(ops)
    anomalies = [anomaly for partition in sorted(facts) for check_one in CHECKS for anomaly in check_one(facts[partition])]
    anomalies = power_loss_notes.explain(anomalies, [op for op in ops if isinstance(op, FaultOp)])
    finals = [op for op in ops if isinstance(op, FinalReadOp)]
    return CheckResult(
        anomalies,
        _counts(ops),
        sorted(op.partition for op in finals if not op.complete),
        comparisons(ops),
        [final_read_summary(facts[p]) for p in sorted(facts)],
    )


def final_read_summary(facts: PartitionFacts) -> dict:
    """How complete one partition's final read was: from its log start to its HW, the
    records it got, whether it reached its HW, and the highest HW anyone observed before."""
    final = facts.final
    return {
        "partition": facts.partition,
        "read": final is not None,
        "log_start": final.log_start if final else None,
        "high_watermark": final.high_watermark if final else None,
        "records": len(final.reads) if final else 0,
        "complete": bool(final and final.complete),
        "highest_hw_observed": facts.highest_hw_observed,
    }


def comparisons(ops: list[Op]) -> list[dict]:
    """Each replica comparison (after each restart, after healing) in the order taken: how
    many replicas the assignment holds and how many answered and were compared, and how
    many partitions had every replica back in time."""
    states: dict[tuple[str, int], list[ReplicaOp]] = {}
    by_label: dict[str, list[ConvergenceOp]] = {}
    for op in ops:
        if isinstance(op, ReplicaOp):
            states.setdefault((op.label, op.partition), []).append(op)
        elif isinstance(op, ConvergenceOp):
            by_label.setdefault(op.label, []).append(op)
    summaries = []
    for label, found in by_label.items():
        answered = [{r.broker for r in states.get((label, c.partition), [])} & set(c.replicas) for c in found]
        summaries.append(
            {
                "label": label,
                "restart": found[0].restart,
                "partitions": len(found),
                "replicas_expected": sum(len(c.replicas) for c in found),
                "replicas_compared": sum(map(len, answered)),
                "partitions_converged": sum(1 for c in found if replica_checks.came_back(c, states.get((label, c.partition), []))),
                "waited_s_max": round(max(c.waited_s for c in found), 3),
            }
        )
    return summaries


def _counts(ops: list[Op]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for op in ops:
        if isinstance(op, SendOp):
            counts[f"send_{op.outcome}"] += 1
        elif isinstance(op, PollOp):
            counts[f"poll_{op.outcome}"] += 1
            counts["records_polled"] += sum(map(len, op.reads.values()))
        elif isinstance(op, FinalReadOp):
            counts["records_final_read"] += len(op.reads)
    return dict(sorted(counts.items()))
