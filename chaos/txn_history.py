"""The operations of a transactional chaos run, for ``chaos/checker/txn_checks.py``.

Plain data, like ``chaos/history.py``'s, that a test writes by hand and a run records. Times
are seconds since the run started, on the one clock every workload thread of the run reads.
A transaction's outcome is what its producer learnt: ``committed`` (EndTxn(commit) answered),
``aborted`` (EndTxn(abort) answered, or EndTxn(commit) was never sent: then nothing but an
abort can end it) or ``unknown`` (the commit was sent and neither its answer nor a later
abort's settled it).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from chaos.history import FinalReadOp, Op, PollOp, Read, SeekOp

TxnOutcome = Literal["committed", "aborted", "unknown"]


TRANSFORMED = ">"  # an output value: the input value, this mark, the transaction that wrote it


def transformed(value: str, txn: str) -> str:
    """The value a consume-transform-produce transaction ``txn`` writes for input ``value``:
    unique per transaction, so a retried transform is told apart from the first."""
    return f"{value}{TRANSFORMED}{txn}"


def source_of(value: str) -> str | None:
    """The input value an output value was transformed from (None for an input value)."""
    return value.split(TRANSFORMED, 1)[0] if TRANSFORMED in value else None


@dataclass(frozen=True)
class TxnWrite:
    """One record of a transaction: ``offset`` once its produce was acknowledged."""

    partition: int
    value: str
    offset: int | None = None


@dataclass(frozen=True)
class TxnOp:
    """One transaction of a producer: what it meant to do (``intent``: commit or abort), what
    it wrote and what came of it. ``commit_s``: when commit_transaction was called (None when
    it never was): no read_committed reader may return its records before then."""

    process: str
    txn: str
    intent: Literal["commit", "abort"]
    outcome: TxnOutcome
    invoke_s: float
    complete_s: float
    writes: tuple[TxnWrite, ...] = ()
    commit_s: float | None = None
    error: str = ""


@dataclass(frozen=True)
class TxnPoll:
    """One read_committed poll of a reader. ``session`` changes whenever the reader seeks (a
    new consumer, a restart from the log start): offsets increase within a session only."""

    reader: str
    session: int
    invoke_s: float
    complete_s: float
    reads: dict[int, list[Read]] = field(default_factory=dict)


@dataclass(frozen=True)
class TxnFinalRead:
    """After healing, one partition read_committed from its log start up to its LSO;
    ``complete`` when the read got there."""

    partition: int
    reads: list[Read]
    complete: bool


def txn_polls(ops: list[Op]) -> list[TxnPoll]:
    """The readers' successful polls from a records history (``ConsumerWorker``'s PollOps),
    each in the session its reader's seeks so far make: a reader's session is the number of
    times it started over before the poll."""
    seeks: dict[str, set[float]] = {}
    for op in ops:
        if isinstance(op, SeekOp):
            seeks.setdefault(op.process, set()).add(op.at_s)
    return [TxnPoll(op.process, sum(1 for at in seeks.get(op.process, ()) if at <= op.invoke_s), op.invoke_s, op.complete_s, op.reads)
            for op in ops if isinstance(op, PollOp) and op.outcome == "ok" and op.reads]


def txn_final_reads(ops: list[FinalReadOp]) -> list[TxnFinalRead]:
    return [TxnFinalRead(op.partition, op.reads, op.complete) for op in ops]


def save_history(path: Path, txns: list[TxnOp], polls: list[TxnPoll], finals: list[TxnFinalRead]) -> None:
    """The run's transactional history as JSON, so the checks can be run on it again."""
    path.write_text(json.dumps({"txns": [asdict(t) for t in txns], "polls": [asdict(p) for p in polls],
                                "final_reads": [asdict(f) for f in finals]}, indent=0))
