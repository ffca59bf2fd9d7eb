"""Throughput and latency per second of a run, with the faults, for the pictures in reports.

Pure: a history in, one bucket per second out. Latency is from send to acknowledgement of
successful writes, attributed to the second the write completed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chaos.history import FaultOp, Op, PollOp, SendOp


@dataclass
class Bucket:
    """One second of a run."""

    second: int
    sends_ok: int = 0
    sends_failed: int = 0
    sends_unknown: int = 0
    records_polled: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def percentile_ms(self, fraction: float) -> float | None:
        """The latency below which ``fraction`` of this second's successful writes fell."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]

    def to_json(self) -> dict:
        return {
            "second": self.second,
            "sends_ok": self.sends_ok,
            "sends_failed": self.sends_failed,
            "sends_unknown": self.sends_unknown,
            "records_polled": self.records_polled,
            "latency_ms_p50": self.percentile_ms(0.5),
            "latency_ms_p99": self.percentile_ms(0.99),
            "latency_ms_max": self.percentile_ms(1.0),
        }


@dataclass
class Timeline:
    buckets: list[Bucket]
    faults: list[FaultOp]

    def to_json(self) -> dict:
        return {
            "buckets": [b.to_json() for b in self.buckets],
            "faults": [{"name": f.name, "target": f.target, "start_s": f.start_s, "end_s": f.end_s, "detail": f.detail} for f in self.faults],
        }


def timeline(ops: list[Op]) -> Timeline:
    """Buckets from second 0 to the last second anything completed in."""
    sends = [op for op in ops if isinstance(op, SendOp)]
    polls = [op for op in ops if isinstance(op, PollOp)]
    faults = sorted((op for op in ops if isinstance(op, FaultOp)), key=lambda f: f.start_s)
    ends = [op.complete_s for op in sends + polls] + [f.end_s for f in faults]
    buckets = [Bucket(second) for second in range(int(max(ends, default=0)) + 1)]
    for op in sends:
        bucket = buckets[int(op.complete_s)]
        if op.outcome == "ok":
            bucket.sends_ok += 1
            bucket.latencies_ms.append((op.complete_s - op.invoke_s) * 1000)
        elif op.outcome == "failed":
            bucket.sends_failed += 1
        else:
            bucket.sends_unknown += 1
    for op in polls:
        buckets[int(op.complete_s)].records_polled += sum(map(len, op.reads.values()))
    return Timeline(buckets, faults)
