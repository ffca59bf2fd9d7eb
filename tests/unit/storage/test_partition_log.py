"""PartitionLog: append, read, roll, timestamps, truncation, retention, flush policy."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from data_plane.record_batch import decode_batch, encode_batch, iter_batches, read_header, stamp_batch
from data_plane.storage import (
    CorruptBatchError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from tests.unit.storage.conftest import batch, fill, offsets, small_settings


def test_leader_append_assigns_offsets_and_stamps_the_epoch(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    first = plog.append(batch(3), assign_offsets=True, leader_epoch=2, now_ms=0)
    second = plog.append(batch(2) + batch(4), assign_offsets=True, leader_epoch=5, now_ms=0)
    assert (first.first_offset, first.last_offset, first.record_count, first.log_append_time_ms) == (0, 2, 3, -1)
    assert (second.first_offset, second.last_offset, second.record_count) == (3, 8, 6)
    assert plog.log_end_offset == 9
    assert plog.leader_epoch_cache.entries == [(2, 0), (5, 3)]
    data = plog.read(0, 1 << 20).data
    assert [(h.base_offset, h.leader_epoch) for _, h in iter_batches(data)] == [(0, 2), (3, 5), (5, 5)]


def test_a_bad_batch_anywhere_means_nothing_is_written(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(max_message_bytes=200), now_ms=0)
    fill(plog, 2)
    size, end = plog.size_bytes, plog.log_end_offset
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC"):
        plog.append(batch(1) + bytes(corrupt), assign_offsets=True, leader_epoch=0, now_ms=0)
    with pytest.raises(RecordTooLargeError, match="max.message.bytes=200"):
        plog.append(batch(1) + encode_batch([b"x" * 300]), assign_offsets=True, leader_epoch=0, now_ms=0)
    with pytest.raises(CorruptBatchError, match="no record batch"):
        plog.append(b"", assign_offsets=True, leader_epoch=0, now_ms=0)
    assert (plog.size_bytes, plog.log_end_offset) == (size, end)


def test_follower_append_keeps_offsets_and_epochs_and_must_continue_the_log(log_dir: Path, tmp_path: Path) -> None:
    leader = PartitionLog.open(tmp_path / "leader-0", small_settings(), now_ms=0)
    fill(leader, 3, epoch=1)
    fill(leader, 3, epoch=4)
    follower = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    data = leader.read(0, 1 << 20).data
    follower.append(data, assign_offsets=False, leader_epoch=-1, now_ms=0)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == [(1, 0), (4, 9)]
    assert follower.read(0, 1 << 20).data == data
    assert follower.checksum(18) == leader.checksum(18) != 0
    with pytest.raises(UnexpectedAppendOffsetError, match="continues at 18"):
        follower.append(data, assign_offsets=False, leader_epoch=-1, now_ms=0)


def test_log_append_time_stamps_the_broker_clock(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(message_timestamp_type="LogAppendTime"), now_ms=0)
    result = plog.append(batch(3, ts=5), assign_offsets=True, leader_epoch=0, now_ms=777)
    assert (result.log_append_time_ms, result.max_timestamp) == (777, 777)
    decoded = decode_batch(plog.read(0, 1 << 20).data)  # validates the recomputed CRC
    assert decoded.timestamps == [777] * 3


def test_read_returns_whole_batches_within_limits(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 40)  # 120 records, several segments
    assert len(plog.segments) > 2
    one_batch = len(batch(3, tag="b0-"))
    middle = plog.read(31, 1)  # below one batch: still one whole batch
    assert (middle.first_offset, middle.next_offset, offsets(middle.data)) == (30, 33, [30, 31, 32])
    assert len(plog.read(0, 3 * one_batch + 10).data) == 3 * one_batch
    everything = plog.read(0, 1 << 20)
    assert offsets(everything.data) == list(range(120)) and everything.next_offset == 120
    capped = plog.read(10, 1 << 20, max_offset=20)
    assert (capped.first_offset, capped.next_offset) == (9, 21)  # batch 18-20 starts below the HW
    assert plog.read(120, 100).data == b"" and plog.read(120, 100).next_offset == 120
    assert plog.read(21, 100, max_offset=21).data == b""
    with pytest.raises(OffsetOutOfRangeError, match=r"outside orders-0's range \[0, 120\]"):
        plog.read(121, 100)


def test_read_hands_back_exactly_the_stamped_bytes(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    raw = batch(5)
    plog.append(raw, assign_offsets=True, leader_epoch=3, now_ms=0)
    expected = bytearray(raw)
    stamp_batch(expected, 0, 0, 3)
    assert plog.read(0, 1 << 20).data == bytes(expected)


def test_roll_by_size_in_the_middle_of_one_append(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(segment_bytes=1024), now_ms=0)
    batches = b"".join(batch(3, tag=f"x{i}-") for i in range(30))
    plog.append(batches, assign_offsets=True, leader_epoch=0, now_ms=0)
    assert all(s.size_bytes <= 1024 for s in plog.segments)
    assert [s.base_offset for s in plog.segments] == [s.base_offset for s in plog.segments if s.base_offset % 3 == 0]
    assert offsets(plog.read(0, 1 << 20).data) == list(range(90))


def test_roll_by_time(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(segment_ms=1000), now_ms=0)
    plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=10_000)
    plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=10_999)
    assert len(plog.segments) == 1
    plog.append(batch(), assign_offsets=True, leader_epoch=0, now_ms=11_000)
    assert [s.base_offset for s in plog.segments] == [0, 6]


def test_offset_for_timestamp_finds_the_first_record_at_or_after(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    for i in range(30):
        ts = [1000 + 10 * i, 1000 + 10 * i + 5, 1000 + 10 * i + 2]  # out of order inside a batch
        plog.append(encode_batch([b"v" * 40] * 3, timestamps_ms=ts), assign_offsets=True, leader_epoch=0, now_ms=0)
    assert len(plog.segments) > 1
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1003) == (1, 1005)
    assert plog.offset_for_timestamp(1151) == (46, 1155)
    assert plog.offset_for_timestamp(1295) == (88, 1295)
    assert plog.offset_for_timestamp(1296) is None


def test_truncate_inside_a_batch_drops_the_whole_batch(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 20, epoch=1)
    fill(plog, 20, epoch=3)
    plog.truncate_to(65)  # batch 63..65
    assert plog.log_end_offset == 63
    assert plog.leader_epoch_cache.entries == [(1, 0), (3, 60)]
    plog.truncate_to(40)
    assert plog.log_end_offset == 39 and plog.leader_epoch_cache.entries == [(1, 0)]
    assert all(s.base_offset < 39 for s in plog.segments)
    plog.append(batch(2), assign_offsets=True, leader_epoch=4, now_ms=0)
    assert offsets(plog.read(0, 1 << 20).data) == list(range(41))
    assert max(s.max_timestamp for s in plog.segments) == 1012  # recomputed after the cut
    assert plog.offset_for_timestamp(1012) == (36, 1012) and plog.offset_for_timestamp(1013) is None


def test_truncate_to_start_and_below(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 10)
    plog.truncate_to(0)
    assert (plog.log_start_offset, plog.log_end_offset, plog.size_bytes) == (0, 0, 0)
    fill(plog, 2)
    plog.truncate_fully_and_start_at(500)
    assert (plog.log_start_offset, plog.log_end_offset, plog.leader_epoch_cache.entries) == (500, 500, [])
    fill(plog, 1, epoch=7)
    assert offsets(plog.read(500, 1 << 20).data) == [500, 501, 502]


def test_truncating_at_the_log_end_drops_an_epoch_that_holds_no_record(log_dir: Path) -> None:
    """A broker that became leader in epoch 3 and wrote nothing before losing leadership
    keeps (3, 20) at its log end; a new leader without epoch 3 answers "diverging at epoch 1,
    ending at 20". Truncating to 20 cuts no record but must drop epoch 3 (and persist that),
    or the follower names epoch 3 again on every fetch and never gets another record."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 20, epoch=1)
    plog.leader_epoch_cache.assign(3, plog.log_end_offset)
    plog.truncate_to(plog.log_end_offset)
    assert plog.leader_epoch_cache.entries == [(1, 0)]
    plog.truncate_to(plog.log_end_offset + 5)
    assert (plog.log_end_offset, plog.leader_epoch_cache.entries) == (60, [(1, 0)])
    plog.close()
    assert PartitionLog.open(log_dir, small_settings(), now_ms=0).leader_epoch_cache.entries == [(1, 0)]


