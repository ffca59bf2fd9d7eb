"""A transactional id's state and the transaction coordinator's decisions (KIP-98, KIP-890).

Pure: no I/O, no clock (``now_ms`` is an argument), no producer-id allocation (the shell
passes a fresh id in, used only when the epoch is exhausted). Each decision returns the
metadata the coordinator must make durable in its transaction log, in order, before acting
on it (the two phases of KIP-98: the PrepareCommit/PrepareAbort record is durable before the
first marker is written), the markers to write, and the answer for the client.

The states and their legal predecessors are Kafka's (``TransactionState``, with the
KIP-890 part 2 additions: an abort with nothing open, or after a completed transaction, bumps
the epoch through PrepareAbort)::

    Empty              <- Empty, CompleteCommit, CompleteAbort          (init / epoch bump)
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort (add partitions)
    PrepareCommit      <- Ongoing                                       (end txn: commit)
    PrepareAbort       <- Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort
    CompleteCommit     <- PrepareCommit                                 (all markers written)
    CompleteAbort      <- PrepareAbort                                  (all markers written)
    PrepareEpochFence  <- Ongoing                       (init or timeout while a txn is open)
    Dead               <- Empty, CompleteCommit, CompleteAbort          (id expired)

The next transaction need not wait for the last one's markers: an add on PrepareCommit/
PrepareAbort (the producer's bumped epoch) of partitions none of those markers go to starts
it at once, Ongoing with the markers still ``owed`` in its own record, so a coordinator that
loads it writes them too. The partitions that owe a marker, the end of the new transaction,
an InitProducerId and the timeout wait for them (CONCURRENT_TRANSACTIONS) until the record
that clears ``owed`` (`markers_written`) is decided.

Every end of a transaction bumps the producer epoch (KIP-890 part 2): the markers carry the
new epoch, so a write of the old epoch arriving late is fenced at the partition instead of
joining the next transaction. A client retrying EndTxn with the epoch it used (one below the
current) gets the outcome it asked for once more, or INVALID_TXN_STATE for the other one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from server_common.errors import ErrorCode

PRODUCER_EPOCH_MAX = 32767  # int16, as the batch header stores it
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(Enum):
    """Kafka's TransactionState, as written to the transaction log."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"


S = TxnState
_COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
_IN_FLIGHT = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE})  # markers being written

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: _COMPLETED,
    S.ONGOING: _COMPLETED | {S.ONGOING},
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: _COMPLETED | {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
    S.DEAD: _COMPLETED,
}


