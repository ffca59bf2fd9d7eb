"""Why an acknowledged write is gone, when a power loss took it: the checker's note on each
``lost-write`` or ``unseen`` whose offset a ``power-loss`` fault cut from a replica's log
(written but never fsynced: ``FaultOp.unflushed``). Pure, like every check.

Under the default durability (page-cache) that is the documented promise at work, and the note
says so; under ``--durability fsync`` no acknowledged offset may be in such a range, so a note
there points at the fsync the broker skipped.
"""

from __future__ import annotations

from dataclasses import replace

from chaos.checker.anomaly import Anomaly
from chaos.history import FaultOp

EXPLAINED = ("lost-write", "unseen")


def explain(anomalies: list[Anomaly], faults: list[FaultOp]) -> list[Anomaly]:
    """``anomalies`` with a note on each lost write that a power loss's cut covers."""
    cuts = [(fault, row) for fault in faults if fault.name == "power-loss" for row in fault.unflushed]
    return [_explained(a, cuts) if a.kind in EXPLAINED else a for a in anomalies]


def _explained(anomaly: Anomaly, cuts: list[tuple[FaultOp, list]]) -> Anomaly:
    offset = anomaly.details.get("offset")
    hits = [(fault, node, first, end) for fault, (node, partition, first, end) in cuts
            if partition == anomaly.partition and offset is not None and first <= offset < end]
    if not hits:
        return anomaly
    fault = hits[0][0]
    ranges = "; ".join(f"{node}: offsets {first}-{end - 1}" for _, node, first, end in hits if _ is fault)
    note = (f"power-loss at {fault.start_s:.1f}s of {fault.target} cut records written but never fsynced ({ranges}): "
            "only an acknowledgement that every in-sync replica had fsynced (--durability fsync) survives the loss of "
            "every replica's power; under page-cache durability this loss is the documented promise")
    details = {**anomaly.details, "power_loss": {"at_s": round(fault.start_s, 3), "unflushed": [list(h[1:]) for h in hits if h[0] is fault]}}
    return replace(anomaly, message=f"{anomaly.message} ({note})", details=details)