def test_retention_by_time_and_size(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(retention_ms=1000), now_ms=0)
    fill(plog, 40, ts=0)
    fill(plog, 1, ts=10_000)
    segments = len(plog.segments)
    assert plog.apply_retention(now_ms=1000) == 0
    assert plog.apply_retention(now_ms=1040) == segments - 1  # every full segment; never the active one
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    fill(plog, 40, ts=20_000)
    plog.update_settings(small_settings(retention_bytes=5000))
    plog.apply_retention(now_ms=20_000)
    assert 5000 <= plog.size_bytes < 5000 + plog.segments[0].size_bytes  # as small as it gets without going under
    assert plog.leader_epoch_cache.entries == [(0, plog.log_start_offset)]


def test_flush_policies_move_the_recovery_point(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(flush_messages=6), now_ms=0)
    fill(plog, 1)
    assert plog.recovery_point == 0
    fill(plog, 1)
    assert plog.recovery_point == 6
    plog.update_settings(small_settings(flush_ms=100))
    fill(plog, 1, now_ms=1000)
    plog.maybe_flush(1099)
    assert plog.recovery_point == 6
    plog.maybe_flush(1100)
    assert plog.recovery_point == 9
    plog.update_settings(small_settings())
    fill(plog, 40)
    plog.maybe_flush(5000)  # only the rolled segments
    assert plog.recovery_point == plog.active.base_offset > 9


