"""Idempotent-producer dedup (KIP-98, Kafka's ProducerStateManager)."""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server_common.errors import ErrorCode
from data_plane.replication.producer_state import (
    APPEND,
    BATCHES_RETAINED,
    NO_PRODUCER_ID,
    SEQUENCE_MAX,
    Duplicate,
    ProducerState,
    Rejected,
)

PID = 42
E = ErrorCode


@dataclass(frozen=True)
class Header:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    is_control: bool = False
    is_transactional: bool = False
    max_timestamp: int = -1


def state_with(*batches: tuple[int, int, int], timestamp_ms: int = -1) -> tuple[ProducerState, list[Header]]:
    """Append (epoch, base_sequence, record_count) batches for PID at consecutive offsets."""
    state, headers = ProducerState(), []
    for epoch, base_seq, count in batches:
        assert state.check(PID, epoch, base_seq, count) == APPEND
        first = state.next_offset
        state.on_appended(PID, epoch, base_seq, first, first + count - 1, timestamp_ms)
        headers.append(Header(PID, epoch, base_seq, first, first + count - 1, max_timestamp=timestamp_ms))
    return state, headers


@pytest.mark.parametrize(
    "epoch, base_seq, count, expected",
    [
        (0, 10, 5, APPEND),                                   # next in sequence
        (0, 5, 5, Duplicate(5, 9)),                           # retry of the last batch
        (0, 1, 4, Duplicate(1, 4)),                           # retry of an earlier batch
        (0, 2, 5, Rejected(E.OUT_OF_ORDER_SEQUENCE)),         # not a batch we hold
        (0, 11, 1, Rejected(E.OUT_OF_ORDER_SEQUENCE)),        # gap: a batch was lost
        (0, 5, 3, E.INVALID_RECORD),                          # a written batch's base sequence, another count
        (0, 0, 5, E.INVALID_RECORD),
        (1, 0, 3, APPEND),                                    # new epoch restarts at 0
        (1, 10, 3, Rejected(E.OUT_OF_ORDER_SEQUENCE)),        # new epoch must start at 0
    ],
)
def test_check_after_three_batches(epoch, base_seq, count, expected) -> None:
    # sequences 0 | 1-4 | 5-9 at offsets 0 | 1-4 | 5-9
    state, _ = state_with((0, 0, 1), (0, 1, 4), (0, 5, 5))
    got = state.check(PID, epoch, base_seq, count)
    assert (got.error if isinstance(expected, ErrorCode) else got) == expected


def test_a_resend_with_the_same_base_sequence_and_more_records_is_an_invalid_record_saying_why() -> None:
    """It was answered OUT_OF_ORDER_SEQUENCE, "an earlier batch was lost", which sent the
    user looking for a loss that never happened."""
    state, _ = state_with((0, 0, 1), (0, 1, 4))
    refused = state.check(PID, 0, 1, 6)
    assert isinstance(refused, Rejected) and refused.error is E.INVALID_RECORD
    assert "base sequence 1 was already written with 4 record(s) (offsets 1..4), this one has 6" in refused.reason
    assert "not content" in refused.reason and "lost" not in refused.reason
    run = [SimpleNamespace(producer_id=PID, producer_epoch=0, base_sequence=seq, record_count=n, is_transactional=False)
           for seq, n in ((0, 1), (1, 6))]
    assert state.check_run(run) == refused  # the second of a retried request: the same answer


def test_older_epoch_is_a_zombie() -> None:
    state, _ = state_with((3, 0, 1))
    assert state.check(PID, 2, 1, 1) == Rejected(E.INVALID_PRODUCER_EPOCH)


def test_an_older_epochs_transactional_batch_is_fenced() -> None:
    """Kafka's answer to a transactional zombie is PRODUCER_FENCED; an idempotent one keeps
    INVALID_PRODUCER_EPOCH (the check above), and a marker's epoch fences as a batch's does."""
    state, _ = state_with((3, 0, 1))
    assert state.check(PID, 2, 0, 1, transactional=True) == Rejected(E.PRODUCER_FENCED)
    state.on_marker(PID, 4, 1)
    assert state.epoch_of(PID) == 4 and state.epoch_of(PID + 1) is None
    zombie = SimpleNamespace(producer_id=PID, producer_epoch=3, base_sequence=1, record_count=1, is_transactional=True)
    assert state.check_run([zombie]) == Rejected(E.PRODUCER_FENCED)
    assert state.check_run([SimpleNamespace(**{**vars(zombie), "is_transactional": False})]) == Rejected(E.INVALID_PRODUCER_EPOCH)


def test_unknown_producer_may_start_anywhere_and_non_idempotent_is_unchecked() -> None:
    state = ProducerState()
    assert state.check(PID, 0, 77, 3) == APPEND
    assert state.check(NO_PRODUCER_ID, -1, -1, 3) == APPEND


