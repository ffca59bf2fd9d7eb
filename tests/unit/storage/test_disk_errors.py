"""A failing disk takes the partition offline, never the process, and never loses or invents data."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from data_plane.storage import LogManager, PartitionLog, StorageError, checkpoint_file, segment
from data_plane.storage.log_manager import CLEAN_SHUTDOWN
from tests.unit.storage.conftest import batch, fill, offsets, small_settings


def bytes_on_disk(plog: PartitionLog) -> bytes:
    """The log's batches straight from its segment files (``read`` refuses once offline)."""
    return b"".join(s.read(0, s.size_bytes) for s in plog.segments)


def failing(code: int, after_bytes: int = 0):
    """An ``os.write`` that writes ``after_bytes`` of the data, then raises OSError(code)."""
    real_write = os.write

    def write(fd: int, data) -> int:
        if after_bytes and len(data) > after_bytes:
            real_write(fd, bytes(data[:after_bytes]))
        raise OSError(code, os.strerror(code))

    return write


@pytest.mark.parametrize("partial", [0, 50], ids=["nothing-written", "partial-write"])
def test_enospc_on_append_takes_the_partition_offline(log_dir: Path, monkeypatch: pytest.MonkeyPatch, partial: int) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 5)
    before = plog.read(0, 1 << 20).data
    monkeypatch.setattr(segment.os, "write", failing(errno.ENOSPC, partial))
    with pytest.raises(StorageError, match="No space left.*free space on that disk.*by itself once a write there succeeds") as info:
        plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert info.value.errno == errno.ENOSPC and info.value.path
    monkeypatch.undo()

    assert plog.is_offline and plog.log_end_offset == 15 and plog.size_bytes == len(before)
    assert os.path.getsize(plog.active.log_path) == plog.active.size_bytes  # partial bytes cut back
    for call in (lambda: plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0), lambda: plog.read(0, 100), plog.flush):
        with pytest.raises(StorageError, match="offline after an earlier error"):
            call()
    plog.close()
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert again.read(0, 1 << 20).data == before


def test_eio_on_fsync_and_on_roll(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2)

    def eio(*_args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment.os, "fdatasync", eio)
    with pytest.raises(StorageError, match="flush failed.*EIO.*check the disk"):
        plog.flush()
    assert plog.is_offline

    other = PartitionLog.open(log_dir.parent / "other-0", small_settings(), now_ms=0)
    fill(other, 1)
    monkeypatch.setattr(segment.os, "open", lambda *a, **k: eio())
    with pytest.raises(StorageError, match="append failed"):
        fill(other, 20)  # needs a roll, which cannot create the new segment
    monkeypatch.undo()
    assert other.is_offline
    assert len(other.segments) == 1 and offsets(bytes_on_disk(other))[-1] == other.log_end_offset - 1


def test_offline_partition_means_no_clean_shutdown_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(tmp_path, now_ms=0)
    healthy = manager.get_or_create("ok", 0, small_settings())
    broken = manager.get_or_create("bad", 0, small_settings())
    fill(healthy, 2)
    monkeypatch.setattr(segment.os, "write", failing(errno.EIO))
    with pytest.raises(StorageError):
        fill(broken, 1)
    monkeypatch.undo()
    assert list(manager.offline_partitions()) == [("bad", 0)]
    manager.close()
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()
    reopened = LogManager(tmp_path, now_ms=0)
    assert reopened.get("ok", 0).log_end_offset == 6 and reopened.get("bad", 0).log_end_offset == 0