def test_clean_reopen_keeps_everything(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 30, epoch=2)
    before = (plog.read(0, 1 << 20).data, plog.leader_epoch_cache.entries, plog.offset_for_timestamp(1017))
    plog.close()
    again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=True, recovery_point=90)
    assert (again.read(0, 1 << 20).data, again.leader_epoch_cache.entries, again.offset_for_timestamp(1017)) == before
    assert (again.log_end_offset, again.recovery_point) == (90, 90)
    assert [s.max_timestamp for s in again.segments] == [s.max_timestamp for s in plog.segments]
    fill(again, 1, epoch=3)
    assert read_header(again.read(90, 100).data).leader_epoch == 3


def test_timestamp_lookup_survives_a_batch_whose_body_does_not_decode(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 2, ts=100)
    garbage = bytearray(encode_batch([b"abc"], timestamps_ms=500))
    garbage[-4:] = b"\xff\xff\xff\x7f"  # header count and value bytes now disagree with the body; CRC redone
    struct.pack_into("<I", garbage, 17, zlib.crc32(garbage[21:]))
    stamp_batch(garbage, 0, 6, 0)  # a leader refuses such a body; one stored before that check was added
    plog.append(bytes(garbage), assign_offsets=False, leader_epoch=-1, now_ms=0)
    assert plog.offset_for_timestamp(300) == (6, 500)
    assert not plog.is_offline


def test_advancing_the_log_start_deletes_whole_segments_below_it_and_survives_a_restart(log_dir: Path) -> None:
    """DeleteRecords can put the log start inside a segment (and inside a batch): reads below
    it are out of range from then on, and reopening the log (clean or not) keeps it, although
    the first segment still begins below it."""
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 30, epoch=2)
    segments = len(plog.segments)
    target = plog.segments[2].base_offset + 1  # inside the third segment's first batch
    plog.advance_log_start(target)
    assert plog.log_start_offset == target and plog.segments[0].base_offset == target - 1
    assert len(plog.segments) == segments - 2
    assert plog.leader_epoch_cache.entries == [(2, target)]
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(target - 1, 100)
    assert offsets(plog.read(target, 100).data)[0] == target - 1  # whole batches: the client skips what is below
    plog.close()
    for clean in (True, False):
        again = PartitionLog.open(log_dir, small_settings(), now_ms=0, clean_shutdown=clean, recovery_point=plog.log_end_offset)
        assert (again.log_start_offset, again.log_end_offset) == (target, 90)
        again.close()


def test_retention_and_truncation_keep_a_log_start_set_inside_a_segment(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(retention_ms=1000), now_ms=0)
    fill(plog, 30, ts=0)
    fill(plog, 1, ts=10_000)
    target = plog.active.base_offset + 2  # inside the active segment, which retention keeps
    plog.advance_log_start(target)
    assert plog.apply_retention(now_ms=1040) == 0  # the segments below were already deleted with the records
    assert plog.log_start_offset == target
    plog.truncate_fully_and_start_at(500)  # a follower starting over at the leader's log start
    plog.close()
    assert PartitionLog.open(log_dir, small_settings(), now_ms=0).log_start_offset == 500


def test_the_tail_a_caught_up_reader_asks_for_is_the_bytes_the_file_holds(log_dir: Path) -> None:
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    fill(plog, 3, epoch=2)
    tail = plog.read(6, 1 << 20)  # exactly the last append: served without reading the file
    assert offsets(tail.data) == [6, 7, 8] and (tail.first_offset, tail.next_offset) == (6, 9)
    plog.close()
    reopened = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    assert reopened.read(6, 1 << 20).data == tail.data


def test_a_truncated_tail_is_never_served_again_even_where_new_records_end_at_the_same_offset(log_dir: Path, tmp_path: Path) -> None:
    leader = PartitionLog.open(tmp_path / "other-0", small_settings(), now_ms=0)
    leader.append(batch(3, tag="theirs-"), assign_offsets=True, leader_epoch=5, now_ms=0)
    theirs = leader.read(0, 1 << 20).data
    plog = PartitionLog.open(log_dir, small_settings(), now_ms=0)
    plog.append(batch(3, tag="ours-"), assign_offsets=True, leader_epoch=4, now_ms=0)
    assert plog.read(0, 1 << 20).data != theirs
    plog.truncate_to(0)  # it became a follower and its records diverged
    plog.append(theirs, assign_offsets=False, leader_epoch=-1, now_ms=0)
    assert plog.log_end_offset == 3 and plog.read(0, 1 << 20).data == theirs
