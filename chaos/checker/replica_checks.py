"""Checks that the replicas of a partition came back together and agree.

Records below a replica's high watermark are committed, so any two replicas must hold the
same records in the range both cover. With records in hand the check says where they first
differ; with only checksums (a CRC over the bytes below one offset) it compares replicas
whose covered ranges are equal.

A comparison (after healing, and after each restart in the restart scenarios) is also a
promise that replication recovered: by its deadline every replica is back in the ISR and
holds at least what the leader held when every replica first answered (its log end; after
healing, with no writes running, its HW, which every replica's HW must reach too). A replica whose broker did not answer is a
failure, not a smaller comparison.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations

from chaos.checker.anomaly import Anomaly
from chaos.checker.partition_facts import PartitionFacts
from chaos.history import FINAL, ConvergenceOp, ReplicaOp


@dataclass(frozen=True)
class StuckReplica:
    """A replica that had not come back when its comparison was taken."""

    broker: int
    in_isr: bool
    log_end: int | None  # None: its broker gave no log state
    high_watermark: int | None


def stuck_replicas(convergence: ConvergenceOp, replicas: list[ReplicaOp]) -> list[StuckReplica]:
    """The replicas of the partition that have not come back: every one when it has no
    leader, else those out of the ISR or whose log (when quiescent, whose HW) is short of
    the target. Pure, so the harness waits on the very rule the checker judges by."""
    states = {r.broker: r for r in replicas}
    stuck = []
    for broker in sorted(convergence.replicas):
        state = states.get(broker)
        in_isr = broker in convergence.isr
        short = state is not None and (
            state.log_end < convergence.target_offset or (convergence.quiescent and state.high_watermark < convergence.target_offset)
        )
        if convergence.leader < 0 or not in_isr or short:
            stuck.append(StuckReplica(broker, in_isr, state.log_end if state else None, state.high_watermark if state else None))
    return stuck


def came_back(convergence: ConvergenceOp, replicas: list[ReplicaOp]) -> bool:
    """Whether every replica of the partition answered and none is stuck."""
    answered = {r.broker for r in replicas}
    return set(convergence.replicas) <= answered and not stuck_replicas(convergence, replicas)


def when(label: str) -> str:
    """A comparison's label as the start of a sentence."""
    return "after healing" if label == FINAL else f"after {label}"


def under_replicated(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Replicas still out of the ISR, or short of the target offset, when a comparison's
    deadline ran out: named with their log end and the leader's."""
    by_label = facts.replicas_by_label()
    for convergence in facts.convergence:
        replicas = by_label.get(convergence.label, [])
        leader = next((r for r in replicas if r.broker == convergence.leader), None)
        leader_text = (
            f"leader {convergence.leader}'s log end {leader.log_end}, HW {leader.high_watermark}" if leader
            else "no leader" if convergence.leader < 0 else f"leader {convergence.leader} gave no log state"
        )
        for stuck in stuck_replicas(convergence, replicas):
            where = "in" if stuck.in_isr else "out of"
            log = f"its log ends at {stuck.log_end} (HW {stuck.high_watermark})" if stuck.log_end is not None else "its log state unknown"
            yield Anomaly(
                "under-replicated",
                facts.partition,
                f"{when(convergence.label)}, broker {stuck.broker} was still {where} the ISR {sorted(convergence.isr)} "
                f"{convergence.waited_s:.1f}s on: {log}; {leader_text}; it had to reach {convergence.target_offset}",
                {
                    "label": convergence.label,
                    "restart": convergence.restart,
                    "broker": stuck.broker,
                    "in_isr": stuck.in_isr,
                    "log_end": stuck.log_end,
                    "high_watermark": stuck.high_watermark,
                    "leader": convergence.leader,
                    "leader_log_end": leader.log_end if leader else None,
                    "leader_high_watermark": leader.high_watermark if leader else None,
                    "target_offset": convergence.target_offset,
                    "isr": sorted(convergence.isr),
                    "waited_s": round(convergence.waited_s, 3),
                },
            )


def replicas_unanswered(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Replicas of a comparison whose broker gave no log state."""
    by_label = facts.replicas_by_label()
    for convergence in facts.convergence:
        answered = {r.broker for r in by_label.get(convergence.label, [])}
        for broker in sorted(set(convergence.replicas) - answered):
            why = convergence.unanswered.get(broker, "no log state recorded")
            yield Anomaly(
                "replica-unanswered",
                facts.partition,
                f"{when(convergence.label)}, broker {broker} did not answer for its replica: {why}",
                {"label": convergence.label, "restart": convergence.restart, "broker": broker, "error": why},
            )


def replicas_differ(facts: PartitionFacts) -> Iterator[Anomaly]:
    """Pairs of replicas of one comparison that disagree in the range both cover."""
    for label, replicas in facts.replicas_by_label().items():
        for a, b in combinations(replicas, 2):
            difference = _first_difference(a, b)
            if difference is not None:
                yield Anomaly(
                    "replicas-differ",
                    facts.partition,
                    f"{when(label)}, brokers {a.broker} and {b.broker} differ below their high watermarks ({a.high_watermark}, {b.high_watermark}): {difference}",
                    {"label": label, "brokers": [a.broker, b.broker], "high_watermarks": [a.high_watermark, b.high_watermark], "difference": difference},
                )


def _reads_end(replica: ReplicaOp) -> int:
    """One past the last offset of the replica's records (its log start when it has none)."""
    return replica.reads[-1][0] + 1 if replica.reads else replica.log_start


def _first_difference(a: ReplicaOp, b: ReplicaOp) -> str | None:
    """Where the two replicas' committed records first differ, or None when they agree (or
    cannot be compared). A replica short of the range is judged by ``under_replicated``."""
    start = max(a.log_start, b.log_start)
    if a.reads is not None and b.reads is not None:
        # A log read after its state was taken may have lost its tail since (truncated by a
        # looping follower): what is missing there is judged as a stuck replica, not here.
        end = min(a.compared_upto, b.compared_upto, a.log_end, b.log_end, _reads_end(a), _reads_end(b))
        left = {o: v for o, v in a.reads if start <= o < end}
        right = {o: v for o, v in b.reads if start <= o < end}
        for offset in range(start, end):
            if left.get(offset) != right.get(offset):
                return f"offset {offset}: {left.get(offset)!r} vs {right.get(offset)!r}"
        return None
    same_range = (a.log_start, a.compared_upto) == (b.log_start, b.compared_upto) and min(a.log_end, b.log_end) >= a.compared_upto
    if same_range and a.checksum is not None and b.checksum is not None and a.checksum != b.checksum:
        return f"checksums {a.checksum:#010x} vs {b.checksum:#010x} over offsets {start}..{a.compared_upto - 1}"
    return None