@pytest.fixture
def tiny_tmpfs(tmp_path: Path):
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a real full-disk test needs root and mount(8) to create a 1 MiB tmpfs")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"mounting a 1 MiB tmpfs is not permitted here: {result.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_real_full_disk(tiny_tmpfs: Path) -> None:
    plog = PartitionLog.open(tiny_tmpfs / "fill-0", small_settings(segment_bytes=1 << 20), now_ms=0)
    payload = batch(100, tag="x" * 50)
    appended = 0
    with pytest.raises(StorageError, match="No space left") as info:
        while True:
            plog.append(payload, assign_offsets=True, leader_epoch=0, now_ms=0)
            appended += 1
    assert info.value.errno == errno.ENOSPC and appended > 0
    assert plog.log_end_offset == appended * 100
    before = bytes_on_disk(plog)
    plog.close()
    again = PartitionLog.open(tiny_tmpfs / "fill-0", small_settings(segment_bytes=1 << 20), now_ms=0)
    assert again.log_end_offset == appended * 100
    assert again.read(0, 1 << 30).data == before


def test_clean_shutdown_marker_carries_the_broker_epoch_and_a_crash_has_none(tmp_path: Path) -> None:
    """KIP-966: the epoch of the last clean stop is what the broker sends at registration
    (``previous_broker_epoch``); no marker, or one without an epoch, is -1 (unclean)."""
    first = LogManager(tmp_path, now_ms=0)
    assert first.previous_broker_epoch == -1, "a new data dir has no clean stop behind it"
    first.close(broker_epoch=42)
    assert (tmp_path / CLEAN_SHUTDOWN).read_text().strip() == "42"
    second = LogManager(tmp_path, now_ms=0)
    assert second.previous_broker_epoch == 42 and not (tmp_path / CLEAN_SHUTDOWN).exists()
    crashed = LogManager(tmp_path, now_ms=0)  # ``second`` never closed: a crash
    assert crashed.previous_broker_epoch == -1
    (tmp_path / CLEAN_SHUTDOWN).write_text("")  # a marker written before markers held epochs
    assert LogManager(tmp_path, now_ms=0).previous_broker_epoch == -1


def test_injected_eio_fails_appends_or_only_rolls_and_takes_the_partition_offline(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from data_plane.storage import fault_injection

    monkeypatch.setattr(fault_injection, "_trigger", None)  # enable() below is undone after the test

    plogs = {op: PartitionLog.open(log_dir.parent / f"t-{n}", small_settings(), now_ms=0) for n, op in enumerate(fault_injection.OPERATIONS)}
    trigger = log_dir.parent / fault_injection.TRIGGER_FILE
    fill(plogs["append"], 1)  # not enabled: the trigger file means nothing yet
    fault_injection.enable(log_dir.parent)
    trigger.write_text("roll\n")
    fill(plogs["roll"], 1)  # an append with no roll due goes through
    with pytest.raises(StorageError, match="injected I/O error during roll"):
        fill(plogs["roll"], 40)  # enough batches to roll a 1 KiB segment
    trigger.write_text("append\n")
    with pytest.raises(StorageError, match="injected I/O error during append"):
        fill(plogs["append"], 1)
    assert all(plog.is_offline for plog in plogs.values())


def test_a_leader_epoch_checkpoint_that_cannot_be_written_takes_the_log_offline(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new leader assigns its epoch outside any log call and the log's next flush writes
    it; the write failing (no descriptor left for leader-epoch-checkpoint.tmp) must take the
    log offline, with advice about descriptors, not escape as a bare OSError."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2)
    real_open = checkpoint_file.os.open

    def no_descriptor(path, *args):
        if str(path).endswith(".tmp"):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return real_open(path, *args)

    monkeypatch.setattr(checkpoint_file.os, "open", no_descriptor)
    plog.leader_epoch_cache.assign(3, plog.log_end_offset)
    with pytest.raises(StorageError, match="leader-epoch-checkpoint.tmp.*ran out of file descriptors.*open-file limit"):
        plog.flush()
    assert plog.is_offline and plog.offline_error.errno == errno.EMFILE


def test_a_log_that_went_offline_is_reopened_once_its_directory_takes_writes_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LogManager.reopen``: refused while a probe write fails (the cause lasts), then the
    log is loaded again as after a crash, with what was written before the failure."""
    from data_plane.storage import fault_injection

    logs = LogManager(tmp_path, now_ms=0)
    plog = logs.get_or_create("t", 0, small_settings())
    fill(plog, 5)
    before = bytes_on_disk(plog)
    monkeypatch.setattr(fault_injection, "_trigger", None)  # restored after the test
    fault_injection.enable(tmp_path)
    (tmp_path / fault_injection.TRIGGER_FILE).write_text("append\n")
    with pytest.raises(StorageError):
        plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert ("t", 0) in logs.offline_partitions()
    with pytest.raises(StorageError, match="probe write.*injected I/O error"):
        logs.reopen("t", 0, small_settings())
    assert logs.get("t", 0) is plog and ("t", 0) in logs.offline_partitions()

    (tmp_path / fault_injection.TRIGGER_FILE).unlink()
    reopened = logs.reopen("t", 0, small_settings())
    assert logs.get("t", 0) is reopened and not reopened.is_offline and ("t", 0) not in logs.offline_partitions()
    assert reopened.read(0, 1 << 20).data == before and reopened.log_end_offset == 15
    reopened.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert not (tmp_path / "t-0" / ".write-probe").exists()


def test_the_offline_set_follows_each_log_through_failure_reopen_and_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``offline_partitions`` is kept as logs fail, are reopened (and fail again: the reopened
    log reports too) and are deleted, not found by walking every log."""
    from data_plane.storage import fault_injection

    logs = LogManager(tmp_path, now_ms=0)
    healthy, failing = (logs.get_or_create("t", i, small_settings()) for i in range(2))
    monkeypatch.setattr(fault_injection, "_trigger", None)  # restored after the test
    fault_injection.enable(tmp_path)

    def fail_an_append(plog) -> None:
        (tmp_path / fault_injection.TRIGGER_FILE).write_text("append\n")
        with pytest.raises(StorageError):
            plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0)
        (tmp_path / fault_injection.TRIGGER_FILE).unlink()

    fail_an_append(failing)
    assert list(logs.offline_partitions()) == [("t", 1)] and logs.offline_partitions()[("t", 1)] is failing.offline_error
    reopened = logs.reopen("t", 1, small_settings())
    assert not logs.offline_partitions()
    fail_an_append(reopened)
    assert list(logs.offline_partitions()) == [("t", 1)]
    failing.went_offline(StorageError("the old log is no longer held", errno=None, path=None))  # a stale log says nothing
    assert logs.offline_partitions()[("t", 1)] is reopened.offline_error
    logs.delete("t", 1)
    assert not logs.offline_partitions() and healthy.offline_error is None
