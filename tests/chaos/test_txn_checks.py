"""The transaction checks (chaos/checker/txn_checks.py) on hand-written histories: a clean
run passes, and each edit that breaks one promise is caught as its kind (the negative
controls of each check)."""

from __future__ import annotations

from dataclasses import replace

from chaos.checker.txn_checks import TxnCheckResult, check_txns
from chaos.txn_history import TxnFinalRead, TxnOp, TxnPoll, TxnWrite

# t1 commits a0 (partition 0, offset 0) and b0 (partition 1, offset 0); t2 aborts a1 (offset 2,
# after t1's marker at 1) and b1; t3 commits a2 (offset 5, after t2's abort marker at 4).
T1 = TxnOp("w0", "w0-t1", "commit", "committed", 0.0, 1.0, (TxnWrite(0, "a0", 0), TxnWrite(1, "b0", 0)), commit_s=0.5)
T2 = TxnOp("w0", "w0-t2", "abort", "aborted", 1.0, 2.0, (TxnWrite(0, "a1", 2), TxnWrite(1, "b1", 2)))
T3 = TxnOp("w0", "w0-t3", "commit", "committed", 2.0, 3.0, (TxnWrite(0, "a2", 5),), commit_s=2.5)
TXNS = [T1, T2, T3]
POLLS = [
    TxnPoll("reader-0", 0, 0.6, 0.8, {0: [(0, "a0")], 1: [(0, "b0")]}),
    TxnPoll("reader-0", 0, 2.6, 2.9, {0: [(5, "a2")]}),
]
FINALS = [TxnFinalRead(0, [(0, "a0"), (5, "a2")], True), TxnFinalRead(1, [(0, "b0")], True)]


def kinds(txns=TXNS, polls=POLLS, finals=FINALS) -> list[str]:
    return list(TxnCheckResult(check_txns(txns, polls, finals)).by_kind)


def test_a_clean_history_passes():
    assert kinds() == []


def test_a_read_of_an_aborted_transaction_is_g1a():
    polls = [*POLLS, TxnPoll("reader-1", 0, 1.5, 1.7, {1: [(2, "b1")]})]
    assert kinds(polls=polls) == ["G1a"]
    assert kinds(finals=[TxnFinalRead(0, [(0, "a0"), (2, "a1"), (5, "a2")], True), FINALS[1]]) == ["G1a"]


def test_a_read_before_the_commit_was_requested_is_g1b():
    early = TxnPoll("reader-1", 0, 2.0, 2.2, {0: [(5, "a2")]})  # t3 asked to commit at 2.5
    assert kinds(polls=[*POLLS, early]) == ["G1b"]


def test_a_transaction_visible_in_part_is_g1b_and_its_missing_records_lost():
    finals = [FINALS[0], TxnFinalRead(1, [], True)]
    assert kinds(finals=finals) == ["G1b", "lost-write"]
    unknown = [replace(T1, outcome="unknown"), T2, T3]
    assert kinds(txns=unknown, finals=finals) == ["G1b"]  # committed or not, never in part
    assert kinds(txns=unknown, finals=[TxnFinalRead(0, [(5, "a2")], True), TxnFinalRead(1, [], True)]) == []  # wholly invisible: aborted


def test_a_partition_the_final_read_did_not_finish_is_not_judged():
    assert kinds(finals=[FINALS[0], TxnFinalRead(1, [], False)]) == []


def test_a_value_at_two_offsets_is_a_duplicate():
    finals = [TxnFinalRead(0, [(0, "a0"), (5, "a2"), (7, "a2")], True), FINALS[1]]
    assert "duplicate" in kinds(finals=finals)


def test_two_values_at_one_offset_are_inconsistent():
    polls = [*POLLS, TxnPoll("reader-1", 0, 2.6, 2.9, {0: [(0, "a2")]})]
    assert "inconsistent-offsets" in kinds(polls=polls)


def test_offsets_going_back_within_a_session_are_nonmonotonic():
    again = TxnPoll("reader-0", 0, 3.0, 3.1, {0: [(0, "a0")]})
    assert kinds(polls=[*POLLS, again]) == ["nonmonotonic-poll"]
    assert kinds(polls=[*POLLS, replace(again, session=1)]) == []  # a new session starts over


def test_reader_sessions_come_from_its_seeks():
    from chaos.history import PollOp, SeekOp
    from chaos.txn_history import txn_polls

    ops = [SeekOp("reader-0", 0, 0, 0.6), SeekOp("reader-0", 1, 0, 0.6), PollOp("reader-0", 0.7, 0.8, "ok", {0: [(0, "a0")]}),
           PollOp("reader-0", 0.9, 1.0, "failed", error="OFFSET_OUT_OF_RANGE"), SeekOp("reader-0", 0, 0, 1.1),
           PollOp("reader-0", 1.2, 1.3, "ok", {0: [(0, "a0")]}), PollOp("reader-1", 1.2, 1.3, "ok", {})]
    polls = txn_polls(ops)
    assert [(p.reader, p.session) for p in polls] == [("reader-0", 1), ("reader-0", 2)]  # failed and empty polls left out
    assert kinds(polls=polls) == []  # reading offset 0 again after a seek is no regression


def test_an_input_transformed_by_two_visible_transactions_is_a_duplicate():
    from chaos.txn_history import transformed

    c1 = TxnOp("ctp-0", "ctp-0-t0", "commit", "committed", 1.0, 1.2, (TxnWrite(2, transformed("a0", "ctp-0-t0"), 0),), commit_s=1.1)
    c2 = TxnOp("ctp-1", "ctp-1-t0", "commit", "committed", 1.5, 1.7, (TxnWrite(2, transformed("a0", "ctp-1-t0"), 2),), commit_s=1.6)
    once = [*FINALS, TxnFinalRead(2, [(0, transformed("a0", "ctp-0-t0"))], True)]
    assert kinds(txns=[*TXNS, c1, replace(c2, outcome="aborted")], finals=once) == []  # the retry aborted: once
    twice = [*FINALS, TxnFinalRead(2, [(0, transformed("a0", "ctp-0-t0")), (2, transformed("a0", "ctp-1-t0"))], True)]
    assert kinds(txns=[*TXNS, c1, c2], finals=twice) == ["duplicate"]
