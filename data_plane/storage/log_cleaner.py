"""The log cleaner's file work: rewrite closed segments of a compacted log, swap them in crash-safely.

One cleaning pass over a log (decisions in ``compaction.py``):

1. ``PartitionLog.cleaning_candidates`` (on the broker's loop): the closed segments' paths,
   sizes and offsets, and the plan.
2. ``CleaningPass.run`` (in a worker thread, holding nothing the loop uses): open each segment
   file with its own descriptor, fill the bounded offset map from the dirty segments, then
   rewrite every segment from the first up to the map's end into ``<base>.cleaned``:
   batches whose records all survive are copied byte for byte, others are re-encoded as one
   batch per run of consecutive kept offsets (same offsets, leader epoch, timestamps,
   compression, producer id/epoch and transactional bit; the base sequence moves with the
   run's first record). Aborted transactions' records go, and markers whose transaction has
   no record left once they are ``delete.retention.ms`` old (``TransactionCleaning``).
   Each file is fsynced.
3. ``PartitionLog.install_cleaned`` (on the loop): for each cleaned file, oldest first, if the
   segment is still there unchanged, drop its index files and rename the ``.cleaned`` file
   over its ``.log`` (one segment becomes one file, so the rename is the whole swap: Kafka's
   extra ``.swap`` stage exists for merging several segments into one); fsync the directory,
   reopen the segment; then checkpoint the offset cleaned up to.

A crash leaves each segment either old or cleaned, never half of either; ``.cleaned`` files
(possibly half written) are deleted when the log is opened and never read. Segments are
installed oldest first, so an older value of a key is always gone before the tombstone
that deleted it, and a crash between two installs leaves a state a finished pass would
also have gone through.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import structlog

from data_plane.record_batch import LOG_APPEND_TIME, BatchHeader, DecodedBatch, decode_batch, encode_batch, set_log_append_time, stamp_batch
from data_plane.replication.producer_state import SEQUENCE_MAX
from data_plane.storage.checkpoint_file import read_offset, write_offset
from data_plane.replication.transaction_index import AbortedTxn
from data_plane.storage.compaction import CleaningPlan, OffsetMap, SegmentInfo, TransactionCleaning, keep_record, kept_runs
from data_plane.storage.segment import file_stem, scan_headers
from server_common.fsync import fsync_dir

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"

log = structlog.get_logger("storage.cleaner")


@dataclass(frozen=True)
class SegmentFile:
    """A closed segment as the cleaning thread reads it: a path and the bytes it held when planned."""

    info: SegmentInfo
    path: Path


@dataclass(frozen=True)
class CleanedSegment:
    """A rewritten segment waiting to be installed in place of the one that was ``old_size`` bytes."""

    base_offset: int
    old_size: int
    new_size: int
    path: Path


@dataclass(frozen=True)
class PassResult:
    cleaned: list[CleanedSegment]
    cleaned_up_to: int  # every offset below it is now clean (checkpoint once installed)
    bytes_read: int
    records_kept: int
    records_removed: int


class CleaningPass:
    """The thread part of one pass: bounded memory (``map_entries`` keys) and I/O (``throttle``)."""

    def __init__(
        self,
        directory: Path,
        segments: list[SegmentFile],
        plan: CleaningPlan,
        *,
        map_entries: int,
        tombstone_horizon_ms: int,
        aborted: Sequence[AbortedTxn],
        throttle: Callable[[int], None] = lambda _bytes: None,
    ) -> None:
        """``aborted``: the partition's aborted transactions (at least those with records in
        the segments); the plan ends at or below the LSO, so every other transaction there
        is committed."""
        self.directory = directory
        self.segments = segments
        self.plan = plan
        self.map = OffsetMap(map_entries)
        self.horizon_ms = tombstone_horizon_ms
        self.txns = TransactionCleaning(aborted, tombstone_horizon_ms)
        self.throttle = throttle
        self.bytes_read = self.kept = self.removed = 0

    def run(self) -> PassResult:
        """Map and rewrite; on any failure the ``.cleaned`` files written so far are removed."""
        cleaned: list[CleanedSegment] = []
        try:
            mapped_end = self._build_map()
            for segment in self.segments[:mapped_end]:
                cleaned.append(self._rewrite(segment))
        except BaseException:
            discard(cleaned)
            cleaned_path(self.directory, self.segments[len(cleaned)].info.base_offset).unlink(missing_ok=True)
            raise
        return PassResult(cleaned, self.segments[mapped_end - 1].info.end_offset, self.bytes_read, self.kept, self.removed)

    def _batches(self, segment: SegmentFile) -> Iterator[tuple[bytes, BatchHeader]]:
        """(raw bytes, header) of each batch of ``segment`` as planned, through our own descriptor."""
        fd = os.open(segment.path, os.O_RDONLY)
        try:
            for pos, header in scan_headers(functools.partial(os.pread, fd), 0, segment.info.size_bytes):
                data = os.pread(fd, header.batch_length, pos)
                self.bytes_read += len(data)
                self.throttle(len(data))
                yield data, header
        finally:
            os.close(fd)

    def _build_map(self) -> int:
        """Fill the map from the dirty segments, whole segments at a time; returns the index of
        the first segment not mapped (the first dirty one always is, whatever its key count)."""
        for i in self.plan.dirty_indexes:
            keys: list[bytes | None] = []
            offsets: list[int] = []
            for data, header in self._batches(self.segments[i]):
                if not header.is_control and not self.txns.is_aborted(header.producer_id, header.base_offset, header.is_transactional):
                    batch = decode_batch(data)
                    keys.extend(batch.keys)
                    offsets.extend(batch.offsets)
            if i > self.plan.first_dirty and not self.map.fits(self.map.new_keys(keys)):
                return i
            self.map.put_all(keys, offsets)
        return self.plan.end

    def _rewrite(self, segment: SegmentFile) -> CleanedSegment:
        path = cleaned_path(self.directory, segment.info.base_offset)
        with open(path, "wb") as out:
            for data, header in self._batches(segment):
                for piece in self._kept_pieces(data, header):
                    out.write(piece)
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        return CleanedSegment(segment.info.base_offset, segment.info.size_bytes, size, path)

    def _kept_pieces(self, data: bytes, header: BatchHeader) -> list[bytes]:
        if header.is_control:
            kept_marker = self.txns.keep_marker(header.producer_id, header.max_timestamp)
            self.kept += kept_marker
            self.removed += not kept_marker
            return [data] if kept_marker else []
        batch = decode_batch(data)
        keys, values, offsets, timestamps = batch.keys, batch.values, batch.offsets, batch.timestamps
        if self.txns.is_aborted(header.producer_id, header.base_offset, header.is_transactional):
            keep = [False] * len(keys)
        else:
            keep = [keep_record(k, v, o, t, self.map.latest, self.horizon_ms) for k, v, o, t in zip(keys, values, offsets, timestamps)]
        self.txns.on_data(header.producer_id, header.is_transactional, any(keep))
        kept = sum(keep)
        self.kept += kept
        self.removed += len(keep) - kept
        if kept == len(keep):
            return [data]
        return [_reencode(batch, start, stop) for start, stop in kept_runs(keep)]


def _reencode(batch: DecodedBatch, start: int, stop: int) -> bytes:
    """Records [start, stop) of ``batch`` as one batch with their original offsets and epoch."""
    header = batch.header
    sequence = -1 if header.base_sequence < 0 else (header.base_sequence + start) % (SEQUENCE_MAX + 1)
    buf = bytearray(
        encode_batch(
            batch.values[start:stop],
            batch.keys[start:stop],
            batch.headers[start:stop],
            batch.timestamps[start:stop],
            compression=header.compression,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=sequence,
            transactional=header.is_transactional,
        )
    )
    stamp_batch(buf, 0, header.base_offset + start, header.leader_epoch)
    if header.timestamp_type == LOG_APPEND_TIME:
        set_log_append_time(buf, 0, header.max_timestamp)
    return bytes(buf)


class Throttle:
    """Sleep the cleaning thread so it reads at most ``bytes_per_second`` (its I/O bound)."""

    def __init__(self, bytes_per_second: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = bytes_per_second
        self.clock = clock
        self.started = clock()
        self.done = 0

    def __call__(self, nbytes: int) -> None:
        self.done += nbytes
        ahead = self.done / self.rate - (self.clock() - self.started)
        if ahead > 0:
            time.sleep(ahead)  # rate limiting of a worker thread, not synchronization


def read_cleaned_up_to(directory: Path) -> int:
    """The cleaner checkpoint: offsets below it were cleaned (0 when never, or unreadable)."""
    try:
        return read_offset(directory / CLEANER_CHECKPOINT)
    except ValueError as exc:
        log.warning("cleaner checkpoint unreadable: cleaning from the log start", partition=directory.name, reason=str(exc))
        return 0


def write_cleaned_up_to(directory: Path, offset: int) -> None:
    write_offset(directory / CLEANER_CHECKPOINT, offset)


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{file_stem(base_offset)}{CLEANED_SUFFIX}"


def discard(cleaned: list[CleanedSegment]) -> None:
    """Remove cleaned files that will not be installed."""
    for segment in cleaned:
        segment.path.unlink(missing_ok=True)


def install_cleaned_file(cleaned: Path, log_path: Path) -> None:
    """Put a complete, fsynced cleaned segment in place: its old indexes go first (rebuilt from
    the new file on open), then the rename replaces the ``.log`` atomically."""
    for suffix in (".index", ".timeindex"):
        log_path.with_suffix(suffix).unlink(missing_ok=True)
    os.replace(cleaned, log_path)
    fsync_dir(log_path.parent)
