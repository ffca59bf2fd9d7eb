"""The transaction state machine: every edge of KIP-98's diagram (with KIP-890's additions),
every illegal one, and the coordinator's decisions on the paths a transaction takes."""

from __future__ import annotations

import itertools

import pytest

from server_common.errors import ErrorCode
from data_plane.transactions.state_machine import (
    PRODUCER_EPOCH_MAX,
    VALID_PREVIOUS,
    IllegalTransitionError,
    TopicPartition,
    TxnMetadata,
    TxnState,
    abort_timed_out,
    add_partitions,
    end_txn,
    expire_transactional_id,
    init_producer_id,
    markers_written,
    pending_markers,
    verify_partitions,
)
from data_plane.transactions import record_codec

S = TxnState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
FRESH = 900  # the producer id the shell would allocate if the epoch ran out
LEGAL = {  # Kafka's diagram, written out edge by edge so the table in the module is checked, not restated
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.EMPTY, S.ONGOING), (S.ONGOING, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT), (S.EMPTY, S.PREPARE_ABORT),
    (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
}


def meta(state: TxnState = S.EMPTY, epoch: int = 3, partitions=frozenset(), start_ms: int = -1) -> TxnMetadata:
    return TxnMetadata("tx", 7, epoch, 1000, state, frozenset(partitions), 0, start_ms)


@pytest.mark.parametrize("before,after", sorted(LEGAL, key=lambda e: (e[0].value, e[1].value)))
def test_every_legal_transition(before: TxnState, after: TxnState) -> None:
    moved = meta(before).transition(after, 55)
    assert (moved.state, moved.last_update_ms) == (after, 55)


ILLEGAL = sorted(set(itertools.product(S, S)) - LEGAL, key=lambda e: (e[0].value, e[1].value))


@pytest.mark.parametrize("before,after", ILLEGAL)
def test_every_illegal_transition_is_refused_with_a_clear_error(before: TxnState, after: TxnState) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{before.value} -> {after.value} is not a legal"):
        meta(before).transition(after, 55)


def test_table_matches_the_diagram_and_dead_is_final() -> None:
    assert {(p, s) for s, ps in VALID_PREVIOUS.items() for p in ps} == LEGAL
    assert len(ILLEGAL) == 64 - len(LEGAL) and all(before != S.DEAD for before, _ in LEGAL)


def test_init_new_id_starts_at_epoch_zero_and_validates_the_timeout() -> None:
    d = init_producer_id(None, "tx", 1000, 60_000, 5, FRESH)
    assert d.error == ErrorCode.NONE and d.log == (d.answer,)
    assert (d.answer.producer_id, d.answer.producer_epoch, d.answer.state) == (FRESH, 0, S.EMPTY)
    for bad in (0, -1, 60_001):
        assert init_producer_id(None, "tx", bad, 60_000, 5, FRESH).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_bumps_the_epoch_of_a_finished_id(state: TxnState) -> None:
    d = init_producer_id(meta(state), "tx", 2000, 60_000, 9, FRESH)
    assert d.error == ErrorCode.NONE
    assert (d.answer.producer_id, d.answer.producer_epoch, d.answer.state, d.answer.timeout_ms) == (7, 4, S.EMPTY, 2000)


def test_init_while_ongoing_fences_then_aborts_what_was_open() -> None:
    d = init_producer_id(meta(S.ONGOING, partitions={TP0, TP1}, start_ms=0), "tx", 1000, 60_000, 9, FRESH)
    assert d.error == ErrorCode.CONCURRENT_TRANSACTIONS  # the new incarnation retries until the abort completes
    assert [m.state for m in d.log] == [S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT]
    assert all(m.producer_epoch == 4 for m in d.log)
    assert d.markers is not None and not d.markers.commit
    assert (d.markers.producer_epoch, d.markers.partitions) == (4, frozenset({TP0, TP1}))
    done = markers_written(d.answer, 10)
    assert (done.state, done.partitions) == (S.COMPLETE_ABORT, frozenset())
    again = init_producer_id(done, "tx", 1000, 60_000, 11, FRESH)
    assert (again.error, again.answer.producer_epoch) == (ErrorCode.NONE, 5)
    # the zombie (epoch 3) is fenced, not mistaken for a retry
    assert end_txn(again.answer, 7, 3, True, 12, FRESH).error == ErrorCode.PRODUCER_FENCED
    assert add_partitions(again.answer, 7, 3, frozenset({TP0}), 12).error == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE])
