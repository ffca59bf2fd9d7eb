"""`__transaction_state` records: every metadata field survives the bytes; a Dead id is a
tombstone; replaying a random history of decisions gives the coordinator's map, and so does
replaying only the latest record of each key (what compaction keeps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from data_plane.transactions import record_codec
from data_plane.transactions import state_machine as sm
from data_plane.transactions.state_machine import TopicPartition, TxnMetadata, TxnState


def test_every_field_round_trips_and_dead_is_a_tombstone() -> None:
    meta = TxnMetadata("tx-é", 42, 7, 60_000, TxnState.PREPARE_COMMIT,
                       frozenset({TopicPartition("a", 2), TopicPartition("a", 0), TopicPartition("b", 1)}), 1234, 1000, 6)
    key, value = record_codec.encode(meta)
    assert value is not None and record_codec.decode(key, value) == ("tx-é", meta)
    key2, tombstone = record_codec.encode(TxnMetadata("tx-é", 42, 7, 60_000, TxnState.DEAD))
    assert (key2, tombstone) == (key, None)
    assert record_codec.decode(key, None) == ("tx-é", None)


def test_replay_applies_in_order_and_a_tombstone_forgets() -> None:
    a0 = TxnMetadata("a", 1, 0, 100, TxnState.EMPTY)
    a1 = TxnMetadata("a", 1, 1, 100, TxnState.ONGOING, frozenset({TopicPartition("t", 0)}), 5, 5)
    b0 = TxnMetadata("b", 2, 0, 100, TxnState.EMPTY)
    ids: dict[str, TxnMetadata] = {}
    record_codec.replay([record_codec.encode(m) for m in (a0, b0, a1)], ids)
    assert ids == {"a": a1, "b": b0}
    record_codec.replay([record_codec.encode(TxnMetadata("b", 2, 0, 100, TxnState.DEAD))], ids)
    assert ids == {"a": a1}


OPS = st.lists(st.tuples(st.sampled_from(["init", "add", "commit", "abort", "markers", "timeout", "expire"]),
                         st.sampled_from(["x", "y", "z"]), st.integers(0, 2)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_a_random_history_replays_to_the_same_map_whole_or_compacted(ops) -> None:
    ids: dict[str, TxnMetadata] = {}
    log: list[tuple[bytes, bytes | None]] = []
    now, fresh = 0, 1000
    for op, tid, part in ops:
        now += 10
        fresh += 1
        meta = ids.get(tid)
        written: tuple[TxnMetadata, ...] = ()
        if op == "init":
            written = sm.init_producer_id(meta, tid, 50, 1000, now, fresh).log
        elif meta is not None and op == "add":
            written = sm.add_partitions(meta, meta.producer_id, meta.producer_epoch, frozenset({TopicPartition("t", part)}), now).log
        elif meta is not None and op in ("commit", "abort"):
            written = sm.end_txn(meta, meta.producer_id, meta.producer_epoch, op == "commit", now, fresh).log
        elif meta is not None and op == "markers" and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            written = (sm.markers_written(meta, now),)
        elif meta is not None and op == "timeout":
            decision = sm.abort_timed_out(meta, now + 100, fresh)
            written = decision.log if decision is not None else ()
        elif meta is not None and op == "expire":
            dead = sm.expire_transactional_id(meta, now, 30)
            written = (dead,) if dead is not None else ()
        for m in written:
            log.append(record_codec.encode(m))
            if m.state is TxnState.DEAD:
                ids.pop(tid, None)
            else:
                ids[tid] = m
    whole: dict[str, TxnMetadata] = {}
    record_codec.replay(log, whole)
    last = {key: i for i, (key, _) in enumerate(log)}
    compacted: dict[str, TxnMetadata] = {}  # compaction keeps the last record of each key, in offset order
    record_codec.replay([r for i, r in enumerate(log) if last[r[0]] == i], compacted)
    assert whole == ids
    assert compacted == ids