def test_only_the_last_five_batches_are_remembered() -> None:
    state, _ = state_with(*[(0, i, 1) for i in range(BATCHES_RETAINED + 1)])
    assert state.check(PID, 0, 1, 1) == Duplicate(1, 1)
    assert state.check(PID, 0, 0, 1) == Rejected(E.OUT_OF_ORDER_SEQUENCE)


def test_sequence_wraps_at_int32_max() -> None:
    state, _ = state_with((0, SEQUENCE_MAX - 1, 2))
    assert state.check(PID, 0, 0, 3) == APPEND
    state.on_appended(PID, 0, 0, 2, 4)
    assert state.check(PID, 0, 3, 1) == APPEND
    assert state.check(PID, 0, SEQUENCE_MAX - 1, 2) == Duplicate(0, 1)
    # a batch that itself wraps
    wrapped, _ = state_with((0, SEQUENCE_MAX, 3))
    assert wrapped.check(PID, 0, 2, 1) == APPEND
    assert wrapped.check(PID, 0, SEQUENCE_MAX, 3) == Duplicate(0, 2)


def test_truncate_to_forgets_batches_at_or_after_the_offset() -> None:
    state, _ = state_with((0, 0, 2), (0, 2, 2), (0, 4, 2))
    state.truncate_to(4)
    assert state.next_offset == 4
    assert state.check(PID, 0, 4, 2) == APPEND              # no longer a duplicate
    assert state.check(PID, 0, 2, 2) == Duplicate(2, 3)
    state.truncate_to(0)
    assert state.snapshot()["producers"] == {}
    with pytest.raises(AssertionError):
        state_with((0, 0, 4))[0].truncate_to(2)             # inside a batch: a caller bug


def test_truncation_keeps_an_epoch_whose_marker_stays_in_the_log() -> None:
    """A marker's epoch survives a truncation past it (with or without the epoch's batches
    after it): the producer's next batch must still start at sequence 0. A truncation that
    removes the marker forgets the producer, as it forgets one whose batches all went."""
    state, _ = state_with((0, 0, 2))
    state.on_marker(PID, 1, 2)
    state.on_appended(PID, 1, 0, 3, 4)
    state.truncate_to(3)
    assert state.epoch_of(PID) == 1
    assert state.check(PID, 1, 2, 1) == Rejected(E.OUT_OF_ORDER_SEQUENCE)  # overtook the epoch's first batch
    assert state.check(PID, 1, 0, 2) == APPEND
    restored = ProducerState.from_snapshot(json.loads(json.dumps(state.snapshot())))
    restored.truncate_to(3)
    assert restored.epoch_of(PID) == 1
    state.truncate_to(2)
    assert state.epoch_of(PID) is None and state.check(PID, 1, 2, 1) == APPEND


def test_a_replicated_batch_with_a_sequence_gap_restarts_the_history() -> None:
    """A follower or a rebuild replays what the log holds: a gap there (a leader that had lost
    the producer's history accepted it) restarts the history instead of failing."""
    state, _ = state_with((0, 0, 1))
    state.on_appended(PID, 0, 5, 1, 1)
    assert state.check(PID, 0, 6, 1) == APPEND
    assert state.check(PID, 0, 1, 1) == Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)


def test_a_marker_with_a_newer_epoch_fences_the_old_one_and_restarts_sequences() -> None:
    """KIP-890: the marker ending a transaction carries the bumped epoch; a late write of the
    old epoch is a zombie's, and the producer's next batch starts at sequence 0."""
    state, headers = state_with((0, 0, 2))
    state.rebuild_from_batches([Header(PID, 1, -1, 2, 2, is_control=True)])
    assert state.next_offset == 3
    assert state.check(PID, 0, 2, 1) == Rejected(ErrorCode.INVALID_PRODUCER_EPOCH)
    assert state.check(PID, 1, 5, 1) == Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
    assert state.check(PID, 1, 0, 1) == APPEND
    restored = ProducerState.from_snapshot(json.loads(json.dumps(state.snapshot())))
    assert restored.check(PID, 0, 2, 1) == Rejected(ErrorCode.INVALID_PRODUCER_EPOCH)
    state.on_marker(PID, 0, 3)  # an older epoch's marker changes nothing
    assert state.check(PID, 1, 0, 1) == APPEND and state.next_offset == 4


batches = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 2)), max_size=30
)


