"""Index lookup, retention selection and recovery-start arithmetic, without files."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from data_plane.storage.index_file import IndexFileCorrupt, below_slot, floor_slot
from data_plane.storage.offset_index import OffsetIndex
from data_plane.storage.recovery import first_segment_to_recover
from data_plane.storage.retention import segments_to_delete
from data_plane.storage.time_index import TimeIndex


@pytest.mark.parametrize("target, slot", [(-1, -1), (0, 0), (5, 0), (10, 1), (29, 2), (30, 3), (99, 3)])
def test_floor_slot(target: int, slot: int) -> None:
    assert floor_slot(array("i", [0, 10, 20, 30]), target) == slot


@pytest.mark.parametrize("target, slot", [(0, -1), (1, 0), (10, 0), (11, 1)])
def test_below_slot(target: int, slot: int) -> None:
    assert below_slot(array("q", [0, 10]), target) == slot


def test_offset_index_lookup_falls_back_to_the_file_start(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index")
    assert index.position_at_or_before(50) == 0
    index.append(10, 4000)
    index.append(20, 8000)
    assert [index.position_at_or_before(o) for o in (9, 10, 19, 20, 1000)] == [0, 4000, 4000, 8000, 8000]
    assert [index.count_before_position(p) for p in (0, 4000, 4001, 8001)] == [0, 0, 1, 2]


def test_time_index_points_before_the_wanted_timestamp(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex")
    index.maybe_append(100, 5)
    index.maybe_append(100, 6)  # not larger: ignored
    index.maybe_append(200, 9)
    assert len(index) == 2
    assert [index.offset_before(t) for t in (50, 100, 101, 200, 201)] == [0, 0, 5, 5, 9]
    assert [index.count_before_offset(o) for o in (5, 6, 10)] == [0, 1, 2]


def test_index_file_round_trips_and_rejects_garbage(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex")
    index.append(1 << 40, 3)
    index.append(1 << 41, 7)
    index.persist(fsync=True)
    loaded = TimeIndex.load(index.path)
    assert list(loaded.keys) == [1 << 40, 1 << 41] and list(loaded.values) == [3, 7]
    loaded.truncate(1)
    assert TimeIndex.load(index.path).values.tolist() == [3]
    index.path.write_bytes(b"\x00" * 13)
    with pytest.raises(IndexFileCorrupt, match="whole number"):
        TimeIndex.load(index.path)


NOW = 1_000_000


@pytest.mark.parametrize(
    "segments, retention_ms, retention_bytes, expected",
    [
        ([(100, NOW - 5000), (100, NOW - 4000), (100, NOW - 10)], 3000, -1, 2),
        ([(100, NOW - 5000), (100, NOW - 1000), (100, NOW - 9000)], 3000, -1, 1),  # stops at the first young one
        ([(100, NOW - 5000), (100, NOW - 4000)], 3000, -1, 1),  # never the active segment
        ([(100, NOW - 5000)], 0, 0, 0),
        ([(100, NOW), (100, NOW), (100, NOW)], -1, 200, 1),
        ([(100, NOW), (100, NOW), (100, NOW)], -1, 199, 1),  # deleting two would leave less than 199
        ([(100, NOW), (100, NOW), (100, NOW)], -1, 100, 2),
        ([(100, NOW), (100, NOW), (100, NOW)], -1, 1000, 0),
        ([(100, NOW - 5000), (100, NOW), (100, NOW)], 3000, 0, 2),  # size wins
        ([(100, NOW), (100, NOW)], -1, -1, 0),
    ],
)
def test_retention_selection(segments, retention_ms, retention_bytes, expected) -> None:
    assert segments_to_delete(segments, NOW, retention_ms, retention_bytes) == expected


@pytest.mark.parametrize(
    "bases, recovery_point, first",
    [([], 0, 0), ([0], 50, 0), ([0, 100, 200], 0, 0), ([0, 100, 200], 99, 0), ([0, 100, 200], 100, 1), ([0, 100, 200], 150, 1), ([0, 100, 200], 999, 2)],
)
def test_first_segment_to_recover(bases, recovery_point, first) -> None:
    assert first_segment_to_recover(bases, recovery_point) == first