class IllegalTransitionError(AssertionError):
    """The coordinator tried a transition the diagram forbids: a bug in the coordinator, never
    something a client request can cause (requests that do not fit get an error code)."""


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id, as the coordinator logs it. ``last_producer_epoch`` is the epoch
    before the bump of the latest EndTxn, so that a retried EndTxn is known; a fencing bump
    (init, timeout) clears it, so the fenced producer gets PRODUCER_FENCED, never a success."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    last_update_ms: int = 0
    txn_start_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    owed: "MarkerPlan | None" = None  # the last transaction's markers, decided but not all committed yet

    def transition(self, to: TxnState, now_ms: int, **changes: object) -> "TxnMetadata":
        """The next metadata in state ``to``; IllegalTransitionError if the diagram forbids it."""
        if self.state not in VALID_PREVIOUS[to]:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: {self.state.value} -> {to.value} is not a legal "
                f"transition (legal predecessors of {to.value}: "
                f"{', '.join(sorted(s.value for s in VALID_PREVIOUS[to]))}); this is a coordinator bug, report it"
            )
        return replace(self, state=to, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    def is_timed_out(self, now_ms: int) -> bool:
        return self.state is S.ONGOING and now_ms > self.txn_start_ms + self.timeout_ms


@dataclass(frozen=True)
class MarkerPlan:
    """Control markers to write, one per partition, with the producer's (new) epoch."""

    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class Decision:
    """What the coordinator does: make ``log`` durable in order, then write ``markers`` (and,
    once every partition has one, apply ``markers_written``), then answer ``error`` with the
    producer id and epoch of ``answer``."""

    error: ErrorCode
    answer: TxnMetadata | None
    log: tuple[TxnMetadata, ...] = ()
    markers: MarkerPlan | None = None


def _refuse(error: ErrorCode, meta: TxnMetadata | None) -> Decision:
    return Decision(error, meta)


def _bumped(meta: TxnMetadata, fresh_producer_id: int) -> dict[str, int]:
    """The producer id and epoch after a bump; a new id at epoch 0 once the epoch is exhausted."""
    if meta.producer_epoch >= PRODUCER_EPOCH_MAX - 1:
        assert fresh_producer_id >= 0 and fresh_producer_id != meta.producer_id, fresh_producer_id
        return {"producer_id": fresh_producer_id, "producer_epoch": 0}
    return {"producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch + 1}


def _fence_and_abort(meta: TxnMetadata, now_ms: int, fresh_producer_id: int) -> tuple[TxnMetadata, ...]:
    """Ongoing -> PrepareEpochFence (epoch bumped: the old producer is fenced everywhere it
    writes) -> PrepareAbort, whose markers carry the new epoch."""
    fenced = meta.transition(S.PREPARE_EPOCH_FENCE, now_ms, last_producer_epoch=NO_PRODUCER_EPOCH,
                             **_bumped(meta, fresh_producer_id))
    return fenced, fenced.transition(S.PREPARE_ABORT, now_ms)


def _markers(meta: TxnMetadata) -> MarkerPlan:
    return MarkerPlan(meta.producer_id, meta.producer_epoch, meta.state is S.PREPARE_COMMIT, meta.partitions)


def init_producer_id(
    meta: TxnMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    timeout_ms_max: int,
    now_ms: int,
    fresh_producer_id: int,
) -> Decision:
    """InitProducerId with a transactional id: a new id starts at epoch 0; a known one is
    bumped, fencing the previous incarnation. A transaction it left open is aborted first:
    the answer is CONCURRENT_TRANSACTIONS (retriable) until the abort's markers are written."""
    if not 0 < timeout_ms <= timeout_ms_max:
        return _refuse(ErrorCode.INVALID_TRANSACTION_TIMEOUT, meta)
    if meta is None or meta.state is S.DEAD:
        new = TxnMetadata(transactional_id, fresh_producer_id, 0, timeout_ms, S.EMPTY, last_update_ms=now_ms)
        return Decision(ErrorCode.NONE, new, (new,))
    if meta.state in _IN_FLIGHT or meta.owed is not None:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    if meta.state is S.ONGOING:
        log = _fence_and_abort(meta, now_ms, fresh_producer_id)
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS, log[-1], log, _markers(log[-1]))
    new = meta.transition(S.EMPTY, now_ms, timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1,
                          last_producer_epoch=NO_PRODUCER_EPOCH, **_bumped(meta, fresh_producer_id))
    return Decision(ErrorCode.NONE, new, (new,))


def _check_request(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    """A producer's request: its id and epoch, and no markers in flight."""
    if meta is None or meta.state is S.DEAD or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != meta.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if meta.state in _IN_FLIGHT or meta.owed is not None:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.NONE


def _owing(meta: TxnMetadata, partitions: frozenset[TopicPartition], now_ms: int) -> TxnMetadata | None:
    """The metadata an add of ``partitions`` may start from while the last transaction's
    markers are still being written: that transaction completed, its markers ``owed``. None
    if the add must wait for them: a partition of the add still owes its marker (the new
    transaction's first batch there must follow it, or the marker would close that batch's
    transaction with the last one's outcome), or the markers are a fence's (its producer has
    no current epoch to add with), or a keeping-epoch EndTxn's (nothing would fence a late
    write of the last transaction on the partitions of the next)."""
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.last_producer_epoch != NO_PRODUCER_EPOCH \
            and meta.last_producer_epoch != meta.producer_epoch and not partitions & meta.partitions:
        return replace(markers_written(meta, now_ms), owed=_markers(meta))
    if meta.state is S.ONGOING and meta.owed is not None and not partitions & meta.owed.partitions:
        return meta
    return None


def add_partitions(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int, partitions: frozenset[TopicPartition], now_ms: int
) -> Decision:
    """AddPartitionsToTxn (explicit, or the broker's KIP-890 verification on first write):
    the transaction becomes Ongoing with these partitions added. While the last transaction's
    markers are written, an add of partitions that owe none starts the next transaction at
    once (`_owing`); the others are CONCURRENT_TRANSACTIONS until the markers are in."""
    error = _check_request(meta, producer_id, producer_epoch)
    if error is ErrorCode.CONCURRENT_TRANSACTIONS:
        assert meta is not None
        owing = _owing(meta, partitions, now_ms)
        if owing is None:
            return _refuse(error, meta)
        meta = owing
    elif error is not ErrorCode.NONE:
        return _refuse(error, meta)
    assert meta is not None
    if meta.state is S.ONGOING and partitions <= meta.partitions:
        return Decision(ErrorCode.NONE, meta)
    start_ms = meta.txn_start_ms if meta.state is S.ONGOING else now_ms
    new = meta.transition(S.ONGOING, now_ms, partitions=meta.partitions | partitions, txn_start_ms=start_ms)
    return Decision(ErrorCode.NONE, new, (new,))


def verify_partitions(meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                      partitions: frozenset[TopicPartition]) -> ErrorCode:
    """AddPartitionsToTxn with verify_only (KIP-890 part 1): a partition leader asks, before a
    producer's first transactional batch there, whether the partition is in that producer's
    ongoing transaction at that epoch. Changes nothing: a batch the coordinator never heard
    of (a late one from an ended transaction, or a client that skipped the add) must not
    open a transaction on the partition that no marker would ever close."""
    if meta is None or meta.state is S.DEAD or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != meta.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if meta.state is not S.ONGOING or not partitions <= meta.partitions:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


def end_txn(meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
            fresh_producer_id: int, keep_epoch: bool = False) -> Decision:
    """EndTxn: Ongoing -> PrepareCommit/PrepareAbort with the epoch bumped, then markers.

    A retry (the epoch before the bump) of the same outcome: CONCURRENT_TRANSACTIONS while its
    markers are being written, NONE once complete; of the other outcome: INVALID_TXN_STATE.
    Abort with nothing open bumps the epoch through PrepareAbort and writes no marker.
    ``keep_epoch``: Kafka's transaction version 1 (`end_txn_keeping_epoch`)."""
    if keep_epoch:
        return end_txn_keeping_epoch(meta, producer_id, producer_epoch, commit, now_ms)
    if meta is not None and meta.producer_id == producer_id and meta.state is not S.DEAD \
            and producer_epoch == meta.last_producer_epoch and producer_epoch != meta.producer_epoch:
        return _retried_end(meta, commit)
    error = _check_request(meta, producer_id, producer_epoch)
    if error is not ErrorCode.NONE:
        return _refuse(error, meta)
    assert meta is not None
    if meta.state is S.ONGOING:
        prepared = meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms,
                                   last_producer_epoch=meta.producer_epoch, **_bumped(meta, fresh_producer_id))
        return Decision(ErrorCode.NONE, prepared, (prepared,), _markers(prepared))
    if commit:
        return _refuse(ErrorCode.INVALID_TXN_STATE, meta)
    prepared = meta.transition(S.PREPARE_ABORT, now_ms, partitions=frozenset(),
                               last_producer_epoch=meta.producer_epoch, **_bumped(meta, fresh_producer_id))
    done = prepared.transition(S.COMPLETE_ABORT, now_ms)
    return Decision(ErrorCode.NONE, done, (prepared, done))


def end_txn_keeping_epoch(meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> Decision:
    """EndTxn of a Kafka client before EndTxn v5 (Kafka's transaction version 1): Ongoing ->
    PrepareCommit/PrepareAbort at the same epoch, whose markers carry it and whose next
    transaction uses it too. Its retry comes with the same epoch: CONCURRENT_TRANSACTIONS while
    the markers are written, NONE once complete with the outcome it asked for,
    INVALID_TXN_STATE for the other outcome or with nothing open (as Kafka answers it). A late
    write of such a producer is not fenced by the end of its transaction, as in Kafka before
    KIP-890; kraftlog's own clients always bump."""
    error = _check_request(meta, producer_id, producer_epoch)
    if error is not ErrorCode.NONE:
        return _refuse(error, meta)
    assert meta is not None
    if meta.state is S.ONGOING:
        prepared = meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms, last_producer_epoch=NO_PRODUCER_EPOCH)
        return Decision(ErrorCode.NONE, prepared, (prepared,), _markers(prepared))
    if meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return _retried_end(meta, commit)
    return _refuse(ErrorCode.INVALID_TXN_STATE, meta)


def _retried_end(meta: TxnMetadata, commit: bool) -> Decision:
    same = {S.PREPARE_COMMIT, S.COMPLETE_COMMIT} if commit else {S.PREPARE_ABORT, S.COMPLETE_ABORT}
    if meta.state is S.ONGOING:  # the producer has moved on to its next transaction: a stale request
        return _refuse(ErrorCode.PRODUCER_FENCED, meta)
    if meta.state not in same:
        return _refuse(ErrorCode.INVALID_TXN_STATE, meta)
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    return Decision(ErrorCode.NONE, meta)


def pending_markers(meta: TxnMetadata) -> MarkerPlan | None:
    """The markers still owed by a transaction whose decision is durable (PrepareCommit or
    PrepareAbort, or the last transaction's, ``owed`` by the next one): what a coordinator
    loading the id must finish writing. None otherwise."""
    if meta.owed is not None:
        return meta.owed
    return _markers(meta) if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) else None


