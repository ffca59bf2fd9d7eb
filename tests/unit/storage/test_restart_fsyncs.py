"""Restarting a broker costs no fsync per unchanged log: neither when its logs load (the
leader-epoch truncation done at load is written without fsync, KAFKA-15046) nor when they
close again (a log unchanged since its last flush or a clean load is not flushed). What a
clean-shutdown marker vouches for stays durable: any write since the last flush makes the
next close flush, and a flush makes an epoch checkpoint written without fsync durable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from data_plane.storage import LogManager, PartitionLog
from data_plane.storage.epoch_cache import LeaderEpochCache
from data_plane.storage.log_manager import CLEAN_SHUTDOWN
from tests.unit.storage.conftest import fill, small_settings

EPOCHS = "leader-epoch-checkpoint"


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real_fdatasync(fd))[1])
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    return calls


def led_then_stopped(log_dir: Path, records: bool) -> None:
    """A log whose leader started epoch 2 at its log end and stopped before writing in it."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    if records:
        fill(plog, 3, epoch=1)
    plog.leader_epoch_cache.assign(2, plog.log_end_offset)
    plog.close()


@pytest.mark.parametrize("records", [False, True], ids=["empty", "with-records"])
def test_a_clean_load_drops_the_unwritten_epoch_without_fsync(log_dir: Path, fsyncs: list[int], records: bool) -> None:
    led_then_stopped(log_dir, records)
    fsyncs.clear()
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=1 << 30)
    assert plog.leader_epoch_cache.latest_epoch == (1 if records else -1)
    if records:
        assert "2 " not in (log_dir / EPOCHS).read_text(), "the truncation is written, only not fsynced"
    else:
        assert not (log_dir / EPOCHS).exists(), "an epoch with no record is never written: it waits for a flush"
    assert fsyncs == []
    plog.close()
    assert fsyncs == [], "nothing changed since the clean load: close needs no fsync"


def test_a_lost_load_time_truncation_is_redone_by_the_next_load(log_dir: Path) -> None:
    led_then_stopped(log_dir, records=True)
    before = (log_dir / EPOCHS).read_text()
    PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=1 << 30).close()
    (log_dir / EPOCHS).write_text(before)  # the unfsynced write lost in a crash
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=False, recovery_point=0)
    assert again.leader_epoch_cache.entries == [(1, 0)]


def test_a_write_after_a_clean_load_is_flushed_at_close_with_the_pending_epoch_checkpoint(log_dir: Path, fsyncs: list[int]) -> None:
    led_then_stopped(log_dir, records=True)
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=1 << 30)
    fsyncs.clear()
    fill(plog, 1, epoch=1)  # same epoch: the epoch cache writes nothing, its checkpoint stays unfsynced
    plog.close()
    assert fsyncs, "a log written since its last flush is flushed at close"
    assert not plog.leader_epoch_cache._unflushed, "the flush made the epoch checkpoint durable"


def test_an_epoch_cache_flush_fsyncs_only_a_write_left_unflushed(tmp_path: Path, fsyncs: list[int]) -> None:
    cache = LeaderEpochCache(tmp_path / EPOCHS)
    cache.assign(1, 0)  # assignments write nothing: the flush writes them, durably
    cache.assign(2, 5)
    assert not (tmp_path / EPOCHS).exists() and fsyncs == []
    cache.flush()
    assert len(fsyncs) == 2  # the file and its directory
    fsyncs.clear()
    cache.flush()
    assert fsyncs == []
    cache.truncate_from_end(5, durable=False)
    assert fsyncs == []
    cache.truncate_from_end(5, durable=False)  # nothing changes: nothing written
    cache.flush()
    assert len(fsyncs) == 2  # the file and its directory
    fsyncs.clear()
    cache.flush()
    assert fsyncs == []


def test_a_restart_of_unchanged_logs_fsyncs_only_the_manager_files(tmp_path: Path, fsyncs: list[int]) -> None:
    """Loading and closing 20 unchanged logs costs the same fsyncs as loading and closing one."""

    def restart_fsyncs(count: int) -> int:
        data_dir = tmp_path / f"d{count}"
        manager = LogManager(data_dir, now_ms=0)
        for p in range(count):
            plog = manager.get_or_create("t", p, small_settings())
            fill(plog, 2, epoch=1)
            plog.leader_epoch_cache.assign(2, plog.log_end_offset)
        manager.close()
        fsyncs.clear()
        LogManager(data_dir, now_ms=0).close()
        assert (data_dir / CLEAN_SHUTDOWN).exists()
        return len(fsyncs)

    assert restart_fsyncs(20) == restart_fsyncs(1)
