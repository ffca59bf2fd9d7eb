"""Damaged batches in the middle of a log: recovery keeps what follows them, reads and the
scrub find them, readers get every intact record before them, a replica's copy repairs
them, and a range marked lost is skipped and never reused."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from data_plane.record_batch import HEADER_SIZE, CorruptBatchError, iter_batches
from data_plane.storage import DamagedRangeError, PartitionLog
from data_plane.storage.damage import DAMAGE_FILE, find_resync
from tests.unit.storage.conftest import batch, fill, offsets, small_settings
from tests.unit.storage.test_recovery import crashed_log


def flip(path: Path, position: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= 0xFF
    path.write_bytes(raw)


def second_segment(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[1]


@pytest.mark.parametrize("position", [100, 12 + 4, 8], ids=["body", "magic", "length"])
def test_recovery_keeps_the_intact_batches_after_a_damaged_one(log_dir: Path, position: int) -> None:
    _, data, _ = crashed_log(log_dir)
    victim = second_segment(log_dir)  # offsets 18.. ; the first batch (18-20) gets the flipped byte
    flip(victim, position)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert again.log_end_offset == 90, "nothing after the damaged batch is cut"
    [damage] = again.damaged_ranges()
    assert (damage.first_offset, damage.next_offset, damage.lost) == (18, 21, False)
    assert offsets(again.read(0, 1 << 20).data) == list(range(18)), "every intact record before the damage"
    with pytest.raises(DamagedRangeError, match="18-20"):
        again.read(18, 1 << 20)
    assert offsets(again.read(21, 1 << 20).data) == list(range(21, 90))


def test_a_damaged_batch_at_the_end_is_a_torn_tail(log_dir: Path) -> None:
    crashed_log(log_dir)
    victim = sorted(log_dir.glob("*.log"))[-1]
    flip(victim, victim.stat().st_size - 5)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert again.log_end_offset == 87 and again.damaged_ranges() == []


def test_lost_range_is_skipped_never_reused_and_remembered(log_dir: Path) -> None:
    crashed_log(log_dir)
    flip(second_segment(log_dir), 100)
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    plog.mark_lost(plog.damaged_ranges()[0])
    assert offsets(plog.read(0, 1 << 20).data) == [o for o in range(90) if not 18 <= o <= 20]
    assert offsets(plog.read(19, 1 << 20).data)[:1] == [21]
    plog.append(batch(2), assign_offsets=True, leader_epoch=2, now_ms=0)
    assert plog.log_end_offset == 92
    plog.close()
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=92)
    assert [(r.first_offset, r.next_offset, r.lost) for r in again.damaged_ranges()] == [(18, 21, True)]
    assert offsets(again.read(0, 1 << 20).data) == [o for o in range(92) if not 18 <= o <= 20]


def test_read_and_scrub_find_damage_on_a_clean_log_and_a_copy_repairs_it(log_dir: Path, tmp_path: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 30, epoch=1)
    data = plog.read(0, 1 << 20).data
    plog.close()
    flip(second_segment(log_dir), 100)
    flip(sorted(log_dir.glob("*.log"))[3], 100)
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=90)
    assert again.damaged_ranges() == [], "a clean load trusts the files"
    assert offsets(again.read(0, 1 << 20).data) == list(range(18)), "the read stops before the damage it finds"
    verified = sum(again.scrub(300) for _ in range(20))
    assert verified > 0
    assert [(r.first_offset, r.next_offset) for r in again.damaged_ranges()] == [(18, 21), (54, 57)]
    assert (log_dir / DAMAGE_FILE).exists()

    first = again.damaged_ranges()[0]
    with pytest.raises(CorruptBatchError, match="not the one this log holds"):
        again.repair(first, copy_at(data, 21))  # the copy of another offset
    for damage in again.damaged_ranges():
        again.repair(damage, copy_at(data, damage.first_offset))
    assert again.read(0, 1 << 20).data == data
    assert not (log_dir / DAMAGE_FILE).exists()


def test_resync_search_skips_garbage_to_the_next_intact_batch(tmp_path: Path) -> None:
    good = batch(3)
    path = tmp_path / "seg"
    path.write_bytes(good + os.urandom(HEADER_SIZE + 50) + _at_offset(good, 9))
    fd = os.open(path, os.O_RDONLY)
    read = functools.partial(os.pread, fd)
    try:
        position, header = find_resync(read, len(good), path.stat().st_size, 3)
        assert (position, header.base_offset) == (len(good) + HEADER_SIZE + 50, 9)
        assert find_resync(read, len(good), len(good) + HEADER_SIZE + 50, 3) is None
    finally:
        os.close(fd)


def copy_at(data: bytes, offset: int) -> bytes:
    """The batches of ``data`` from the one starting at ``offset``."""
    return next(data[pos:] for pos, header in iter_batches(data) if header.base_offset == offset)


def _at_offset(data: bytes, base_offset: int) -> bytes:
    raw = bytearray(data)
    raw[:8] = base_offset.to_bytes(8, "little")
    return bytes(raw)


def test_truncation_forgets_the_damage_it_removes_across_a_restart(log_dir: Path) -> None:
    crashed_log(log_dir)
    flip(second_segment(log_dir), 100)
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert plog.damaged_ranges()
    plog.truncate_to(10)
    fill(plog, 10, epoch=2)  # new bytes where the damaged range was recorded
    assert plog.damaged_ranges() == [] and not (log_dir / DAMAGE_FILE).exists()
    data = plog.read(0, 1 << 20).data
    plog.close()
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=plog.log_end_offset)
    assert again.read(0, 1 << 20).data == data


@pytest.mark.parametrize("position", [16, 11, 8], ids=["magic", "length-high", "length-low"])
def test_a_damaged_header_on_a_clean_log_is_found_by_reads_and_repaired(log_dir: Path, position: int) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 30, epoch=1)
    data = plog.read(0, 1 << 20).data
    plog.close()
    flip(second_segment(log_dir), position)  # the header of batch 18-20
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=90)
    assert offsets(again.read(0, 1 << 20).data) == list(range(18))
    assert offsets(again.read(25, 1 << 20).data) == list(range(24, 90)), "reads after the damage are served"
    assert [(r.first_offset, r.next_offset) for r in again.damaged_ranges()] == [(18, 21)]
    again.repair(again.damaged_ranges()[0], copy_at(data, 18))
    assert again.read(0, 1 << 20).data == data and not again.is_offline