@settings(max_examples=100, deadline=None)
@given(batches)
def test_snapshot_restore_and_rebuild_from_log_agree_with_live_state(steps) -> None:
    """Whatever sequence of producers/epochs was appended, a snapshot round-tripped through
    JSON, and a rebuild from the batch headers (whole or from a mid-log snapshot), answer
    exactly like the live state."""
    live, headers, next_seq, epochs = ProducerState(), [], {}, {}
    for pid, count, epoch_bump in steps:
        epoch = epochs.get(pid, 0) + (1 if epoch_bump == 2 else 0)
        seq = 0 if epoch != epochs.get(pid, 0) else next_seq.get(pid, 0)
        epochs[pid], next_seq[pid] = epoch, (seq + count) % (SEQUENCE_MAX + 1)
        assert live.check(pid, epoch, seq, count) == APPEND
        first = live.next_offset
        live.on_appended(pid, epoch, seq, first, first + count - 1, 1_000 + first)
        headers.append(Header(pid, epoch, seq, first, first + count - 1, max_timestamp=1_000 + first))
        if len(headers) == len(steps) // 2:
            midway = live.snapshot()

    restored = ProducerState.from_snapshot(json.loads(json.dumps(live.snapshot())))
    rebuilt = ProducerState()
    rebuilt.rebuild_from_batches(headers)
    assert restored.snapshot() == rebuilt.snapshot() == live.snapshot()
    if len(steps) >= 2:
        resumed = ProducerState.from_snapshot(midway)
        resumed.rebuild_from_batches(h for h in headers if h.base_offset >= resumed.next_offset)
        assert resumed.snapshot() == live.snapshot()


EXPIRATION_MS = 60_000
WRITTEN_AT = 1_000_000


def test_a_producer_idle_for_the_expiration_is_forgotten_and_writes_again_as_a_new_one() -> None:
    """Kafka's producer.id.expiration.ms: idleness is measured from the newest batch's max
    timestamp; once forgotten, the producer's retry is no longer recognised and any sequence
    is taken (KIP-360), as for a producer never seen."""
    state, _ = state_with((0, 0, 5), (0, 5, 5), timestamp_ms=WRITTEN_AT)
    assert state.expire(WRITTEN_AT + EXPIRATION_MS - 1, EXPIRATION_MS, ()) == [] and len(state) == 1
    assert state.check(PID, 0, 5, 5) == Duplicate(5, 9)
    assert state.expire(WRITTEN_AT + EXPIRATION_MS, EXPIRATION_MS, ()) == [PID] and len(state) == 0
    assert state.epoch_of(PID) is None
    assert state.check(PID, 0, 5, 5) == APPEND and state.check(PID, 0, 77, 1) == APPEND


def test_only_idle_producers_expire_and_a_newer_write_or_marker_renews_one() -> None:
    state, _ = state_with((0, 0, 1), timestamp_ms=WRITTEN_AT)
    state.on_appended(7, 0, 0, 1, 1, WRITTEN_AT + 10)
    state.on_marker(PID, 1, 2, WRITTEN_AT + 20)  # the end of PID's transaction: activity too
    state.on_appended(8, 0, 0, 3, 3, WRITTEN_AT + 5)
    state.on_appended(8, 0, 1, 4, 4, WRITTEN_AT - 50)  # an older CreateTime does not make it idler
    assert sorted(state.expire(WRITTEN_AT + 10 + EXPIRATION_MS, EXPIRATION_MS, ())) == [7, 8]
    assert state.epoch_of(PID) == 1 and len(state) == 1


def test_a_producer_with_a_transaction_open_on_the_partition_does_not_expire() -> None:
    """Its epoch must still fence a zombie of the transaction the coordinator will end."""
    state, _ = state_with((0, 0, 1), timestamp_ms=WRITTEN_AT)
    state.on_appended(7, 0, 0, 1, 1, WRITTEN_AT)
    assert state.expire(WRITTEN_AT + 2 * EXPIRATION_MS, EXPIRATION_MS, {PID: 0}) == [7]
    assert state.epoch_of(PID) == 0


def test_the_log_start_passing_a_producers_last_write_forgets_it_as_a_restart_would() -> None:
    """Retention or DeleteRecords moving the log start past every batch and the marker of a
    producer forgets it (Kafka's evictUnretainedProducers); the producers a rebuild from the
    new log start would find are the ones kept, with what they remembered."""
    state = ProducerState()
    headers = [Header(1, 0, 0, 0, 1), Header(2, 0, 0, 2, 2), Header(1, 0, 2, 3, 3), Header(3, 4, -1, 4, 4, is_control=True),
               Header(2, 0, 1, 5, 6)]
    state.rebuild_from_batches(headers)
    for log_start, kept in [(3, {1, 2, 3}), (4, {2, 3}), (5, {2}), (7, set())]:
        state.remove_before(log_start)
        after = ProducerState()
        after.rebuild_from_batches(h for h in headers if h.last_offset >= log_start)
        assert {p for p in (1, 2, 3) if state.epoch_of(p) is not None} == kept == {
            p for p in (1, 2, 3) if after.epoch_of(p) is not None}, log_start
        assert len(state) == len(kept)
    kept_whole = ProducerState()
    kept_whole.rebuild_from_batches(headers)
    kept_whole.remove_before(6)
    assert kept_whole.check(2, 0, 0, 1) == Duplicate(2, 2)  # a kept producer keeps its older batches
