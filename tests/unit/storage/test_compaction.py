"""Log compaction: the pure decisions against simple models, and passes over real log files
(rewrite, install, crash leftovers) checked against a model of which records survive."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_plane.record_batch import decode_batches, encode_batch
from data_plane.storage import PartitionLog
from data_plane.control_batch import ControlType, encode_marker, validate_marker
from data_plane.replication.transaction_index import AbortedTxn, TransactionIndex, in_aborted
from data_plane.storage.compaction import OffsetMap, SegmentInfo, TransactionCleaning, keep_record, kept_runs, plan_cleaning
from data_plane.storage.log_cleaner import CLEANED_SUFFIX, CleaningPass, install_cleaned_file, read_cleaned_up_to
from tests.unit.storage.conftest import small_settings

NOW = 10_000_000


def seg(base: int, end: int, size: int = 100, ts: int = 0) -> SegmentInfo:
    return SegmentInfo(base, end, size, ts)


# ---------------------------------------------------------------- pure core


def test_plan_takes_the_dirty_cleanable_prefix():
    closed = [seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 40)]
    plan = plan_cleaning(closed, cleaned_up_to=10, last_stable_offset=40, now_ms=NOW, min_lag_ms=0, min_dirty_ratio=0.5)
    assert plan is not None and list(plan.dirty_indexes) == [1, 2, 3] and plan.dirty_ratio == 0.75


def test_plan_waits_for_the_dirty_ratio():
    closed = [seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 40)]
    assert plan_cleaning(closed, 30, 40, NOW, 0, 0.5) is None  # 1/4 dirty
    assert plan_cleaning(closed, 30, 40, NOW, 0, 0.25) is not None
    assert plan_cleaning(closed, 40, 40, NOW, 0, 0.0) is None  # nothing dirty


def test_plan_stops_at_the_last_stable_offset_and_the_compaction_lag():
    closed = [seg(0, 10), seg(10, 20, ts=NOW - 5), seg(20, 30)]
    assert list(plan_cleaning(closed, 0, 15, NOW, 0, 0.0).dirty_indexes) == [0]  # segment 1 ends above the LSO
    assert list(plan_cleaning(closed, 0, 30, NOW, 10, 0.0).dirty_indexes) == [0]  # segment 1 is too young
    assert plan_cleaning(closed, 0, 5, NOW, 0, 0.0) is None


def test_keep_record_rules():
    latest = {b"a": 5}
    assert not keep_record(b"a", b"x", 3, NOW, latest, 0)  # superseded
    assert keep_record(b"a", b"x", 5, NOW, latest, 0)  # the latest
    assert keep_record(b"b", b"x", 1, NOW, latest, 0)  # not in this pass's map: latest as far as it knows
    assert keep_record(None, b"x", 1, NOW, latest, 0)  # no key: nothing supersedes it
    assert keep_record(b"a", None, 5, 100, latest, 100)  # a tombstone inside delete.retention.ms
    assert not keep_record(b"a", None, 5, 99, latest, 100)  # an old tombstone goes


def test_transaction_cleaning_removes_aborted_data_and_markers_left_without_records():
    txns = TransactionCleaning([AbortedTxn(first_offset=10, last_offset=20, producer_id=7)], marker_horizon_ms=100)
    assert txns.is_aborted(7, 12, is_transactional=True)
    assert not txns.is_aborted(7, 12, is_transactional=False)  # not part of a transaction
    assert not txns.is_aborted(8, 12, is_transactional=True) and not txns.is_aborted(7, 20, is_transactional=True)
    txns.on_data(7, True, kept_any=False)
    assert not txns.keep_marker(7, 99)  # no record left, older than delete.retention.ms
    txns.on_data(7, True, kept_any=False)
    assert txns.keep_marker(7, 100)  # no record left, but still young
    txns.on_data(8, True, kept_any=True)
    txns.on_data(8, True, kept_any=False)
    assert txns.keep_marker(8, 0)  # its transaction keeps a record
    assert not txns.keep_marker(8, 0)  # the next marker of producer 8: a transaction with nothing left


@given(st.lists(st.booleans(), max_size=30))
def test_kept_runs_cover_exactly_the_kept_indexes(keep):
    runs = kept_runs(keep)
    assert [i for start, stop in runs for i in range(start, stop)] == [i for i, k in enumerate(keep) if k]
    assert all(stop < next_start for (_, stop), (next_start, _) in zip(runs, runs[1:]))  # maximal runs


def test_offset_map_bound():
    m = OffsetMap(2)
    m.put_all([b"a", b"b", b"a", None], [0, 1, 2, 3])
    assert m.latest == {b"a": 2, b"b": 1}
    assert m.new_keys([b"a", b"c", b"c", None]) == 1 and not m.fits(1) and m.fits(0)


# ---------------------------------------------------------------- passes over real files


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    ts: int


def write_log(directory: Path, batches: list[list[tuple[bytes | None, bytes | None, int]]]) -> tuple[PartitionLog, list[Rec]]:
    plog = PartitionLog.open(directory, small_settings(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0), 0)
    records: list[Rec] = []
    for batch in batches:
        keys, values, stamps = zip(*batch)
        appended = plog.append(encode_batch(list(values), list(keys), timestamps_ms=list(stamps)), assign_offsets=True, leader_epoch=3, now_ms=0)
        records += [Rec(appended.first_offset + i, k, v, t) for i, (k, v, t) in enumerate(batch)]
    return plog, records


def read_all(plog: PartitionLog) -> list[Rec]:
    data = plog.read(plog.log_start_offset, 1 << 30).data
    return [Rec(o, k, v, t) for b in decode_batches(data) for o, k, v, t in zip(b.offsets, b.keys, b.values, b.timestamps)]


def clean_fully(plog: PartitionLog, map_entries: int, horizon_ms: int) -> int:
    """Passes until none is due; returns the offset cleaned up to."""
    while (due := plog.cleaning_candidates(plog.log_end_offset, NOW)) is not None:
        result = CleaningPass(plog.directory, *due, map_entries=map_entries, tombstone_horizon_ms=horizon_ms, aborted=()).run()
        assert plog.install_cleaned(result) == len(result.cleaned)
    return read_cleaned_up_to(plog.directory)


def survivors(records: list[Rec], cleaned_up_to: int, horizon_ms: int) -> list[Rec]:
    """The model: below the cleaned offset a keyed record survives when no later record of its
    key lies below that offset, and it is not a tombstone older than the horizon."""

    def kept(r: Rec) -> bool:
        if r.offset >= cleaned_up_to or r.key is None:
            return True
        if any(o.key == r.key and r.offset < o.offset < cleaned_up_to for o in records):
            return False
        return r.value is not None or r.ts >= horizon_ms

    return [r for r in records if kept(r)]


record_st = st.tuples(
    st.sampled_from([b"k1", b"k2", b"k3", b"k4", b"k5", None]),
    st.one_of(st.none(), st.binary(min_size=1, max_size=40)),
    st.integers(0, 2000),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.lists(record_st, min_size=1, max_size=6), min_size=1, max_size=40),
    map_entries=st.integers(1, 6),
    horizon_ms=st.integers(0, 2001),
)
def test_passes_keep_exactly_the_model_survivors(tmp_path_factory, batches, map_entries, horizon_ms):
    plog, records = write_log(tmp_path_factory.mktemp("log") / "t-0", batches)
    end_before = plog.log_end_offset
    cleaned_up_to = clean_fully(plog, map_entries, horizon_ms)
    assert read_all(plog) == survivors(records, cleaned_up_to, horizon_ms)
    assert cleaned_up_to == plog.active.base_offset  # a finished cleaning covers every closed segment
    assert plog.log_end_offset == end_before
    plog.close()
    reopened = PartitionLog.open(plog.directory, plog.settings, 0)  # recovery accepts the gaps
    assert read_all(reopened) == survivors(records, cleaned_up_to, horizon_ms)
    reopened.close()


def overwrites(rounds: int) -> list[list[tuple[bytes | None, bytes | None, int]]]:
    return [[(f"k{i}".encode(), f"r{r}-{i}".encode() * 8, 1000 + r) for i in range(4)] for r in range(rounds)]


def test_the_latest_value_of_each_key_and_its_producer_fields_survive(log_dir):
    plog, records = write_log(log_dir, overwrites(30) + [[(b"k0", None, 5000)]])
    cleaned_up_to = clean_fully(plog, 100, horizon_ms=0)
    assert cleaned_up_to > 0
    assert read_all(plog) == survivors(records, cleaned_up_to, 0)
    plog.close()


def test_a_crash_before_the_install_leaves_the_log_as_it_was(log_dir):
    plog, records = write_log(log_dir, overwrites(30))
    result = CleaningPass(log_dir, *plog.cleaning_candidates(plog.log_end_offset, NOW), map_entries=100, tombstone_horizon_ms=0, aborted=()).run()
    assert result.cleaned and all(c.path.exists() for c in result.cleaned)
    for segment in plog.segments:  # kill -9: no flush, no close
        segment.release()
    reopened = PartitionLog.open(log_dir, plog.settings, 0)
    assert not list(log_dir.glob(f"*{CLEANED_SUFFIX}"))
    assert read_all(reopened) == records
    reopened.close()


def test_a_crash_between_installs_loses_no_latest_value(log_dir):
    plog, records = write_log(log_dir, overwrites(30) + [[(b"k9", b"only", 1)]])
    due = plog.cleaning_candidates(plog.log_end_offset, NOW)
    result = CleaningPass(log_dir, *due, map_entries=100, tombstone_horizon_ms=0, aborted=()).run()
    assert len(result.cleaned) >= 3
    half = len(result.cleaned) // 2
    for cleaned in result.cleaned[:half]:
        install_cleaned_file(cleaned.path, log_dir / cleaned.path.with_suffix(".log").name)
    for segment in plog.segments:
        segment.release()
    reopened = PartitionLog.open(log_dir, plog.settings, 0)
    read = read_all(reopened)
    assert set(read) <= set(records)  # only original records, at their original offsets
    latest = {r.key: r for r in records}
    assert all(r in read for r in latest.values())
    assert len(read) < len(records)  # the installed half did remove records
    reopened.close()


def test_half_written_cleaned_file_is_never_read(log_dir):
    plog, records = write_log(log_dir, overwrites(30))
    plog.close()
    (log_dir / f"{0:020d}{CLEANED_SUFFIX}").write_bytes(b"\x00" * 100)
    reopened = PartitionLog.open(log_dir, plog.settings, 0)
    assert read_all(reopened) == records and not list(log_dir.glob(f"*{CLEANED_SUFFIX}"))
    reopened.close()


def test_delete_only_policy_is_never_cleaned(log_dir):
    plog = PartitionLog.open(log_dir, small_settings(min_cleanable_dirty_ratio=0.0), 0)
    for batch in overwrites(30):
        keys, values, stamps = zip(*batch)
        plog.append(encode_batch(list(values), list(keys), timestamps_ms=list(stamps)), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert plog.cleaning_candidates(plog.log_end_offset, NOW) is None
    plog.close()


@pytest.mark.parametrize("policy, deletes", [("compact", False), ("compact,delete", True), ("delete", True)])
def test_retention_runs_unless_the_policy_is_compact_alone(log_dir, policy, deletes):
    plog = PartitionLog.open(log_dir, small_settings(cleanup_policy=policy, retention_ms=1), 0)
    for batch in overwrites(30):
        keys, values, stamps = zip(*batch)
        plog.append(encode_batch(list(values), list(keys), timestamps_ms=list(stamps)), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert (plog.apply_retention(NOW) > 0) == deletes
    plog.close()


@pytest.mark.parametrize(
    "key, raw, accepted",
    [
        ("cleanup.policy", "compact", True),
        ("cleanup.policy", "compact,delete", True),
        ("cleanup.policy", "delete,compact", True),
        ("cleanup.policy", "compress", False),
        ("min.cleanable.dirty.ratio", "0.1", True),
        ("min.cleanable.dirty.ratio", "1.5", False),
        ("min.cleanable.dirty.ratio", "half", False),
        ("delete.retention.ms", "-1", False),
        ("min.compaction.lag.ms", "0", True),
    ],
)
def test_compaction_configs_are_validated(key, raw, accepted):
    from metadata_quorum.topic_config import InvalidConfigError, validate

    if accepted:
        assert validate({key: raw}) == {key: str(float(raw)) if key == "min.cleanable.dirty.ratio" else raw}
    else:
        with pytest.raises(InvalidConfigError, match=key):
            validate({key: raw})


def test_what_a_truncation_removes_is_dirty_again(log_dir):
    plog, _ = write_log(log_dir, overwrites(30))
    cleaned_up_to = clean_fully(plog, 100, horizon_ms=0)
    plog.truncate_to(cleaned_up_to - 1)
    assert read_cleaned_up_to(log_dir) <= plog.log_end_offset
    plog.truncate_fully_and_start_at(5)
    assert read_cleaned_up_to(log_dir) == 5
    plog.close()


def txn_log(directory: Path) -> tuple[PartitionLog, TransactionIndex]:
    """x1 committed plainly, then an aborted transaction overwriting it, then a committed one
    writing x2, then filler rounds so those segments close (markers at ts 500); with the
    transaction index a partition keeps, fed every appended batch."""
    plog = PartitionLog.open(directory, small_settings(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0), 0)
    index = TransactionIndex()

    def append(data: bytes, marker_commit: bool | None = None) -> None:
        validated = [(0, validate_marker(data))] if marker_commit is not None else None
        appended = plog.append(data, assign_offsets=True, leader_epoch=3, now_ms=0, validated=validated)
        for header in appended.headers:
            index.on_batch(header, marker_commit)

    def txn(pid: int, key: bytes, value: bytes) -> bytes:
        return encode_batch([value], [key], timestamps_ms=500, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    append(encode_batch([b"committed"], [b"x1"], timestamps_ms=500))      # 0
    append(txn(7, b"x1", b"aborted"))                                      # 1
    append(encode_marker(ControlType.ABORT, 7, 0, 0, 500), False)          # 2
    append(txn(8, b"x2", b"in-txn"))                                       # 3
    append(encode_marker(ControlType.COMMIT, 8, 0, 0, 500), True)          # 4
    append_overwrites(plog, 12)
    return plog, index


def append_overwrites(plog: PartitionLog, rounds: int) -> None:
    """Dirty the log again: closed segments a next pass cleans."""
    for batch in overwrites(rounds):
        plog.append(encode_batch([v for _, v, _ in batch], [k for k, _, _ in batch], timestamps_ms=1000),
                    assign_offsets=True, leader_epoch=3, now_ms=0)


def clean_with_transactions(plog: PartitionLog, horizon_ms: int, aborted) -> list[tuple[int, bytes | None, bool]]:
    """One pass as the broker runs it; (offset, key, control) of what is left below offset 5."""
    due = plog.cleaning_candidates(plog.log_end_offset, NOW)
    result = CleaningPass(plog.directory, *due, map_entries=100, tombstone_horizon_ms=horizon_ms, aborted=aborted).run()
    plog.install_cleaned(result)
    data = plog.read(plog.log_start_offset, 1 << 30).data
    return [(o, None if b.header.is_control else k, b.header.is_control) for b in decode_batches(data)
            for o, k in zip(b.offsets, b.keys) if o < 5]


def test_an_aborted_transaction_is_removed_and_never_replaces_a_committed_value(log_dir):
    plog, index = txn_log(log_dir)
    aborted = index.aborted_between(0, plog.log_end_offset)
    assert aborted == [AbortedTxn(1, 2, 7)]
    left = clean_with_transactions(plog, horizon_ms=0, aborted=aborted)  # markers younger than the horizon stay
    assert left == [(0, b"x1", False), (2, None, True), (3, b"x2", False), (4, None, True)]
    append_overwrites(plog, 12)
    left = clean_with_transactions(plog, horizon_ms=501, aborted=aborted)  # past delete.retention.ms
    assert left == [(0, b"x1", False), (3, b"x2", False), (4, None, True)]  # the commit marker keeps its record
    plog.close()


def test_negative_control_a_cleaner_blind_to_aborts_loses_the_committed_value(log_dir):
    plog, _ = txn_log(log_dir)
    left = clean_with_transactions(plog, horizon_ms=0, aborted=())
    assert (0, b"x1", False) not in left and (1, b"x1", False) in left  # the aborted value won
    plog.close()


# A model of what a finished cleaning leaves of a log with transactions: random plain batches,
# transactional batches of three producers and their markers (the ones left open are aborted
# at the end, so the whole log is below the LSO).
txn_op_st = st.one_of(
    st.tuples(st.just("plain"), st.none(), record_st),
    st.tuples(st.just("txn"), st.sampled_from([7, 8, 9]), record_st),
    st.tuples(st.just("end"), st.sampled_from([7, 8, 9]), st.tuples(st.booleans(), st.integers(0, 2000))),
)


def write_txn_log(directory: Path, ops) -> tuple[PartitionLog, TransactionIndex, list[Rec], dict[int, tuple[int, int]], dict[int, int]]:
    """The log, its transaction index, its data records, each marker's (producer, timestamp) by
    offset, and the producer of each transactional record by offset."""
    plog = PartitionLog.open(directory, small_settings(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0), 0)
    index, records, markers, txn_of = TransactionIndex(), [], {}, {}
    open_txns: set[int] = set()

    def append(data: bytes, marker_commit: bool | None = None) -> int:
        validated = [(0, validate_marker(data))] if marker_commit is not None else None
        appended = plog.append(data, assign_offsets=True, leader_epoch=3, now_ms=0, validated=validated)
        for header in appended.headers:
            index.on_batch(header, marker_commit)
        return appended.first_offset

    def end(pid: int, commit: bool, ts: int) -> None:
        markers[append(encode_marker(ControlType.COMMIT if commit else ControlType.ABORT, pid, 0, 0, ts), commit)] = (pid, ts)
        open_txns.discard(pid)

    for kind, pid, args in ops:
        if kind == "end":
            end(pid, *args)
            continue
        key, value, ts = args
        txn = dict(producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True) if kind == "txn" else {}
        offset = append(encode_batch([value], [key], timestamps_ms=ts, **txn))
        records.append(Rec(offset, key, value, ts))
        if kind == "txn":
            txn_of[offset] = pid
            open_txns.add(pid)
    for pid in sorted(open_txns):
        end(pid, False, 2000)
    return plog, index, records, markers, txn_of


def txn_survivors(records, markers, txn_of, aborted, cleaned_up_to: int, horizon_ms: int) -> list[int]:
    """The model: below the cleaned offset, aborted records go and never supersede; the rest
    as without transactions; a marker stays while a record of its transaction stays, or while
    it is younger than the horizon."""
    live = [r for r in records if not (r.offset in txn_of and in_aborted(aborted, txn_of[r.offset], r.offset))]
    kept = {r.offset for r in survivors(live, cleaned_up_to, horizon_ms)}
    kept |= {r.offset for r in records if r.offset >= cleaned_up_to}
    previous: dict[int, int] = {}
    for offset in sorted(markers):
        pid, ts = markers[offset]
        has_records = any(previous.get(pid, -1) < o < offset and p == pid and o in kept for o, p in txn_of.items())
        previous[pid] = offset
        if offset >= cleaned_up_to or has_records or ts >= horizon_ms:
            kept.add(offset)
    return sorted(kept)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(txn_op_st, min_size=1, max_size=60), map_entries=st.integers(1, 6), horizon_ms=st.integers(0, 2001))
def test_passes_with_transactions_keep_exactly_the_model_survivors(tmp_path_factory, ops, map_entries, horizon_ms):
    """(With ``aborted=()`` instead of the index, this fails: the negative control.)"""
    plog, index, records, markers, txn_of = write_txn_log(tmp_path_factory.mktemp("log") / "t-0", ops)
    aborted = index.aborted_between(0, plog.log_end_offset)
    assert index.last_stable_offset(plog.log_end_offset) == plog.log_end_offset
    while (due := plog.cleaning_candidates(plog.log_end_offset, NOW)) is not None:
        result = CleaningPass(plog.directory, *due, map_entries=map_entries, tombstone_horizon_ms=horizon_ms, aborted=aborted).run()
        assert plog.install_cleaned(result) == len(result.cleaned)
    cleaned_up_to = read_cleaned_up_to(plog.directory)
    left = [o for b in decode_batches(plog.read(0, 1 << 30).data) for o in b.offsets]
    assert left == txn_survivors(records, markers, txn_of, aborted, cleaned_up_to, horizon_ms)
    plog.close()
