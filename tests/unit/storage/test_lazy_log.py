"""A new log is a directory and nothing else until its first record: no segment file, no
descriptor of the open-file budget, no index file, no epoch checkpoint (a broker creates
50,000 replicas at once, most of which may wait long for a record). Everything a broker
does to a log must work on one that has no file yet, and a restart must bring it back as
it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_plane.storage import PartitionLog
from data_plane.storage.file_handles import HANDLES
from tests.unit.storage.conftest import batch, fill, offsets, small_settings
from tests.unit.storage.test_recovery import crash


def files(log_dir: Path) -> list[str]:
    return sorted(path.name for path in log_dir.iterdir())


def test_a_new_log_is_an_empty_directory_holding_no_descriptor(tmp_path: Path) -> None:
    before = HANDLES.open_count
    logs = [PartitionLog.open(tmp_path / f"t-{i}", small_settings(), now_ms=0) for i in range(50)]
    assert HANDLES.open_count == before
    assert all(files(plog.directory) == [] for plog in logs)
    assert all((plog.log_start_offset, plog.log_end_offset) == (0, 0) for plog in logs)
    for plog in logs:
        plog.leader_epoch_cache.assign(3, 0)  # led: the epoch waits for the first flush
        plog.close()
    assert all(files(plog.directory) == [] for plog in logs)


def test_the_first_append_creates_the_segment_file_and_the_next_round_fsyncs_the_directory(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    plan = plog.sync_plan()  # the new directory's entry: a round fsyncs it, and no file
    assert plan is not None and plan.paths == () and plan.directory == log_dir
    plog.note_synced(plan)
    assert plog.sync_plan() is None
    plog.append(batch(3), assign_offsets=True, leader_epoch=2, now_ms=0)
    assert files(log_dir) == ["00000000000000000000.log"]
    again = plog.sync_plan()
    assert again is not None and again.directory == log_dir, "the file's creation is a directory entry to make durable"
    assert again.paths == (plog.active.log_path,)
    plog.flush()
    assert files(log_dir) == ["00000000000000000000.index", "00000000000000000000.log",
                              "00000000000000000000.timeindex", "leader-epoch-checkpoint"]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crashed"])
def test_a_never_written_replica_restarts_as_it_was(log_dir: Path, clean: bool) -> None:
    """Led in epoch 3, never written: after a restart (clean or not) the log starts and ends at
    0, holds no epoch (one with no record is dropped at every load, as before) and no file, and
    takes its first record as a new log does."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    plog.leader_epoch_cache.assign(3, 0)
    plog.close() if clean else crash(plog)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=clean, recovery_point=0)
    assert (again.log_start_offset, again.log_end_offset, again.leader_epoch_cache.entries) == (0, 0, [])
    assert files(log_dir) == [] and not again.active.has_file
    again.leader_epoch_cache.assign(4, 0)
    again.append(batch(2), assign_offsets=True, leader_epoch=4, now_ms=0)
    again.close()
    third = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True)
    assert offsets(third.read(0, 1 << 20).data) == [0, 1] and third.leader_epoch_cache.entries == [(4, 0)]


def test_retention_scrub_compaction_flush_and_deletion_leave_a_fileless_log_fileless(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(cleanup_policy="compact,delete", retention_ms=1, retention_bytes=1), now_ms=0)
    assert plog.apply_retention(now_ms=1 << 40) == 0
    assert plog.scrub(1 << 20) == 0 and plog.scrub_laps == 1
    assert plog.cleaning_candidates(last_stable_offset=0, now_ms=1 << 40) is None
    plog.maybe_flush(now_ms=1 << 40)
    plog.flush()
    plog.truncate_to(0)
    assert plog.read(0, 1 << 20).data == b"" and plog.offset_for_timestamp(0) is None and plog.checksum(10) == 0
    assert files(log_dir) == [] and not plog.is_offline
    plog.delete()
    assert not log_dir.exists()


def test_a_fileless_log_restarted_far_ahead_keeps_its_start_across_a_crash(log_dir: Path) -> None:
    """A follower far behind its leader's log start restarts its log there: that segment gets
    its file at once, so that a crash keeps the new start (a fileless one would load at 0)."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    plog.truncate_fully_and_start_at(500)
    crash(plog)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, recovery_point=0)
    assert (again.log_start_offset, again.log_end_offset) == (500, 500)


def test_retention_does_not_weigh_a_log_of_one_segment(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The retention pass visits every replica: one whose only segment is the active one (which
    retention never deletes) is passed over before its segments are weighed; a log with a closed
    segment is weighed (the negative control)."""
    weighed = []
    monkeypatch.setattr("data_plane.storage.partition_log.segments_to_delete", lambda segments, *rules: weighed.append(segments) or 0)
    plog = PartitionLog.open(log_dir, small_settings(retention_ms=1), now_ms=0)
    fill(plog, 1)
    assert len(plog.segments) == 1 and plog.apply_retention(now_ms=1 << 40) == 0 and weighed == []
    fill(plog, 20)  # past segment.bytes: rolled
    assert len(plog.segments) > 1 and plog.apply_retention(now_ms=1 << 40) == 0 and len(weighed) == 1
