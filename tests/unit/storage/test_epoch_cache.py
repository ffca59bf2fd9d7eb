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
    assert path.read_text() == "0\n2\n0 0\n3 17\n"
    assert LeaderEpochCache.load(path).entries == [(0, 0), (3, 17)]
    assert not list(tmp_path.glob("*.tmp"))
    path.write_text("0\n3\n0 0\n")
    with pytest.raises(CorruptEpochCheckpointError, match="says 3 entries"):
        LeaderEpochCache.load(path)
