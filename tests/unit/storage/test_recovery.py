"""Recovery after a crash: torn and corrupt tails are cut, indexes and epochs rebuilt, and a
clean shutdown skips the scan. Damage in the middle of a log: tests/unit/storage/test_damage.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from data_plane.storage import LogManager, PartitionLog, recovery
from data_plane.storage.log_manager import CLEAN_SHUTDOWN, RECOVERY_POINTS, parse_partition_dir
from data_plane.storage.offset_index import OffsetIndex
from data_plane.storage.time_index import TimeIndex
from tests.unit.storage.conftest import batch, fill, offsets, small_settings


def crash(plog: PartitionLog) -> None:
    """The process 'dies': fds released, nothing flushed or persisted, no clean marker."""
    for segment in plog.segments:
        segment.release()


def crashed_log(log_dir: Path, batches: int = 30) -> tuple[PartitionLog, bytes, tuple[int, int] | None]:
    """A crashed log with ``batches`` batches; returns it, its bytes and its answer for timestamp 1020."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, batches, epoch=1)
    data, found = plog.read(0, 1 << 20).data, plog.offset_for_timestamp(1020)
    crash(plog)
    return plog, data, found


def last_segment(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[-1]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:-7], id="torn-body"),
        pytest.param(lambda b: b[: len(b) - len(batch()) + 30], id="torn-header"),
        pytest.param(lambda b: b[:-1] + bytes([b[-1] ^ 0x55]), id="flipped-byte"),
        pytest.param(lambda b: b + b"\x00" * 100, id="zero-fill"),
        pytest.param(lambda b: b + os.urandom(5000), id="garbage"),
    ],
)
def test_damaged_tail_is_cut_and_the_log_continues(log_dir: Path, damage) -> None:
    _, data, _ = crashed_log(log_dir)
    path = last_segment(log_dir)
    original = path.read_bytes()
    path.write_bytes(damage(original))
    intact_records = 90 - (3 if len(damage(original)) <= len(original) else 0)

    again = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert again.log_end_offset == intact_records
    assert data.startswith(again.read(0, 1 << 20).data)
    assert offsets(again.read(0, 1 << 20).data) == list(range(intact_records))
    again.append(batch(2), assign_offsets=True, leader_epoch=2, now_ms=0)
    assert offsets(again.read(0, 1 << 20).data) == list(range(intact_records + 2))
    assert again.leader_epoch_cache.entries == [(1, 0), (2, intact_records)]


def test_recovery_rebuilds_indexes_and_the_epoch_cache(log_dir: Path) -> None:
    _, data, found = crashed_log(log_dir)
    for path in log_dir.glob("*index"):
        path.write_bytes(b"\x01" * 2400)  # longer than the real index: no stale entries may survive
    (log_dir / "leader-epoch-checkpoint").unlink(missing_ok=True)  # (a log never flushed has none yet)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert again.read(0, 1 << 20).data == data
    assert again.offset_for_timestamp(1020) == found
    assert again.leader_epoch_cache.entries == [(1, 0)]
    assert offsets(again.read(61, 1).data) == [60, 61, 62]
    again.close()
    for segment in again.segments:
        assert OffsetIndex.load(segment.offset_index.path).keys == segment.offset_index.keys
        assert TimeIndex.load(segment.time_index.path).keys == segment.time_index.keys


def test_clean_load_rebuilds_bad_indexes_without_a_full_recovery(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 30)
    plog.close()
    for path in log_dir.glob("*.index"):
        path.write_bytes(b"\x01" * 16)  # whole entries, but pointing nowhere sensible
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=90)
    assert offsets(again.read(45, 1).data) == [45, 46, 47]


