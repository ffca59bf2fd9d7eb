"""A transactional producer thread: transaction after transaction, each writing a few unique
values (``<worker>-t<n>-<i>``) to random partitions, a share of them aborted on purpose, and
each recorded as a ``TxnOp`` with what came of it.

When a transaction fails, the worker settles it before moving on: if commit_transaction was
never called (or a record failed, so EndTxn(commit) was never sent) nothing but an abort can
end it; if EndTxn(commit) was sent, the worker asks to abort until the coordinator answers
(an abort that succeeds proves the commit did not happen; a refusal leaves the outcome
unknown). Then it starts a new producer under the same transactional id, whose
init_transactions aborts whatever is still open. ``max_block_ms`` is short, so a commit
whose coordinator dies gives up (and the worker aborts) instead of waiting for the next
coordinator to take it over.
"""

from __future__ import annotations

import random
import threading
import time

from chaos.txn_history import TxnOp, TxnWrite
from data_plane.client import KraftlogError, Producer
from server_common.errors import ErrorCode

RECORDS_PER_TXN = 3
ABORT_SHARE = 0.25
MAX_BLOCK_MS = 500
SETTLE_S = 30.0  # how long a failed commit's abort is retried (the coordinator may be moving)
TRANSACTION_TIMEOUT_MS = 20_000
# Time a transaction spends between its last send and its end, as a consume-transform-produce
# application would: the coordinator is mostly idle meanwhile, so a fault that starts then
# meets the transaction's decision (EndTxn), not its AddPartitionsToTxn.
WORK_S = 0.05
GATE_HOLD_S_MAX = 10.0  # a gate never holds a producer longer, released or not


class CommitGate:
    """Holds a producer at the end of its next transaction to commit, on request, until
    released: so that a fault can start with that commit (EndTxn) sure to be the next thing
    the producer asks its coordinator. ``stall-and-kill-coordinator`` holds the producers of
    the coordinator it stalls, cuts the links, then releases them: each commit's decision is
    then the first write on its ``__transaction_state`` partition during the stall, the write
    the stall (and the kill after it) is there to lose."""

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._released = threading.Event()
        self.holding = threading.Event()  # a producer waits at the gate

    def request(self) -> None:
        self._released.clear()
        self._requested.set()

    def release(self) -> None:
        self._requested.clear()
        self._released.set()

    def pass_through(self) -> None:
        """The producer is about to commit: waits here while a hold is requested."""
        if not self._requested.is_set():
            return
        self.holding.set()
        try:
            self._released.wait(GATE_HOLD_S_MAX)
        finally:
            self.holding.clear()
            self._requested.clear()


class TxnProducerWorker(threading.Thread):
    """Runs transactions on ``topic`` until stopped; ``txns`` collects their TxnOps."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, clock, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.partitions, self.clock = bootstrap, topic, partitions, clock
        self.rng = random.Random(seed)
        self.txns: list[TxnOp] = []
        self.stopping = threading.Event()
        self.gate = CommitGate()

    def run(self) -> None:
        """Transactions until stopped; the last producer is one whose init_transactions went
        through after the last failure, so nothing is left open under this id."""
        n, settled = 0, False
        while not (self.stopping.is_set() and settled):
            producer = new_producer(self.bootstrap, self.name)
            settled = producer is not None
            try:
                while producer is not None and not self.stopping.is_set():
                    op = self._transaction(producer, n)
                    self.txns.append(op)
                    n += 1
                    if op.error:
                        settled = False
                        break  # a new producer next: its init aborts what may still be open
            finally:
                if producer is not None:
                    producer.close(timeout=5)
            if producer is None:
                self.stopping.wait(0.2)  # the coordinator is unreachable for now: try again shortly

    def _transaction(self, producer: Producer, n: int) -> TxnOp:
        txn, invoked = f"{self.name}-t{n}", self.clock()
        intent = "abort" if self.rng.random() < ABORT_SHARE else "commit"
        values = [f"{txn}-{i}" for i in range(RECORDS_PER_TXN)]
        partitions = [self.rng.randrange(self.partitions) for _ in values]
        futures = []
        commit_s = None
        try:
            producer.begin_transaction()
            for value, partition in zip(values, partitions):
                futures.append(producer.send(self.topic, value.encode(), partition=partition))
            self.stopping.wait(WORK_S)  # the application's work before it ends the transaction (pacing, not synchronization)
            if intent == "abort":
                producer.abort_transaction()
                outcome, error = "aborted", ""
            else:
                self.gate.pass_through()
                commit_s = self.clock()
                producer.commit_transaction()
                outcome, error = "committed", ""
        except KraftlogError as failure:
            error = failure.code
            outcome = outcome_after_failure(producer, futures, len(values), commit_s)
        writes = tuple(TxnWrite(p, v, o) for v, p, o in zip(values, partitions, delivered_offsets(futures, len(values))))
        return TxnOp(self.name, txn, intent, outcome, invoked, self.clock(), writes, commit_s, error)


def new_producer(bootstrap: str, transactional_id: str) -> Producer | None:
    """A producer for ``transactional_id`` whose init_transactions went through (it aborted
    whatever an earlier one left open); None when the coordinator could not be reached."""
    producer = Producer(bootstrap, transactional_id=transactional_id, linger_ms=1, max_block_ms=MAX_BLOCK_MS,
                        delivery_timeout_ms=10_000, request_timeout_ms=3_000, transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                        client_id=transactional_id)
    try:
        producer.init_transactions()
        return producer
    except KraftlogError:
        producer.close(timeout=1)
        return None


def delivered_offsets(futures: list, count: int) -> list[int | None]:
    """Each of ``count`` records' offset, None where it was not delivered (or never sent)."""
    offsets = [f.result().offset if f.done() and f.exception() is None else None for f in futures]
    return offsets + [None] * (count - len(offsets))


def outcome_after_failure(producer: Producer, futures: list, count: int, commit_s: float | None) -> str:
    """What a failed transaction came to: ``aborted`` when EndTxn(commit) never went out
    (commit_transaction sends it only once all ``count`` records were delivered), else the
    outcome of asking to abort (``settle``)."""
    delivered = len(futures) == count and all(f.done() and f.exception() is None for f in futures)
    return settle(producer) if commit_s is not None and delivered else "aborted"


def settle(producer: Producer) -> str:
    """After EndTxn(commit) failed: ``aborted`` if an abort goes through, else ``unknown``."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            producer.abort_transaction()
            return "aborted"
        except KraftlogError as error:
            if not (error.retriable or error.error is ErrorCode.CONCURRENT_TRANSACTIONS) or time.monotonic() >= deadline:
                return "unknown"
