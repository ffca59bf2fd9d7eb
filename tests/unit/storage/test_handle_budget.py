"""The open-file budget: the LRU policy and the budget rules (pure), and the handle cache
carrying them out on real logs."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from data_plane.storage import PartitionLog, file_handles
from data_plane.storage.file_handles import HANDLES, FileHandleCache
from data_plane.storage.handle_budget import BUDGET_MIN, RESERVE_MAX, RESERVE_MIN, LruPolicy, handle_budget, replica_capacity
from server_common.open_files import open_descriptor_count
from tests.unit.storage.conftest import batch, fill, offsets, small_settings


def test_the_least_recently_used_goes_first() -> None:
    policy: LruPolicy[str] = LruPolicy(2)
    assert policy.admit("a") == [] and policy.admit("b") == []
    policy.use("a")
    assert policy.admit("c") == ["b"]  # a was used after b
    assert "a" in policy and "c" in policy and "b" not in policy
    assert policy.admit("d") == ["a"]


def test_admitting_an_open_key_moves_it_and_closes_nothing() -> None:
    policy: LruPolicy[str] = LruPolicy(2)
    policy.admit("a"), policy.admit("b")
    assert policy.admit("a") == [] and len(policy) == 2
    assert policy.admit("c") == ["b"]


def test_a_forgotten_key_frees_its_slot() -> None:
    policy: LruPolicy[str] = LruPolicy(2)
    policy.admit("a"), policy.admit("b")
    policy.forget("a")
    policy.forget("never-opened")
    assert policy.admit("c") == [] and len(policy) == 2


def test_resizing_below_what_is_open_closes_the_oldest() -> None:
    policy: LruPolicy[str] = LruPolicy(4)
    for key in "abcd":
        policy.admit(key)
    assert policy.resize(2) == ["a", "b"] and policy.capacity == 2
    assert policy.resize(0) == ["c"] and policy.capacity == 1  # at least one: the key being opened
    assert policy.resize(10) == [] and len(policy) == 1


@pytest.mark.parametrize(
    ("limit", "budget"),
    [(64, BUDGET_MIN), (512, 512 - RESERVE_MIN), (20_000, 20_000 - RESERVE_MAX), (1 << 20, (1 << 20) - RESERVE_MAX)],
)
def test_the_budget_leaves_a_reserve_for_sockets(limit: int, budget: int) -> None:
    assert handle_budget(limit) == budget
    assert replica_capacity(handle_budget(limit)) > handle_budget(limit)  # more replicas than open files


def test_many_logs_share_a_small_budget_and_read_back_everything(tmp_path: Path) -> None:
    """40 logs of several segments each under a budget of 5 open files: every append and read
    works (reopening what the cache closed), and the process never holds more than 5 of them."""
    saved = HANDLES.capacity
    before = open_descriptor_count()
    HANDLES.configure(5)
    try:
        logs = [PartitionLog.open(tmp_path / f"t-{i}", small_settings(), now_ms=0) for i in range(40)]
        for round_ in range(3):
            for plog in logs:
                fill(plog, 4, ts=round_ * 10)
                assert HANDLES.open_count <= 5 and open_descriptor_count() <= before + 5
        for plog in logs:
            assert len(plog.segments) > 1
            assert offsets(plog.read(0, 1 << 20).data) == list(range(36))
        for plog in logs[:3]:
            plog.close()
        reopened = PartitionLog.open(tmp_path / "t-0", small_settings(), now_ms=0, clean_shutdown=True)
        assert reopened.log_end_offset == 36
        reopened.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=0)
        assert open_descriptor_count() <= before + 5
    finally:
        HANDLES.configure(saved)


def test_a_closed_segment_is_not_silently_reopened(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", small_settings(), now_ms=0)
    segment = plog.active
    plog.close()
    with pytest.raises(OSError, match="already closed"):
        segment.read(0, 1)


def test_out_of_descriptors_below_the_budget_shrinks_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE before the budget is reached (sockets took the reserve): the cache gives back a
    quarter of its handles and the open succeeds."""
    cache = FileHandleCache(8)
    monkeypatch.setattr(file_handles, "HANDLES", cache)
    monkeypatch.setattr("data_plane.storage.segment.HANDLES", cache)
    logs = [PartitionLog.open(tmp_path / f"t-{i}", small_settings(), now_ms=0) for i in range(8)]
    for plog in logs:
        fill(plog, 1)
    real_open, calls = os.open, []

    def emfile_once(path, flags, mode=0o777):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode)

    monkeypatch.setattr(file_handles.os, "open", emfile_once)
    fill(PartitionLog.open(tmp_path / "t-new", small_settings(), now_ms=0), 1)  # its first record opens its first file
    assert cache.capacity == 6 and cache.open_count == 6
    assert all(offsets(plog.read(0, 1 << 20).data) == [0, 1, 2] for plog in logs)  # the closed ones reopen
    assert cache.open_count == 6


def test_a_use_the_policy_does_not_know_is_taken_in_and_shed_later() -> None:
    policy: LruPolicy[str] = LruPolicy(2)
    policy.admit("a")
    policy.use("stranger")
    assert "stranger" in policy and policy.admit("b") == ["a"]