def test_requests_during_markers_are_told_to_retry(state: TxnState) -> None:
    m = meta(state, partitions={TP0})
    assert init_producer_id(m, "tx", 1000, 60_000, 1, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert add_partitions(m, 7, 3, frozenset({TP1}), 1).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert end_txn(m, 7, 3, True, 1, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS


def test_commit_path_add_prepare_markers_complete() -> None:
    d = add_partitions(meta(S.EMPTY), 7, 3, frozenset({TP0}), 100)
    assert (d.answer.state, d.answer.txn_start_ms) == (S.ONGOING, 100)
    d2 = add_partitions(d.answer, 7, 3, frozenset({TP1}), 150)
    assert d2.answer.partitions == {TP0, TP1} and d2.answer.txn_start_ms == 100  # the clock runs from the first add
    assert add_partitions(d2.answer, 7, 3, frozenset({TP1}), 160).log == ()  # already in: nothing to log
    end = end_txn(d2.answer, 7, 3, True, 200, FRESH)
    assert end.error == ErrorCode.NONE and end.answer.state == S.PREPARE_COMMIT
    assert end.markers is not None and end.markers.commit and end.markers.producer_epoch == 4
    assert end.log == (end.answer,)  # durable before any marker
    done = markers_written(end.answer, 250)
    assert done.state == S.COMPLETE_COMMIT and done.partitions == frozenset()
    # a retry with the epoch the client used: the same outcome succeeds, the other one does not
    assert end_txn(end.answer, 7, 3, True, 210, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert end_txn(done, 7, 3, True, 260, FRESH).error == ErrorCode.NONE
    assert end_txn(done, 7, 3, False, 260, FRESH).error == ErrorCode.INVALID_TXN_STATE
    nxt = add_partitions(done, 7, 4, frozenset({TP0}), 300)
    assert nxt.answer.state == S.ONGOING and nxt.answer.partitions == {TP0}
    assert end_txn(nxt.answer, 7, 3, True, 310, FRESH).error == ErrorCode.PRODUCER_FENCED


def _committing(partitions=frozenset({TP0})):
    """A transaction of epoch 3 on ``partitions`` whose commit is durable (epoch now 4), its markers not yet written."""
    ongoing = add_partitions(meta(S.EMPTY), 7, 3, frozenset(partitions), 100).answer
    return end_txn(ongoing, 7, 3, True, 200, FRESH)


def test_the_next_transaction_starts_owing_the_last_ones_markers_on_other_partitions() -> None:
    end = _committing()
    nxt = add_partitions(end.answer, 7, 4, frozenset({TP1}), 300)
    assert nxt.error == ErrorCode.NONE and nxt.markers is None
    assert nxt.log == (nxt.answer,)  # one record: CompleteCommit is not written on its own
    assert (nxt.answer.state, nxt.answer.partitions, nxt.answer.txn_start_ms) == (S.ONGOING, {TP1}, 300)
    assert nxt.answer.owed == end.markers and pending_markers(nxt.answer) == end.markers  # a loading coordinator writes them
    assert record_codec.decode(*record_codec.encode(nxt.answer))[1] == nxt.answer  # the owed markers are in the record
    assert verify_partitions(nxt.answer, 7, 4, frozenset({TP1})) == ErrorCode.NONE
    more = add_partitions(nxt.answer, 7, 4, frozenset({TopicPartition("u", 0)}), 310)
    assert more.error == ErrorCode.NONE and more.answer.owed == end.markers  # still owed, whatever else is added


def test_a_partition_owing_the_last_transactions_marker_waits_for_it() -> None:
    """Negative control of the above: the new transaction's first batch on a partition must
    follow that partition's marker, so an add of it waits, before and after the next started."""
    end = _committing(frozenset({TP0, TP1}))
    assert add_partitions(end.answer, 7, 4, frozenset({TP1}), 300).error == ErrorCode.CONCURRENT_TRANSACTIONS
    nxt = add_partitions(_committing().answer, 7, 4, frozenset({TP1}), 300).answer
    refused = add_partitions(nxt, 7, 4, frozenset({TP0}), 310)
    assert refused.error == ErrorCode.CONCURRENT_TRANSACTIONS and refused.log == ()
    cleared = markers_written(nxt, 320)
    assert (cleared.state, cleared.partitions, cleared.owed, pending_markers(cleared)) == (S.ONGOING, {TP1}, None, None)
    assert add_partitions(cleared, 7, 4, frozenset({TP0}), 330).answer.partitions == {TP0, TP1}


def test_nothing_but_adds_goes_ahead_of_owed_markers() -> None:
    """The end of the next transaction, a new incarnation and the timeout would write markers
    of their own, which must follow the owed ones: they wait until the owed are recorded."""
    nxt = add_partitions(_committing().answer, 7, 4, frozenset({TP1}), 300).answer
    assert end_txn(nxt, 7, 4, True, 400, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert end_txn(nxt, 7, 4, False, 400, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert init_producer_id(nxt, "tx", 1000, 60_000, 400, FRESH).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert abort_timed_out(nxt, 300 + 1001, FRESH) is None
    cleared = markers_written(nxt, 500)
    end = end_txn(cleared, 7, 4, True, 510, FRESH)
    assert end.error == ErrorCode.NONE and end.answer.owed is None and end.markers.partitions == {TP1}
    assert abort_timed_out(cleared, 300 + 1001, FRESH) is not None


def test_a_fence_or_a_kept_epoch_leaves_the_next_transaction_waiting_for_the_markers() -> None:
    ongoing = add_partitions(meta(S.EMPTY), 7, 3, frozenset({TP0}), 100).answer
    fenced = init_producer_id(ongoing, "tx", 1000, 60_000, 200, FRESH).answer
    assert fenced.state is S.PREPARE_ABORT
    assert add_partitions(fenced, 7, fenced.producer_epoch, frozenset({TP1}), 300).error == ErrorCode.CONCURRENT_TRANSACTIONS
    kept = end_txn(ongoing, 7, 3, True, 200, FRESH, keep_epoch=True).answer
    assert add_partitions(kept, 7, 3, frozenset({TP1}), 300).error == ErrorCode.CONCURRENT_TRANSACTIONS


def test_abort_path_and_abort_with_nothing_open() -> None:
    ongoing = add_partitions(meta(S.EMPTY), 7, 3, frozenset({TP0}), 100).answer
    end = end_txn(ongoing, 7, 3, False, 200, FRESH)
    assert end.answer.state == S.PREPARE_ABORT and end.markers is not None and not end.markers.commit
    assert markers_written(end.answer, 210).state == S.COMPLETE_ABORT
    empty = end_txn(meta(S.EMPTY), 7, 3, False, 5, FRESH)
    assert [m.state for m in empty.log] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert empty.markers is None and empty.answer.producer_epoch == 4


def test_a_kafka_client_before_end_txn_v5_keeps_its_epoch_across_transactions() -> None:
    """Kafka's transaction version 1 (EndTxn v0-4, the Kafka door): the markers carry the
    current epoch, a retry comes with that same epoch, and the next transaction uses it."""
    ongoing = add_partitions(meta(S.EMPTY), 7, 3, frozenset({TP0}), 100).answer
    end = end_txn(ongoing, 7, 3, True, 200, FRESH, keep_epoch=True)
    assert end.error == ErrorCode.NONE and end.answer.state == S.PREPARE_COMMIT and end.answer.producer_epoch == 3
    assert end.markers is not None and end.markers.commit and end.markers.producer_epoch == 3
    assert end.log == (end.answer,)
    assert end_txn(end.answer, 7, 3, True, 210, FRESH, keep_epoch=True).error == ErrorCode.CONCURRENT_TRANSACTIONS
    done = markers_written(end.answer, 250)
    assert end_txn(done, 7, 3, True, 260, FRESH, keep_epoch=True).error == ErrorCode.NONE  # a retry once complete
    assert end_txn(done, 7, 3, False, 260, FRESH, keep_epoch=True).error == ErrorCode.INVALID_TXN_STATE
    nxt = add_partitions(done, 7, 3, frozenset({TP1}), 300).answer
    aborted = end_txn(nxt, 7, 3, False, 310, FRESH, keep_epoch=True)
    assert aborted.answer.state == S.PREPARE_ABORT and aborted.markers.producer_epoch == 3
    assert end_txn(meta(S.EMPTY), 7, 3, False, 5, FRESH, keep_epoch=True).error == ErrorCode.INVALID_TXN_STATE  # nothing open
    assert end_txn(nxt, 7, 2, True, 320, FRESH, keep_epoch=True).error == ErrorCode.PRODUCER_FENCED


def test_commit_with_nothing_open_and_unknown_producers_are_refused() -> None:
    assert end_txn(meta(S.EMPTY), 7, 3, True, 1, FRESH).error == ErrorCode.INVALID_TXN_STATE
    assert end_txn(meta(S.COMPLETE_ABORT), 7, 3, True, 1, FRESH).error == ErrorCode.INVALID_TXN_STATE
    assert end_txn(None, 7, 3, True, 1, FRESH).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(meta(S.EMPTY), 8, 3, frozenset({TP0}), 1).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(meta(S.DEAD), 7, 3, frozenset({TP0}), 1).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(meta(S.EMPTY), 7, 4, frozenset({TP0}), 1).error == ErrorCode.PRODUCER_FENCED


def test_timeout_aborts_with_an_epoch_bump_and_only_past_the_timeout() -> None:
    ongoing = meta(S.ONGOING, partitions={TP0}, start_ms=100)
    assert abort_timed_out(ongoing, 1100, FRESH) is None
    d = abort_timed_out(ongoing, 1101, FRESH)
    assert d is not None and [m.state for m in d.log] == [S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT]
    assert d.markers is not None and d.markers.producer_epoch == 4 and not d.markers.commit
    assert end_txn(d.answer, 7, 3, True, 1102, FRESH).error == ErrorCode.PRODUCER_FENCED
    assert abort_timed_out(meta(S.EMPTY), 10**9, FRESH) is None


def test_exhausted_epoch_moves_to_a_fresh_producer_id() -> None:
    d = init_producer_id(meta(S.EMPTY, epoch=PRODUCER_EPOCH_MAX - 1), "tx", 1000, 60_000, 1, FRESH)
    assert (d.answer.producer_id, d.answer.producer_epoch) == (FRESH, 0)
    d = init_producer_id(meta(S.EMPTY, epoch=PRODUCER_EPOCH_MAX - 2), "tx", 1000, 60_000, 1, FRESH)
    assert (d.answer.producer_id, d.answer.producer_epoch) == (7, PRODUCER_EPOCH_MAX - 1)


def test_idle_ids_expire_to_dead_and_start_over() -> None:
    assert expire_transactional_id(meta(S.ONGOING), 10**9, 100) is None
    assert expire_transactional_id(meta(S.EMPTY), 100, 100) is None
    dead = expire_transactional_id(meta(S.COMPLETE_COMMIT), 101, 100)
    assert dead is not None and dead.state == S.DEAD
    d = init_producer_id(dead, "tx", 1000, 60_000, 200, FRESH)
    assert (d.answer.producer_id, d.answer.producer_epoch, d.answer.state) == (FRESH, 0, S.EMPTY)