def test_recovery_point_limits_the_scan(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog, _, _ = crashed_log(log_dir)
    scanned: list[int] = []
    real = recovery.recover_segment
    monkeypatch.setattr(recovery, "recover_segment", lambda seg, observe: scanned.append(seg.base_offset) or real(seg, observe))
    base_of_third = plog.segments[2].base_offset
    PartitionLog.open(log_dir, small_settings(), now_ms=0, recovery_point=base_of_third + 1)
    assert scanned == [s.base_offset for s in plog.segments[2:]]


def test_log_manager_clean_shutdown_skips_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(tmp_path, now_ms=0)
    fill(manager.get_or_create("orders-eu", 3, small_settings()), 30)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN).exists() and (tmp_path / RECOVERY_POINTS).exists()

    scanned: list[int] = []
    real = recovery.recover_segment
    monkeypatch.setattr(recovery, "recover_segment", lambda seg, observe: scanned.append(seg.base_offset) or real(seg, observe))
    reopened = LogManager(tmp_path, now_ms=0)
    assert scanned == [] and not (tmp_path / CLEAN_SHUTDOWN).exists()
    plog = reopened.get("orders-eu", 3)
    assert plog is not None and plog.log_end_offset == 90
    fill(plog, 1)
    crash(plog)
    LogManager(tmp_path, now_ms=0)
    assert scanned == [plog.segments[-1].base_offset]  # only above the checkpointed recovery point


def test_log_manager_checkpoints_high_watermarks_and_deletes(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, now_ms=0)
    manager.get_or_create("a-b", 0, small_settings())
    manager.get_or_create("a-b", 1, small_settings())
    manager.checkpoint_high_watermarks({("a-b", 0): 17, ("a-b", 1): 0})
    assert manager.read_high_watermarks() == {("a-b", 0): 17, ("a-b", 1): 0}
    assert manager.partitions() == [("a-b", 0), ("a-b", 1)]
    manager.delete("a-b", 1)
    assert manager.partitions() == [("a-b", 0)] and not (tmp_path / "a-b-1").exists()
    manager.close()
    assert LogManager(tmp_path, now_ms=0).partitions() == [("a-b", 0)]


@pytest.mark.parametrize("name, parsed", [("orders-0", ("orders", 0)), ("a-b-12", ("a-b", 12)), ("x", None), ("-3", None), ("t-x", None)])
def test_partition_dir_names(name: str, parsed) -> None:
    assert parse_partition_dir(name) == parsed


def test_a_new_log_whose_first_epoch_checkpoint_was_torn_rebuilds_it(log_dir: Path) -> None:
    """A new log's first epoch checkpoint is written without fsync: a crash may leave it
    torn even below an fsynced log, and even a clean load must then rebuild the cache from
    the batches rather than trust it."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert list(log_dir.iterdir()) == []  # a new log: no file until its first record
    fill(plog, 30, epoch=1)
    plog.close()
    assert plog.leader_epoch_cache.entries == [(1, 0)]
    (log_dir / "leader-epoch-checkpoint").write_text("0\n1\n")
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=90)
    assert again.leader_epoch_cache.entries == [(1, 0)]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_closing_a_log_never_written_needs_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that created thousands of replicas and stops before any data arrives closes
    them without fsyncs (losing an empty new log loses nothing); a log that was written to,
    even if truncated back to empty since, is flushed as before."""
    fsyncs: list[int] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (fsyncs.append(fd), real_fdatasync(fd))[1])
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    PartitionLog.open(tmp_path / "new-0", small_settings(), now_ms=0).close()
    assert fsyncs == []
    written = PartitionLog.open(tmp_path / "written-0", small_settings(), now_ms=0)
    fill(written, 1)
    written.truncate_to(0)
    assert written.log_end_offset == 0
    written.close()
    assert fsyncs
    fsyncs.clear()
    PartitionLog.open(tmp_path / "written-0", small_settings(), now_ms=0).close()  # loaded from disk: flushed as before
    assert fsyncs


def test_a_recovery_point_moved_past_rolled_segments_carries_their_epochs(log_dir: Path) -> None:
    """Epoch assignments are written by the log's flush; the periodic flush of rolled segments
    moves the recovery point past records too, so it must write them first: after a crash,
    recovery only rescans above the recovery point and trusts the checkpoint below."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2, epoch=1)
    plog.flush()  # the checkpoint on disk: epoch 1 only
    fill(plog, 30, epoch=2)  # rolls several segments
    plog.maybe_flush(now_ms=0)
    assert plog.recovery_point == plog.active.base_offset > 6
    entries = plog.leader_epoch_cache.entries
    crash(plog)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, recovery_point=plog.recovery_point)
    assert again.leader_epoch_cache.entries == entries == [(1, 0), (2, 6)]
