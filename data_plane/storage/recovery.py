"""Recovery after an unclean shutdown: rescan what may not have reached the disk whole.

Segments from the one holding the recovery point (everything below it was fsynced) to the
end are read batch by batch with full validation (length, magic, CRC, offsets continuing
the previous batch). When a batch fails, what follows it decides:

- intact batches follow (``find_resync``: a batch with a matching CRC and higher offsets
  later in the same file): the failed bytes are *damage in the middle*. They stay in the
  file as a ``DamagedRange`` (out of service, to be repaired from a replica, or lost for
  good when there is none) and every batch after them is kept, so no offset is reused;
- nothing intact follows: a *torn tail* (a write cut short by the crash). The file is cut
  there and every later segment is deleted, as in Kafka's log recovery.

Indexes and the leader-epoch cache are rebuilt from the batches that survive.
"""

from __future__ import annotations

from typing import Callable, Iterator

import structlog

from data_plane.record_batch import HEADER_SIZE, BatchHeader, CorruptBatchError, read_header, validate_batch
from data_plane.storage.damage import DamagedRange, ReadAt, find_resync
from data_plane.storage.segment import LogSegment

RECOVERY_CHUNK_BYTES = 4 << 20

log = structlog.get_logger("storage.recovery")


def valid_batches(read: ReadAt, file_size: int, first_offset: int, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of the valid batches from file position ``start``, stopping at the first invalid one.

    Batches must be whole, pass ``validate_batch`` and go on from ``first_offset`` with
    increasing offsets (gaps are offsets the log cleaner removed, or a range the leader lost).
    """
    pos, want, expected = start, RECOVERY_CHUNK_BYTES, first_offset
    while pos < file_size:
        chunk = read(min(want, file_size - pos), pos)
        offset = 0
        while offset < len(chunk):
            try:
                header = validate_batch(chunk, offset)
            except CorruptBatchError:
                break
            if header.base_offset < expected:
                return
            yield pos + offset, header
            offset += header.batch_length
            expected = header.next_offset
        if offset == 0:
            needed = _length_of_batch_beyond(chunk)
            if needed is None or pos + needed > file_size:
                return
            want = needed
            continue
        pos, want = pos + offset, RECOVERY_CHUNK_BYTES


def _length_of_batch_beyond(chunk: bytes) -> int | None:
    """The length of the batch starting ``chunk`` when it is plausibly whole but longer than the chunk."""
    if len(chunk) < HEADER_SIZE:
        return None
    length = read_header(chunk).batch_length
    return length if length > len(chunk) else None


def recover_segment(segment: LogSegment, on_batch: Callable[[BatchHeader], None]) -> int:
    """Rebuild ``segment``'s indexes from a validating scan, keep damaged ranges followed by
    intact batches, and cut the torn tail; returns bytes cut."""
    file_size = segment.file_size()
    segment.reset()
    end, expected = 0, segment.base_offset
    while True:
        for pos, header in valid_batches(segment.pread, file_size, expected, end):
            on_batch(header)
            segment.account(pos, header)
            end, expected = pos + header.batch_length, header.next_offset
        resync = find_resync(segment.pread, end, file_size, expected) if end < file_size else None
        if resync is None:
            break
        damage = DamagedRange(segment.base_offset, end, resync[0], expected, resync[1].base_offset)
        log.error(
            "damaged batch in the middle of the log: kept out of service, the intact batches after it kept",
            segment=str(segment.log_path), position=end, first_offset=damage.first_offset, next_offset=damage.next_offset,
        )
        segment.account_damage(damage)
        end, expected = damage.end_position, damage.next_offset
    segment.cut_at(end)
    segment.rolling_base_ms = segment.first_batch_timestamp()
    return file_size - end


def first_segment_to_recover(bases: list[int], recovery_point: int) -> int:
    """Index of the first segment that may hold data at or above ``recovery_point`` (all below it were fsynced)."""
    return next((i for i, base in enumerate(bases[1:]) if base > recovery_point), len(bases) - 1) if bases else 0


def recover_segments(segments: list[LogSegment], first: int, on_batch: Callable[[BatchHeader], None]) -> list[LogSegment]:
    """Recover ``segments[first:]`` (the ones before are trusted); returns the segments to keep.

    After the first segment with a cut tail, or one whose first offset is below its
    predecessor's end (above it is a gap the log cleaner left), the later segments are deleted.
    """
    kept = segments[:first]
    for i in range(first, len(segments)):
        segment = segments[i]
        if kept and kept[-1].size_bytes and kept[-1].next_offset > segment.base_offset:
            _delete_from(segments[i:], f"segment {segment.base_offset} starts below offset {kept[-1].next_offset}")
            break
        cut = recover_segment(segment, on_batch)
        kept.append(segment)
        if cut:
            log.warning("cut torn or corrupt tail", segment=str(segment.log_path), bytes_cut=cut, next_offset=segment.next_offset)
            _delete_from(segments[i + 1 :], f"they follow the corrupt tail of {segment.log_path.name}")
            break
    return kept


def _delete_from(segments: list[LogSegment], reason: str) -> None:
    for segment in segments:
        log.warning("deleting segment during recovery", segment=str(segment.log_path), reason=reason)
        segment.delete()