def needs_fresh_producer_id(meta: TxnMetadata | None, registering: bool) -> bool:
    """Whether a decision may take a fresh producer id: a registration (InitProducerId) of an
    id not known (or Dead), or any bump once the epoch is exhausted. The shell allocates one
    from the controller only then."""
    if meta is None or meta.state is S.DEAD:
        return registering
    return meta.producer_epoch >= PRODUCER_EPOCH_MAX - 1


def markers_written(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every partition has its marker: PrepareCommit -> CompleteCommit, PrepareAbort ->
    CompleteAbort; the partitions are forgotten (the next transaction starts empty). Of an
    Ongoing transaction that owed the last one's markers: the same transaction, owing none."""
    if meta.owed is not None:
        return meta.transition(meta.state, now_ms, owed=None)
    to = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
    return meta.transition(to, now_ms, partitions=frozenset(), txn_start_ms=-1)


def abort_timed_out(meta: TxnMetadata, now_ms: int, fresh_producer_id: int) -> Decision | None:
    """The coordinator's periodic check: an Ongoing transaction past its timeout is aborted
    with the epoch bumped, so the producer that opened it is fenced. None if nothing to do
    (or not yet: the last transaction's markers are still owed, and the abort's must follow them)."""
    if not meta.is_timed_out(now_ms) or meta.owed is not None:
        return None
    log = _fence_and_abort(meta, now_ms, fresh_producer_id)
    return Decision(ErrorCode.NONE, log[-1], log, _markers(log[-1]))


def expire_transactional_id(meta: TxnMetadata, now_ms: int, id_expiration_ms: int) -> TxnMetadata | None:
    """An id idle for ``id_expiration_ms`` with no transaction in flight becomes Dead (its
    tombstone is written, then it is forgotten). None if it stays."""
    if meta.state in _COMPLETED and now_ms - meta.last_update_ms > id_expiration_ms:
        return meta.transition(S.DEAD, now_ms)
    return None

