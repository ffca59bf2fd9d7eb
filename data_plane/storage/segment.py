"""One segment of a partition log: a ``.log`` file of whole batches plus its two sparse indexes.

Files are named by the segment's base offset (20 digits, so they sort): ``<base>.log``,
``<base>.index`` (relative offset -> position) and ``<base>.timeindex`` (timestamp ->
relative offset). Batches are written with ``os.write`` on a raw fd kept at the end of the
file and read with ``os.pread``; the segment never decodes records except to answer a
timestamp lookup. Index entries are added only after the bytes they point to are written,
so an index never points past the data.

Besides the files, a segment keeps its *tail state* in memory: size, next offset, largest
timestamp, bytes since the last index entry. Opening a segment recomputes it from the last
index entries plus a scan of the (at most ``index.interval.bytes``) tail of the file.

The ``.log`` descriptor comes from the process's handle cache (``file_handles.HANDLES``):
each use of ``fd`` marks the segment recently used, and the cache may close it while the
segment is idle, in which case the next use reopens it (at the file's end, where appends go).
So nothing keeps a descriptor across a call that could open another segment: scans read
through ``pread``, which asks for the descriptor at every read. The indexes live in memory
and their files are opened, written and closed at once; no file is memory-mapped.

A new log's first segment is created *without a file* (``create(..., lazy=True)``): its
``.log`` file is created by the first write that needs the descriptor (an append), and an
empty segment has nothing to flush, read or scan. A broker creating 50,000 replicas, most of
which may never see a record, then pays a directory each instead of a file, an open
descriptor in the budget and the unlinks of two index files.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Container, Iterator, Mapping

from data_plane.record_batch import HEADER_SIZE, MAGIC, BatchHeader, CorruptBatchError, decode_batch, read_header
from data_plane.storage.damage import DamagedRange, ReadAt
from data_plane.storage.file_handles import HANDLES
from data_plane.storage.index_file import IndexFileCorrupt
from data_plane.storage.offset_index import OffsetIndex
from data_plane.storage.settings import LogSettings
from data_plane.storage.time_index import TimeIndex

SCAN_CHUNK_BYTES = 64 << 10
INT32_MAX = (1 << 31) - 1


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


class UnparsableBatchError(CorruptBatchError):
    """A header in a segment file that cannot start a batch (wrong magic, a length shorter than
    a header or past the file's end, offsets going back): ``position`` is where, in the file."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def headers_in(buf: bytes, stop_at: Container[int] = (), base: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of batches laid end to end in ``buf`` whose header is complete (bodies
    may be cut off), stopping before any position in ``stop_at`` (file positions: ``base`` + position).
    Raises UnparsableBatchError at a header no batch could have."""
    pos, after = 0, -1
    while pos + HEADER_SIZE <= len(buf) and base + pos not in stop_at:
        header = read_header(buf, pos)
        if header.magic != MAGIC or header.batch_length < HEADER_SIZE or header.base_offset < after:
            raise UnparsableBatchError(
                f"batch header at position {base + pos} does not parse (magic {header.magic}, length "
                f"{header.batch_length}, base offset {header.base_offset})",
                base + pos,
            )
        yield pos, header
        pos, after = pos + header.batch_length, header.next_offset


def scan_headers(
    read: ReadAt, start: int, end: int, damaged: Mapping[int, DamagedRange] = {}
) -> Iterator[tuple[int, BatchHeader]]:
    """Headers of the batches in file bytes [start, end), read in chunks; no CRC (our own,
    recovered bytes). A damaged range yields its stand-in header and is jumped over."""
    pos = start
    while pos < end:
        hole = damaged.get(pos)
        if hole is not None:
            yield pos, hole.as_header()
            pos = hole.end_position
            continue
        if pos + HEADER_SIZE > end:
            break
        chunk = read(min(SCAN_CHUNK_BYTES, end - pos), pos)
        step = 0
        for offset, header in headers_in(chunk, damaged, pos):
            yield pos + offset, header
            step = offset + header.batch_length
        if step == 0:
            raise UnparsableBatchError(f"file ends inside the batch header at position {pos}", pos)
        pos += step


def write_all(fd: int, data: memoryview, start: int) -> None:
    """Write ``data`` at the fd's position ``start``; on failure cut the file back to ``start`` if possible."""
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
        raise


