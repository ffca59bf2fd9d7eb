"""The transaction checks: a transactional run's history in, every broken promise of
read_committed out.

Pure code (no clock, no I/O), fed with ``chaos/txn_history.py``'s operations: each
transaction's records and outcome, the read_committed readers' polls, and the final
read_committed read of every partition. The kinds carry the names of Jepsen's Kafka checker
(``jepsen/src/jepsen/tests/kafka.clj``):

- ``G1a`` (aborted read): a read_committed read returned a record of an aborted transaction.
- ``G1b`` (intermediate read): a read_committed read returned a record of a transaction
  before the transaction's commit was requested (its poll ended before commit_transaction
  was called), or, after the run, a transaction that was not aborted is visible in part: some
  of its acknowledged records are in the final read and others, in partitions read to the
  end, are not (the atomicity a commit promises).
- ``lost-write``: an acknowledged record of a committed transaction is missing from the final
  read of its partition, read to the end.
- ``duplicate``: one value at more than one offset (a retried or re-committed write), or one
  input value transformed by more than one transaction visible after the run (the group's
  offsets committed twice for the same input: exactly-once broken downstream).
- ``inconsistent-offsets``: one offset holds different values in different reads, or another
  value than the one whose produce was acknowledged there.
- ``nonmonotonic-poll``: within one reader session, a partition's offsets went backwards or
  repeated (the consumer's position moved back without a seek).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from chaos.checker.findings import Finding, Findings
from chaos.txn_history import TxnFinalRead, TxnOp, TxnPoll, source_of

TXN_KINDS: dict[str, str] = {
    "G1a": "aborted read: a read_committed read returned a record of an aborted transaction",
    "G1b": "intermediate read: a read_committed read returned a record of a transaction before its commit was requested, "
           "or after the run a transaction that was not aborted is visible in part",
    "lost-write": "an acknowledged record of a committed transaction is missing from the final read_committed read of its partition",
    "duplicate": "one value at more than one offset, or one input transformed by more than one visible transaction",
    "inconsistent-offsets": "one offset holds different values in different reads, or another value than its acknowledged produce",
    "nonmonotonic-poll": "within one reader session, a partition's offsets went backwards or repeated",
}
EXAMPLES_MAX = 20


@dataclass(frozen=True)
class TxnAnomaly(Finding):
    kinds: ClassVar[dict[str, str]] = TXN_KINDS


@dataclass
class TxnCheckResult(Findings):
    """A transactional run's findings, read like the records checker's ``CheckResult``."""

    kinds: ClassVar[dict[str, str]] = TXN_KINDS
    anomalies: list[TxnAnomaly]


def _writers(txns: Iterable[TxnOp]) -> dict[str, TxnOp]:
    """Each value's transaction (values are unique in a run)."""
    return {w.value: t for t in txns for w in t.writes}


def _final_values(finals: Iterable[TxnFinalRead]) -> tuple[set[int], set[str]]:
    """The partitions read to the end, and every value the final read returned."""
    finals = list(finals)
    return {f.partition for f in finals if f.complete}, {v for f in finals for _, v in f.reads}


def aborted_reads(txns: list[TxnOp], polls: list[TxnPoll], finals: list[TxnFinalRead]) -> Iterator[TxnAnomaly]:
    """G1a: every read of a value whose transaction was aborted, once per (reader, value)."""
    writers = _writers(txns)
    seen: set[tuple[str, str]] = set()
    reads = [(p.reader, p.complete_s, part, o, v) for p in polls for part, rs in p.reads.items() for o, v in rs]
    reads += [("final-read", None, f.partition, o, v) for f in finals for o, v in f.reads]
    for reader, at_s, partition, offset, value in reads:
        txn = writers.get(value)
        if txn is None or txn.outcome != "aborted" or (reader, value) in seen:
            continue
        seen.add((reader, value))
        when = "after the run" if at_s is None else f"at {at_s:.3f}s"
        yield TxnAnomaly("G1a", partition, f"{reader} read {value!r} (offset {offset}) {when}: transaction {txn.txn} was aborted",
                         {"reader": reader, "value": value, "offset": offset, "txn": txn.txn, "intent": txn.intent, "error": txn.error})


def early_reads(txns: list[TxnOp], polls: list[TxnPoll]) -> Iterator[TxnAnomaly]:
    """G1b: a poll that ended before its record's transaction asked to commit (aborted
    transactions are G1a's)."""
    writers = _writers(txns)
    seen: set[str] = set()
    for poll in polls:
        for partition, records in poll.reads.items():
            for offset, value in records:
                txn = writers.get(value)
                if txn is None or txn.outcome == "aborted" or txn.txn in seen:
                    continue
                if txn.commit_s is None or poll.complete_s < txn.commit_s:
                    seen.add(txn.txn)
                    asked = "never" if txn.commit_s is None else f"at {txn.commit_s:.3f}s"
                    yield TxnAnomaly("G1b", partition, f"{poll.reader} read {value!r} (offset {offset}) by {poll.complete_s:.3f}s; "
                                     f"transaction {txn.txn} asked to commit {asked}",
                                     {"reader": poll.reader, "value": value, "offset": offset, "txn": txn.txn, "form": "before-commit"})


