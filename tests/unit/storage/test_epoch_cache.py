"""The leader-epoch cache, including the KIP-101 / KIP-279 cases Kafka's own tests cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_plane.storage.epoch_cache import CorruptEpochCheckpointError, LeaderEpochCache


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(None, list(entries))


def test_empty_cache_knows_nothing() -> None:
    c = cache()
    assert c.latest_epoch == -1


def test_assign_ignores_a_repeat_of_the_latest_epoch() -> None:
    c = cache((0, 0), (2, 10))
    c.assign(2, 15)
    assert c.entries == [(0, 0), (2, 10)]


def test_assign_same_epoch_at_lower_offset_replaces_it() -> None:
    c = cache((0, 0), (2, 10))
    c.assign(2, 5)
    assert c.entries == [(0, 0), (2, 5)]


def test_assign_drops_entries_the_new_one_contradicts() -> None:
    c = cache((0, 0), (2, 10), (3, 20))
    c.assign(4, 15)  # epochs starting at or after offset 15 cannot survive
    assert c.entries == [(0, 0), (2, 10), (4, 15)]
    c.assign(1, 30)  # an older epoch at a higher offset removes every newer epoch
    assert c.entries == [(0, 0), (1, 30)]


def test_truncate_from_end_drops_epochs_starting_at_or_after_it() -> None:
    c = cache((1, 10), (2, 20), (4, 30))
    c.truncate_from_end(20)
    assert c.entries == [(1, 10)]


def test_truncate_from_start_moves_the_covering_epoch_up() -> None:
    c = cache((1, 10), (2, 20), (4, 30))
    c.truncate_from_start(25)
    assert c.entries == [(2, 25), (4, 30)]
    c.truncate_from_start(5)
    assert c.entries == [(2, 25), (4, 30)]


def test_checkpoint_file_round_trip_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    c = LeaderEpochCache(path)
    c.assign(0, 0)
    c.assign(3, 17)
    assert not path.exists()  # assignments wait for the log's next flush
    c.flush()
    assert path.read_text() == "0\n2\n0 0\n3 17\n"
    assert LeaderEpochCache.load(path).entries == [(0, 0), (3, 17)]
    assert not list(tmp_path.glob("*.tmp"))
    path.write_text("0\n3\n0 0\n")
    with pytest.raises(CorruptEpochCheckpointError, match="says 3 entries"):
        LeaderEpochCache.load(path)


def test_assignments_wait_for_the_flush_and_only_the_first_file_skips_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An assignment (a new leader's epoch, a follower's first batch of an epoch) writes
    nothing: the log's next flush does, durably, before the recovery point passes a record
    of that epoch (until then recovery finds the epoch again in the batches). Losing or
    tearing the first checkpoint file is harmless (the log rebuilds a missing or unreadable
    one from its batches); every later write replaces a checkpoint a reader trusts, so it
    must be durable."""
    import os

    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    path = tmp_path / "leader-epoch-checkpoint"
    c = LeaderEpochCache(path)
    c.assign(0, 0)
    c.assign(1, 5)
    assert not path.exists() and fsyncs == []
    c.truncate_from_end(5)  # the first file: no fsync
    assert path.read_text() == "0\n1\n0 0\n" and fsyncs == []
    c.assign(1, 5)
    assert path.read_text() == "0\n1\n0 0\n"
    c.flush()
    assert LeaderEpochCache.load(path).entries == [(0, 0), (1, 5)]
    assert len(fsyncs) == 2  # the temp file and the directory
    again = LeaderEpochCache.load(path)
    again.truncate_from_end(5)
    assert again.entries == [(0, 0)] and len(fsyncs) == 4  # a checkpoint found on disk: durable from the first write


@pytest.mark.parametrize("torn", ["", "0\n", "0\n1\n", "0\n1\n3"])
def test_a_torn_first_checkpoint_is_unreadable_never_wrong(tmp_path: Path, torn: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(torn)
    with pytest.raises(CorruptEpochCheckpointError):
        LeaderEpochCache.load(path)
