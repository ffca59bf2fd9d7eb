"""The partition's open transactions, LSO and aborted-transaction index: worked cases, then
properties over random interleavings of producers, markers, high-watermark and log-start moves."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from data_plane.replication.transaction_index import AbortedTxn, TransactionIndex


@dataclass(frozen=True)
class Batch:
    producer_id: int
    base_offset: int
    last_offset: int
    is_transactional: bool = True
    is_control: bool = False


def data(index: TransactionIndex, pid: int, count: int = 1, transactional: bool = True) -> Batch:
    b = Batch(pid, index.next_offset, index.next_offset + count - 1, transactional)
    index.on_batch(b)
    return b


def marker(index: TransactionIndex, pid: int, commit: bool) -> Batch:
    b = Batch(pid, index.next_offset, index.next_offset, True, True)
    index.on_batch(b, commit)
    return b


def test_lso_stops_at_the_earliest_open_transaction_and_moves_on_markers() -> None:
    index = TransactionIndex()
    data(index, -1, 2, transactional=False)        # 0-1 plain
    data(index, 1, 3)                               # 2-4 producer 1 opens at 2
    data(index, 2, 1)                               # 5   producer 2 opens at 5
    data(index, 1, 1)                               # 6   still producer 1's transaction
    assert index.last_stable_offset(7) == 2
    assert index.last_stable_offset(1) == 1         # never above the HW
    marker(index, 1, commit=True)                   # 7
    assert index.last_stable_offset(7) == 2         # the marker is not below the HW yet
    index.on_high_watermark(8)
    assert index.last_stable_offset(8) == 5         # producer 2 still open
    marker(index, 2, commit=False)                  # 8
    index.on_high_watermark(9)
    assert index.last_stable_offset(9) == 9
    assert index.aborted == [AbortedTxn(5, 8, 2)]
    assert index.aborted_between(0, 5) == [] and index.aborted_between(5, 6) == [AbortedTxn(5, 8, 2)]
    assert index.aborted_between(8, 20) == []       # only the marker is left at 8: no aborted data


def test_an_abort_with_nothing_written_here_still_gets_an_entry() -> None:
    index = TransactionIndex()
    marker(index, 3, commit=False)
    assert index.aborted == [AbortedTxn(0, 0, 3)] and index.last_stable_offset(1) == 1


def test_truncation_reopens_a_transaction_whose_marker_was_cut() -> None:
    index = TransactionIndex()
    data(index, 1, 2)                               # 0-1
    marker(index, 1, commit=False)                  # 2
    data(index, 2, 1)                               # 3
    index.on_high_watermark(2)
    index.truncate_to(2)
    assert index.open_first_offset == {1: 0} and index.aborted == [] and index.next_offset == 2
    assert index.last_stable_offset(2) == 0


def test_the_log_start_bounds_the_lso_and_frees_it_of_transactions_wholly_below() -> None:
    index = TransactionIndex()
    data(index, 1, 2)                               # 0-1 producer 1 opens at 0
    data(index, 2, 1)                               # 2   producer 2 opens at 2
    data(index, -1, 3, transactional=False)         # 3-5 plain
    data(index, 2, 1)                               # 6   producer 2's transaction goes on
    index.on_high_watermark(7)
    assert index.last_stable_offset(7) == 0
    index.remove_before(4)                          # retention or DeleteRecords: the log starts at 4
    assert index.open_first_offset == {2: 4}        # producer 1's data is all gone; producer 2 keeps 6 unstable
    assert index.last_stable_offset(7) == 4
    marker(index, 1, commit=False)                  # 7: closes an empty transaction; its data was deleted
    marker(index, 2, commit=True)                   # 8
    index.on_high_watermark(9)
    assert index.last_stable_offset(9) == 9 and index.aborted == [AbortedTxn(7, 7, 1)]
    data(index, 3, 2)                               # 9-10 producer 3 opens at 9, its marker at 11 is not below the HW
    marker(index, 3, commit=True)                   # 11
    index.on_high_watermark(11)
    index.remove_before(10)
    assert index.unreplicated[-1].first_offset == 10 and index.last_stable_offset(11) == 10


def test_an_open_transaction_cut_by_truncation_is_judged_by_the_cut() -> None:
    index = TransactionIndex()
    data(index, 1, 1)                               # 0
    data(index, 1, 4)                               # 1-4
    index.truncate_to(3)                            # its data now ends at 2 at the latest
    index.remove_before(3)
    assert index.open_first_offset == {} and index.last_stable_offset(3) == 3


def replay(steps, index: TransactionIndex | None = None, log: list | None = None) -> tuple[TransactionIndex, list[tuple[Batch, bool | None]]]:
    index, log = index or TransactionIndex(), log if log is not None else []
    for pid, kind, count in steps:
        if kind == "marker":
            b = Batch(pid, index.next_offset, index.next_offset, True, True)
            commit: bool | None = count % 2 == 0
        else:
            b, commit = Batch(pid, index.next_offset, index.next_offset + count - 1, kind == "txn"), None
        index.on_batch(b, commit)
        log.append((b, commit))
    return index, log


def unstable_below(log: list[tuple[Batch, bool | None]], lso: int, hw: int, log_start: int = 0) -> list[Batch]:
    """Transactional data still in the log (at or past ``log_start``) and below ``lso`` whose
    transaction has no marker below ``hw``: what a read_committed reader must never be served."""
    bad = []
    for b, commit in log:
        if b.is_transactional and not b.is_control and b.last_offset >= log_start and max(b.base_offset, log_start) < lso:
            closing = [m for m, c in log if c is not None and m.producer_id == b.producer_id and m.base_offset > b.last_offset]
            if not closing or closing[0].base_offset >= hw:
                bad.append(b)
    return bad


def test_the_checker_catches_an_lso_that_ignores_unreplicated_markers() -> None:
    """Negative control: serving up to the HW while a marker is above it is caught."""
    index, log = replay([(1, "txn", 2), (1, "marker", 2)])  # data 0-1, commit marker at 2
    assert unstable_below(log, index.last_stable_offset(2), 2) == []
    assert unstable_below(log, 2, 2) == [log[0][0]]  # the naive answer, LSO = HW


steps = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["txn", "plain", "marker"]), st.integers(1, 3)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps, st.lists(st.integers(0, 200), max_size=10))
def test_lso_is_bounded_by_hw_and_open_transactions_and_monotonic_as_hw_grows(steps, hw_moves) -> None:
    index, log = replay(steps)
    hw_values = sorted(min(h, index.next_offset) for h in hw_moves) + [index.next_offset]
    last = 0
    for hw in hw_values:
        index.on_high_watermark(hw)
        lso = index.last_stable_offset(hw)
        assert lso <= hw
        assert all(lso <= first for first in index.open_first_offset.values())
        assert unstable_below(log, lso, hw) == [], (lso, hw)
        assert lso >= last, (lso, last)
        last = lso
    # the aborted index holds exactly the aborted markers, each over its producer's data
    assert [t.last_offset for t in index.aborted] == [b.base_offset for b, c in log if c is False]
    assert index.aborted == TransactionIndex.rebuild(log).aborted  # recovery replays to the same index
    assert index.open_first_offset == TransactionIndex.rebuild(log).open_first_offset


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(0, 200))
def test_truncation_above_the_hw_matches_a_rebuild_of_the_shorter_log(steps, cut) -> None:
    index, log = replay(steps)
    boundaries = [b.base_offset for b, _ in log] + [index.next_offset]
    offset = min(boundaries, key=lambda o: abs(o - cut))
    index.on_high_watermark(offset)
    index.truncate_to(offset)
    kept = [(b, c) for b, c in log if b.last_offset < offset]
    rebuilt = TransactionIndex.rebuild(kept)
    assert index.open_first_offset == rebuilt.open_first_offset
    assert index.aborted == rebuilt.aborted and index.next_offset == rebuilt.next_offset


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(0, 200), st.integers(0, 200), steps)
def test_the_lso_never_falls_below_the_log_start_nor_passes_unstable_data_left_in_the_log(before, hw_at, start_at, after) -> None:
    """Retention or DeleteRecords moves the log start (never past the HW), then more batches come."""
    index, log = replay(before)
    hw = min(hw_at, index.next_offset)
    log_start = min(start_at, hw)
    index.on_high_watermark(hw)
    index.remove_before(log_start)
    lso = index.last_stable_offset(hw)
    assert log_start <= lso <= hw and unstable_below(log, lso, hw, log_start) == [], (log_start, lso, hw)
    index, log = replay(after, index, log)
    end = index.next_offset
    index.on_high_watermark(end)
    lso = index.last_stable_offset(end)
    assert log_start <= lso <= end and unstable_below(log, lso, end, log_start) == [], (log_start, lso, end)


def test_the_checker_catches_an_lso_past_an_open_transactions_data_above_the_log_start() -> None:
    """Negative control: dropping a transaction whose first offset is below the log start, though
    some of its data is above it, would serve that data; the checker sees it."""
    index, log = replay([(1, "txn", 2), (2, "plain", 2), (1, "txn", 1)])  # producer 1: 0-1 and 4
    assert unstable_below(log, 5, 5, log_start=3) == [log[2][0]]
    index.remove_before(3)
    assert index.last_stable_offset(5) == 3 and unstable_below(log, 3, 5, log_start=3) == []