def partial_transactions(txns: list[TxnOp], finals: list[TxnFinalRead]) -> Iterator[TxnAnomaly]:
    """G1b after the run: a transaction not aborted, some acknowledged records visible and
    others (in partitions read to the end) not; lost-write: a committed transaction's
    acknowledged record not visible."""
    complete, visible = _final_values(finals)
    for txn in txns:
        if txn.outcome == "aborted":
            continue
        judged = [w for w in txn.writes if w.offset is not None and w.partition in complete]
        shown = [w for w in judged if w.value in visible]
        missing = [w for w in judged if w.value not in visible]
        if shown and missing:
            yield TxnAnomaly("G1b", missing[0].partition,
                             f"transaction {txn.txn} ({txn.outcome}) is visible in part: {len(shown)} of its records in the final read, "
                             f"{len(missing)} not (e.g. {missing[0].value!r} at offset {missing[0].offset})",
                             {"txn": txn.txn, "outcome": txn.outcome, "form": "partial", "shown": [w.value for w in shown],
                              "missing": [w.value for w in missing]})
        if txn.outcome == "committed":
            for w in missing:
                yield TxnAnomaly("lost-write", w.partition, f"{w.value!r} (offset {w.offset}) of committed transaction {txn.txn} "
                                 "is missing from the final read", {"txn": txn.txn, "value": w.value, "offset": w.offset})


def _all_reads(polls: list[TxnPoll], finals: list[TxnFinalRead]) -> Iterator[tuple[int, int, str]]:
    for poll in polls:
        for partition, records in poll.reads.items():
            for offset, value in records:
                yield partition, offset, value
    for final in finals:
        for offset, value in final.reads:
            yield final.partition, offset, value


def duplicates(polls: list[TxnPoll], finals: list[TxnFinalRead]) -> Iterator[TxnAnomaly]:
    """A value found at two offsets (or partitions) in any reads."""
    places: dict[str, set[tuple[int, int]]] = {}
    for partition, offset, value in _all_reads(polls, finals):
        places.setdefault(value, set()).add((partition, offset))
    for value, where in sorted(places.items()):
        if len(where) > 1:
            first = min(where)
            yield TxnAnomaly("duplicate", first[0], f"{value!r} read at {len(where)} places: {sorted(where)[:5]}",
                             {"value": value, "places": sorted(where)})


def duplicate_transforms(finals: list[TxnFinalRead]) -> Iterator[TxnAnomaly]:
    """An input value whose transform is visible, after the run, from two transactions."""
    outputs: dict[str, list[tuple[int, int, str]]] = {}
    for final in finals:
        for offset, value in final.reads:
            source = source_of(value)
            if source is not None:
                outputs.setdefault(source, []).append((final.partition, offset, value))
    for source, found in sorted(outputs.items()):
        if len(found) > 1:
            yield TxnAnomaly("duplicate", found[0][0], f"{source!r} transformed {len(found)} times: {[v for _, _, v in found]}",
                             {"value": source, "outputs": found})


def inconsistent_offsets(txns: list[TxnOp], polls: list[TxnPoll], finals: list[TxnFinalRead]) -> Iterator[TxnAnomaly]:
    """One (partition, offset) with two values among the reads and the acknowledged produces."""
    values: dict[tuple[int, int], set[str]] = {}
    for partition, offset, value in _all_reads(polls, finals):
        values.setdefault((partition, offset), set()).add(value)
    for txn in txns:
        for w in txn.writes:
            if w.offset is not None:
                values.setdefault((w.partition, w.offset), set()).add(w.value)
    for (partition, offset), found in sorted(values.items()):
        if len(found) > 1:
            yield TxnAnomaly("inconsistent-offsets", partition, f"offset {offset} of partition {partition} holds {sorted(found)}",
                             {"offset": offset, "values": sorted(found)})


def nonmonotonic_polls(polls: list[TxnPoll]) -> Iterator[TxnAnomaly]:
    """Offsets must increase within a reader session, per partition, across its polls."""
    last: dict[tuple[str, int, int], int] = {}
    for poll in sorted(polls, key=lambda p: p.invoke_s):
        for partition, records in poll.reads.items():
            key = (poll.reader, poll.session, partition)
            for offset, value in records:
                before = last.get(key)
                if before is not None and offset <= before:
                    yield TxnAnomaly("nonmonotonic-poll", partition, f"{poll.reader} (session {poll.session}) read offset {offset} "
                                     f"({value!r}) at {poll.complete_s:.3f}s after offset {before}",
                                     {"reader": poll.reader, "session": poll.session, "offset": offset, "previous": before})
                last[key] = offset if before is None else max(before, offset)


def check_txns(txns: list[TxnOp], polls: list[TxnPoll], finals: list[TxnFinalRead]) -> list[TxnAnomaly]:
    """Every transaction check over one run."""
    return [
        *aborted_reads(txns, polls, finals),
        *early_reads(txns, polls),
        *partial_transactions(txns, finals),
        *duplicates(polls, finals),
        *duplicate_transforms(finals),
        *inconsistent_offsets(txns, polls, finals),
        *nonmonotonic_polls(polls),
    ]
