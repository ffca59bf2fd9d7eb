"""A log's part in a group-commit round (``PartitionLog.sync_plan``/``note_synced``) and the
round's file work (``group_commit.sync_files``), on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from data_plane.broker import group_commit
from data_plane.storage import PartitionLog
from server_common.open_files import open_descriptor_count
from tests.unit.storage.conftest import fill, small_settings


def test_a_round_makes_the_log_durable_to_its_end_when_planned(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 20)  # several segments: 1 KiB each
    assert plog.durable_offset == 0 and len(plog.segments) > 1
    plan = plog.sync_plan()
    assert plan is not None and plan.directory == log_dir and plan.paths == tuple(s.log_path for s in plog.segments)
    fill(plog, 1)  # written after the plan: not covered
    assert group_commit.sync_files([plan], skip_fsync=False) == {}
    plog.note_synced(plan)
    assert plog.durable_offset == plan.offset < plog.log_end_offset
    again = plog.sync_plan()
    assert again is not None and again.directory is None and again.paths == (plog.active.log_path,)  # only the active segment now
    group_commit.sync_files([again], skip_fsync=False)
    plog.note_synced(again)
    assert plog.durable_offset == plog.log_end_offset and plog.sync_plan() is None


def test_a_truncation_during_the_round_voids_its_plan(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 4)
    plan = plog.sync_plan()
    plog.truncate_to(3)
    fill(plog, 2)  # new records where the planned ones were: the round never saw them
    group_commit.sync_files([plan], skip_fsync=False)
    plog.note_synced(plan)
    assert plog.durable_offset == 0


def test_skip_fsync_reports_success_without_fsyncing(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2)
    calls: list[int] = []
    monkeypatch.setattr(os, "fdatasync", calls.append)
    assert group_commit.sync_files([plog.sync_plan()], skip_fsync=True) == {}
    assert calls == []
    assert group_commit.sync_files([plog.sync_plan()], skip_fsync=False) == {}
    assert len(calls) == 1


def test_a_failed_fsync_is_the_plans_error(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2)

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    failed = group_commit.sync_files([plog.sync_plan()], skip_fsync=False)
    assert list(failed) == [0] and failed[0].errno == 5


def test_a_round_holds_no_descriptor_and_skips_a_segment_deleted_meanwhile(log_dir: Path) -> None:
    """Thousands of logs in one round must not take a descriptor each (the handle budget
    leaves only a reserve free): the plan names files, the round opens one at a time."""
    plog = PartitionLog.open(log_dir, small_settings(retention_bytes=1024), now_ms=0)
    fill(plog, 20)
    before = open_descriptor_count()
    plan = plog.sync_plan()
    assert open_descriptor_count() == before
    assert plog.apply_retention(now_ms=0) > 0 and not plan.paths[0].exists()  # deleted before the round ran
    assert group_commit.sync_files([plan], skip_fsync=False) == {}
    assert open_descriptor_count() <= before  # the deleted segments' descriptors closed; the round's too
