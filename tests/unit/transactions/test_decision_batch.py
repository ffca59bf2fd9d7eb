"""The group-commit core: decisions are made in arrival order, each on the metadata the earlier
ones of the batch left; the batch's log keeps that order; the shard's durable state is not
touched until the shell applies the written log."""

from __future__ import annotations

from server_common.errors import ErrorCode
from data_plane.transactions import state_machine as sm
from data_plane.transactions.decision_batch import DecisionBatch
from data_plane.transactions.state_machine import TopicPartition, TxnState

NOW = 1_000
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_decisions_see_the_earlier_ones_and_the_log_keeps_their_order():
    ids = {}
    batch = DecisionBatch(ids)
    init = sm.init_producer_id(batch.current("a"), "a", 5000, 60_000, NOW, 7)
    batch.add(init)
    added = sm.add_partitions(batch.current("a"), 7, 0, frozenset({TP0}), NOW)
    batch.add(added)
    other = sm.init_producer_id(batch.current("b"), "b", 5000, 60_000, NOW, 8)
    batch.add(other)
    again = sm.add_partitions(batch.current("a"), 7, 0, frozenset({TP1}), NOW)
    batch.add(again)
    assert [e.error for e in batch.decisions] == [ErrorCode.NONE] * 4
    assert [(m.transactional_id, m.state) for m in batch.log] == [
        ("a", TxnState.EMPTY), ("a", TxnState.ONGOING), ("b", TxnState.EMPTY), ("a", TxnState.ONGOING)]
    assert batch.current("a").partitions == frozenset({TP0, TP1})
    assert ids == {}  # nothing applied before the write


def test_a_refused_decision_adds_nothing_to_the_log():
    batch = DecisionBatch({})
    batch.add(sm.init_producer_id(None, "a", 5000, 60_000, NOW, 7))
    refused = sm.add_partitions(batch.current("a"), 7, 3, frozenset({TP0}), NOW)  # a stale epoch
    batch.add(refused)
    assert refused.error == ErrorCode.PRODUCER_FENCED and len(batch.log) == 1 and batch.current("a").state is TxnState.EMPTY