class LogSegment:
    """A segment's files and tail state; the partition log decides when to roll, flush or cut it."""

    def __init__(self, directory: Path, base_offset: int, settings: LogSettings) -> None:
        stem = directory / file_stem(base_offset)
        self.base_offset = base_offset
        self.log_path = stem.with_suffix(".log")
        self._fd = -1  # -1 while the handle cache has it closed
        self._released = False  # closed for good: a use is an error, not a reopen
        self.has_file = True  # False until a lazily created segment's first write creates its .log file
        self.settings = settings
        self.offset_index = OffsetIndex(stem.with_suffix(".index"))
        self.time_index = TimeIndex(stem.with_suffix(".timeindex"))
        self.size_bytes = 0
        self.rolling_base_ms: int | None = None  # when the first batch arrived: segment.ms counts from here
        self.damaged: dict[int, DamagedRange] = {}  # by position: ranges every scan jumps over
        self._reset_tail()

    # ---------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, directory: Path, base_offset: int, settings: LogSettings, *, lazy: bool = False) -> "LogSegment":
        """A new empty segment; fails if its log file already exists. A ``lazy`` one (only
        for a directory known to hold no file of this segment: a new log's, or one whose
        segments recovery all removed) creates nothing now: its first use of ``fd`` does."""
        segment = cls(directory, base_offset, settings)
        segment.has_file = False
        if not lazy:
            segment.pread(0, 0)  # the first use of the descriptor creates the file
            segment.offset_index.clear()
            segment.time_index.clear()
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, settings: LogSettings, *, trusted: bool, damaged: list[DamagedRange] = ()
    ) -> "LogSegment":
        """An existing segment. A ``trusted`` one (fsynced or cleanly closed) takes the damaged
        ranges recorded for it, loads its indexes (rebuilt if they fail their sanity check) and
        tail state; an untrusted one is left for recovery to rebuild."""
        segment = cls(directory, base_offset, settings)
        segment.size_bytes = os.lseek(segment.fd, 0, os.SEEK_END)
        if trusted:
            try:
                segment.damaged = {r.position: r for r in damaged if r.end_position <= segment.size_bytes}
                segment._load_state()
            except BaseException:
                segment.release()
                raise
        return segment

    @property
    def fd(self) -> int:
        """The ``.log`` descriptor, reopened if the handle cache closed it. The hot path (an
        open segment) is a dict move in the cache, no syscall."""
        fd = self._fd
        if fd >= 0:
            HANDLES.use(self)
            return fd
        if self._released:
            raise OSError(errno.EBADF, "segment file already closed", str(self.log_path))
        if not self.has_file:  # a lazily created segment's first use: create its file
            self._fd = HANDLES.open(self, self.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            self.has_file = True
            return self._fd
        fd = HANDLES.open(self, self.log_path, os.O_RDWR)
        try:
            os.lseek(fd, 0, os.SEEK_END)  # appends write at the descriptor's position: the file's end
        except BaseException:
            HANDLES.closed(self)
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def pread(self, length: int, position: int) -> bytes:
        """``length`` bytes at ``position`` (a ``ReadAt`` for the scans)."""
        return os.pread(self.fd, length, position)

    def close_handle(self) -> None:
        """The handle cache needs the descriptor back: close it; the next use reopens."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _load_state(self) -> None:
        try:
            self.offset_index = OffsetIndex.load(self.offset_index.path)
            self.time_index = TimeIndex.load(self.time_index.path)
            self._check_indexes()
        except IndexFileCorrupt:
            self.offset_index.clear()
            self.time_index.clear()
        self._reload_tail()

    def close(self) -> None:
        try:
            self.seal()
        finally:
            self.release()

    def release(self) -> None:
        """Close the file descriptor for good (once: a closed fd number may already belong to another file)."""
        self._released = True
        HANDLES.closed(self)
        self.close_handle()

    def delete(self) -> None:
        self.release()
        self.damaged.clear()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.clear()
        self.time_index.clear()

    def flush(self) -> None:
        """Make the batches and both indexes durable (a segment with no file yet has none)."""
        if not self.has_file:
            return
        os.fdatasync(self.fd)
        self.offset_index.persist(fsync=True)
        self.time_index.persist(fsync=True)

    def seal(self) -> None:
        """The segment stops being active: write out pending index entries (no fsync)."""
        self.offset_index.persist(fsync=False)
        self.time_index.persist(fsync=False)

    # ---------------------------------------------------------------- tail state

    def _reset_tail(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_index_entry = 0

    def account(self, pos: int, header: BatchHeader) -> None:
        """Fold the batch written at ``pos`` into the tail state, adding index entries when due."""
        if header.base_offset < self.next_offset:
            raise CorruptBatchError(
                f"{self.log_path}: batch at position {pos} has base offset {header.base_offset}, below {self.next_offset}"
            )
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        if self.bytes_since_index_entry > self.settings.index_interval_bytes and pos not in self.damaged:
            self.offset_index.append(header.base_offset - self.base_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += header.batch_length
        self.next_offset = header.next_offset

    def account_damage(self, damage: DamagedRange) -> None:
        """Fold a damaged range (found by recovery) into the tail state: its offsets stay taken."""
        self.damaged[damage.position] = damage
        self.account(damage.position, damage.as_header())

    def offset_at(self, position: int) -> int:
        """The offset the batch at ``position`` should start with: the end of the batch before it
        (a full header scan: only used when a batch there turns out damaged)."""
        expected = self.base_offset
        for pos, header in scan_headers(self.pread, 0, position, self.damaged):
            if pos < position:
                expected = header.next_offset
        return expected

    def _reload_tail(self) -> None:
        """Recompute the tail state from the last index entries and a scan of the bytes after them.

        At every offset-index entry the time index holds the largest timestamp up to that
        batch, so only the batches from the last indexed one on need reading.
        """
        self._reset_tail()
        if self.time_index:
            self.max_timestamp = self.time_index.keys[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.values[-1]
        start = self.offset_index.last_position()
        if self.offset_index:
            self.next_offset = self.base_offset + self.offset_index.keys[-1]
        for pos, header in scan_headers(self.pread, start, self.size_bytes, self.damaged):
            self.account(pos, header)
        self.rolling_base_ms = self.first_batch_timestamp()

    def first_batch_timestamp(self) -> int | None:
        """After a restart segment.ms counts from the first batch's timestamp (Kafka's rule)."""
        if self.size_bytes < HEADER_SIZE:
            return None
        return read_header(self.pread(HEADER_SIZE, 0)).max_timestamp

    def _check_indexes(self) -> None:
        index = self.offset_index
        if index and (index.values[-1] >= self.size_bytes or any(a >= b for a, b in zip(index.values, index.values[1:]))):
            raise IndexFileCorrupt(f"{index.path}: positions are out of order or past the end of {self.log_path}")
        if index:
            header = read_header(self.pread(HEADER_SIZE, index.values[-1]))
            if header.base_offset != self.base_offset + index.keys[-1]:
                raise IndexFileCorrupt(f"{index.path}: last entry does not point at the batch it names")
        if self.time_index and (not index or self.time_index.values[-1] > index.keys[-1]):
            raise IndexFileCorrupt(f"{self.time_index.path}: entries beyond the offset index")

    def reset(self) -> None:
        """Forget the indexes and tail state (recovery re-accounts every valid batch)."""
        self.offset_index.clear()
        self.time_index.clear()
        self.damaged.clear()
        self.size_bytes = 0
        self._reset_tail()

    # ---------------------------------------------------------------- append

    def roll_reason(self, header: BatchHeader, now_ms: int, pending_bytes: int = 0, pending_batches: int = 0) -> str | None:
        """Why ``header``'s batch must go to a new segment (after ``pending_*`` not yet written here), or None."""
        size = self.size_bytes + pending_bytes
        if size == 0:
            return None
        if size + header.batch_length > min(self.settings.segment_bytes, INT32_MAX):
            return f"segment.bytes={self.settings.segment_bytes} reached"
        if self.rolling_base_ms is not None and now_ms - self.rolling_base_ms >= self.settings.segment_ms:
            return f"segment.ms={self.settings.segment_ms} passed"
        if len(self.offset_index) + pending_batches + 1 > self.settings.index_entries_max:
            return f"segment.index.bytes={self.settings.segment_index_bytes} reached"
        if header.last_offset - self.base_offset > INT32_MAX:
            return "relative offsets would overflow the index"
        return None

    def append(self, data: memoryview, located: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        """Write contiguous whole batches (``located``: positions within ``data``) at the end."""
        start = self.size_bytes
        write_all(self.fd, data, start)
        if start == 0:
            self.rolling_base_ms = now_ms
        for pos, header in located:
            self.account(start + pos, header)
        self.size_bytes = start + len(data)

    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    def cut_at(self, pos: int) -> None:
        """Drop the file from ``pos`` on (indexes must already hold nothing at or after it)."""
        assert not self.offset_index or self.offset_index.values[-1] < pos, "index entries past the cut"
        os.ftruncate(self.fd, pos)
        os.lseek(self.fd, pos, os.SEEK_SET)
        self.size_bytes = pos

    def truncate_to(self, offset: int) -> None:
        """Drop the batch holding ``offset`` and everything after it."""
        pos = self.find_position(offset)
        if pos >= self.size_bytes:
            return
        hole = self.damaged.get(pos)
        cut_base = hole.first_offset if hole else read_header(self.pread(HEADER_SIZE, pos)).base_offset
        self.damaged = {p: r for p, r in self.damaged.items() if p < pos}
        self.offset_index.truncate(self.offset_index.count_before_position(pos))
        self.time_index.truncate(self.time_index.count_before_offset(cut_base - self.base_offset))
        self.cut_at(pos)
        self._reload_tail()

    # ---------------------------------------------------------------- read

    def read(self, pos: int, length: int) -> bytes:
        data = self.pread(length, pos)
        if len(data) != length:
            raise UnparsableBatchError(f"{self.log_path}: wanted {length} bytes at {pos}, the file holds {len(data)}", pos)
        return data

    def find_position(self, offset: int) -> int:
        """Position of the batch holding ``offset`` (or the first one after it); ``size_bytes`` if none."""
        start = self.offset_index.position_at_or_before(offset - self.base_offset)
        for pos, header in scan_headers(self.pread, start, self.size_bytes, self.damaged):
            if header.next_offset > offset:
                return pos
        return self.size_bytes

    def read_batches(self, pos: int, max_bytes: int, stop_offset: int, at_least_one: bool) -> tuple[bytes, int | None]:
        """Whole batches from ``pos``: up to ``max_bytes`` (or the first batch whole if ``at_least_one``),
        none whose base offset is >= ``stop_offset``, none at or after a damaged range. Returns
        (bytes, next offset after them or None)."""
        chunk = self.read(pos, min(max(max_bytes, HEADER_SIZE), self.size_bytes - pos))
        taken, next_offset = 0, None
        for offset, header in headers_in(chunk, self.damaged, pos):
            if header.base_offset >= stop_offset:
                break
            if offset + header.batch_length > len(chunk):
                if pos + offset + header.batch_length > self.size_bytes:
                    raise UnparsableBatchError(f"batch at position {pos + offset} runs past the end of {self.log_path}", pos + offset)
                if offset == 0 and at_least_one:
                    return self.read(pos, header.batch_length), header.next_offset
                break
            taken, next_offset = offset + header.batch_length, header.next_offset
        return chunk[:taken], next_offset

    def find_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after ``timestamp_ms`` in this segment."""
        start = self.offset_index.position_at_or_before(self.time_index.offset_before(timestamp_ms))
        for pos, header in scan_headers(self.pread, start, self.size_bytes, self.damaged):
            if header.max_timestamp >= timestamp_ms and pos not in self.damaged:
                found = _first_record_at_or_after(self.read(pos, header.batch_length), timestamp_ms)
                if found is not None:
                    return found
        return None


def _first_record_at_or_after(data: bytes, timestamp_ms: int) -> tuple[int, int] | None:
    """Within one batch; a body that does not decode (the broker never checks bodies) answers with the batch itself."""
    try:
        batch = decode_batch(data)
    except CorruptBatchError:
        header = read_header(data)
        return header.base_offset, header.max_timestamp
    return next(((o, ts) for o, ts in zip(batch.offsets, batch.timestamps) if ts >= timestamp_ms), None)
