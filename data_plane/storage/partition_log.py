"""PartitionLog: one partition replica's log on disk, a list of segments in offset order.

The broker's only door to storage. Appends validate every batch before writing any byte;
the leader stamps offsets and its epoch into the batch prefix, followers append batches
that already carry them. Reads return whole batches as raw bytes (never decoded). Every
OSError turns the partition offline: the error is raised as ``StorageError`` with advice,
later calls raise it again, and in-memory offsets never run ahead of the bytes on disk.

Every read verifies the CRC of the batches it returns, and ``scrub`` verifies the rest of
the log a budget at a time. A batch that fails becomes a ``DamagedRange`` (see
``damage.py``): reads return the intact batches before it and stop there, until ``repair``
writes a replica's copy over it, or skip it once it is marked ``lost``.

Not thread-safe: the broker drives each log from one thread (its asyncio loop).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import structlog

from data_plane.record_batch import (
    BatchHeader,
    CorruptBatchError,
    read_header,
    set_log_append_time,
    stamp_batch,
    validate_batch,
    validate_for_append,
)
from data_plane.storage.checkpoint_file import read_offset, write_offset
from data_plane.storage.damage import DamagedRange, find_resync, read_damage_file, write_damage_file
from data_plane.storage import fault_injection
from data_plane.storage.epoch_cache import CorruptEpochCheckpointError, LeaderEpochCache
from data_plane.storage.errors import (
    DamagedRangeError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from data_plane.storage.index_file import floor_slot
from data_plane.storage.compaction import CleaningPlan, SegmentInfo, plan_cleaning
from data_plane.storage.log_cleaner import (
    CLEANED_SUFFIX,
    PassResult,
    SegmentFile,
    discard,
    install_cleaned_file,
    read_cleaned_up_to,
    write_cleaned_up_to,
)
from data_plane.storage.recovery import first_segment_to_recover, recover_segments
from data_plane.storage.retention import segments_to_delete
from data_plane.storage.segment import LogSegment, UnparsableBatchError, scan_headers
from data_plane.storage.settings import LogSettings
from server_common.fsync import fsync_dir

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset"  # set by DeleteRecords: a log start inside the first segment
CHECKSUM_READ_BYTES = 8 << 20
UNPARSABLE_RETRIES_MAX = 8  # unparsable headers one read or scrub round turns into damaged ranges before giving up
_T = TypeVar("_T")
_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")

log = structlog.get_logger("storage")


@dataclass(frozen=True)
class AppendResult:
    first_offset: int
    last_offset: int
    record_count: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    max_timestamp: int
    headers: tuple[BatchHeader, ...] = ()  # as written (offsets and epochs stamped)


@dataclass(frozen=True)
class SyncPlan:
    """One log's part of a group-commit round (``PartitionLog.sync_plan``): the segment files
    to fsync (by path: the round's thread opens each for its fsync only, so a round holds no
    descriptor of the handle budget and at most one of its own), the directory when its
    entries changed since its last fsync, and what the log may call durable after."""

    log: "PartitionLog"
    offset: int  # the log end when planned: durable once the fsyncs are done
    paths: tuple[Path, ...]
    directory: Path | None
    truncations: int  # the log's truncation count when planned (a truncation since voids the plan)
    layout: int  # the log's layout version when planned (a roll since: the directory must be fsynced again)


@dataclass(frozen=True)
class ReadResult:
    data: bytes  # whole batches, concatenated
    first_offset: int  # base offset of the first batch (may be below the offset asked for)
    next_offset: int  # offset to read next (the offset asked for when data is empty)


TAIL_CACHE_MAX_BYTES = 64 * 1024  # larger appends are read back from the file (bulk load, not latency)


@dataclass(frozen=True, slots=True)
class _Tail:
    """A leader append's stamped bytes, [first_offset, next_offset), valid while the log ends
    at next_offset and nothing was truncated since. A caught-up follower's next fetch and a
    caught-up consumer's next read ask for exactly this range, usually within a millisecond:
    served from here they skip the index lookup, the pread and the header scan. The bytes are
    the ones written, CRCs included, so a reader gets what the file holds."""

    first_offset: int
    next_offset: int
    truncations: int
    data: bytes


class PartitionLog:
    # Damaged ranges noted so far by every log of the process: the repair loop looks at every
    # log only when this moves, and otherwise at the logs it already knows damaged.
    damage_noted = 0

    def __init__(
        self, directory: Path, settings: LogSettings, segments: list[LogSegment], epoch_cache: LeaderEpochCache, recovery_point: int
    ) -> None:
        assert segments, "a log always has an active segment"
        self.directory = directory
        self.settings = settings
        self.segments = segments
        self.leader_epoch_cache = epoch_cache
        epoch_cache.write_guard = lambda: self._io_guard("write the leader-epoch checkpoint")
        self.log_start_offset = segments[0].base_offset
        self.log_end_offset = segments[-1].next_offset
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.offline_error: StorageError | None = None
        # Told once when the log goes offline: the LogManager keeps its offline set by it, so
        # that a heartbeat never walks every log to find the offline ones.
        self.went_offline: Callable[[StorageError], None] = lambda error: None
        self._unflushed_records = 0
        self._first_unflushed_ms: int | None = None
        self._scrub_at: tuple[int, int] = (self.log_start_offset, 0)  # (segment base, position) verified next
        self.scrub_laps = 0  # times the scrub verified the log to its end
        # Nothing written since the last flush, since a clean load, or since it was created
        # empty (a crash can only lose a new empty log whole, which loses nothing): closing it
        # needs no fsync (a broker may close 10,000 such). Every guarded write sets it.
        self._changed_since_flush = True
        # Group commit (``--durability fsync``): the log end its last completed round made
        # durable (records only: indexes are rebuilt by recovery above the recovery point).
        self._synced_offset = self.recovery_point
        self._truncations = 0  # a plan made before a truncation must not vouch for what came after
        # The bytes of the last leader append while they are the log's tail: the next read of
        # a caught-up follower or consumer asks for exactly them (see `read`).
        self._tail: _Tail | None = None
        self._layout = 1  # bumped when a segment file is created: the directory needs an fsync
        self._layout_synced = 0
        self._log = log.bind(partition=directory.name)

    # ---------------------------------------------------------------- open

    @classmethod
    def open(
        cls, directory: Path, settings: LogSettings, now_ms: int, *, clean_shutdown: bool = False, recovery_point: int = 0
    ) -> "PartitionLog":
        """Create the log, or load it; unless ``clean_shutdown``, recover everything above ``recovery_point``.

        The defaults are the safe choice: a full validating scan of every segment.
        """
        try:
            try:
                plog = cls._load(directory, settings, clean_shutdown, recovery_point)
            except CorruptBatchError as exc:
                log.warning("log files do not parse; recovering every segment", partition=directory.name, reason=str(exc))
                plog = cls._load(directory, settings, clean_shutdown=False, recovery_point=0)
        except OSError as exc:
            raise StorageError.from_os_error(exc, "opening the log", directory) from exc
        if plog.log_end_offset > plog.recovery_point:
            plog._first_unflushed_ms = now_ms  # recovered bytes are not known to be durable yet
        return plog

    @classmethod
    def _load(cls, directory: Path, settings: LogSettings, clean_shutdown: bool, recovery_point: int) -> "PartitionLog":
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            names = _remove_strays(directory)
        else:
            names = []
        if not names:
            # A new replica, or one that never got a record (nor a checkpoint): nothing on disk
            # to read or recover, as a broker creating or reloading 50,000 of them finds.
            segment = LogSegment.create(directory, 0, settings, lazy=True)  # its file comes with the first record
            plog = cls(directory, settings, [segment], LeaderEpochCache(directory / EPOCH_CHECKPOINT, on_disk=False), 0)
            plog._changed_since_flush = False
            return plog
        bases = sorted(int(name[:20]) for name in names if _SEGMENT_NAME.match(name))
        first_untrusted = len(bases) if clean_shutdown else first_segment_to_recover(bases, recovery_point)
        recorded = read_damage_file(directory)
        segments: list[LogSegment] = []
        try:
            for i, base in enumerate(bases):
                damaged = [r for r in recorded if r.segment_base == base]
                segments.append(LogSegment.open(directory, base, settings, trusted=i < first_untrusted, damaged=damaged))
            epochs, epochs_trusted = _load_epochs(directory / EPOCH_CHECKPOINT)
            observe = _epoch_observer(epochs) if epochs_trusted else _ignore_batch
            segments = recover_segments(segments, first_untrusted, observe)
            if not segments:  # never written to (or every segment was lost): as a new log
                segments.append(LogSegment.create(directory, 0, settings, lazy=True))
            if not epochs_trusted:
                _rebuild_epochs(epochs, segments)
        except BaseException:
            for segment in segments:
                segment.release()
            raise
        plog = cls(directory, settings, segments, epochs, recovery_point)
        plog.log_start_offset = min(max(plog.log_start_offset, _read_log_start(directory)), plog.log_end_offset)
        # Redone by every load, so losing it is harmless: no fsync per log (KAFKA-15046).
        epochs.truncate_from_end(plog.log_end_offset, durable=False)
        epochs.truncate_from_start(plog.log_start_offset)
        plog._changed_since_flush = not clean_shutdown  # recovered or cut bytes are not known durable
        if plog.damaged_ranges() != sorted(recorded, key=_first_offset):
            plog._save_damage()
        return plog

    # ---------------------------------------------------------------- state

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self.segments)

    @property
    def is_offline(self) -> bool:
        return self.offline_error is not None

    def update_settings(self, settings: LogSettings) -> None:
        self.settings = settings
        for segment in self.segments:
            segment.settings = settings

    # ---------------------------------------------------------------- append

    def validate_append(self, batches: bytes | memoryview) -> list[tuple[int, BatchHeader]]:
        """The leader's checks of a produce (``validate_for_append`` on every batch, and the
        size limit) before anything else looks at it; returns (position, header) of each batch."""
        return self._validate(batches, validate_for_append)

    def append(
        self,
        batches: bytes | memoryview,
        *,
        assign_offsets: bool,
        leader_epoch: int,
        now_ms: int,
        validated: list[tuple[int, BatchHeader]] | None = None,
    ) -> AppendResult:
        """Append whole batches; all are validated before any byte is written.

        Leader (``assign_offsets``): offsets from the log end and ``leader_epoch`` are stamped
        into each batch (LogAppendTime topics also get ``now_ms``); ``validated`` is what
        ``validate_append`` returned for these bytes (checked here when None). Follower: the
        batches carry offsets and epochs already (``leader_epoch`` is ignored), pass the CRC
        check, and must continue the log at its end with increasing offsets (a gap is a range
        the leader lost). If the disk fails mid-append, the runs written to earlier segments
        stay (the log end covers exactly them) and the log goes offline.
        """
        self._check_online()
        end_before = self.log_end_offset
        if validated is not None:
            located = validated
        else:
            located = self.validate_append(batches) if assign_offsets else self._validate(batches, validate_batch)
        if assign_offsets:
            buffer = bytearray(batches)
            located = self._assign_offsets(buffer, located, leader_epoch, now_ms)
            data = memoryview(buffer)
        else:
            self._check_follower_offsets(located)
            data = memoryview(batches)
        record_count = sum(header.record_count for _, header in located)
        assert located and located[0][1].base_offset >= end_before, (end_before, located[0][1].base_offset)
        assert not assign_offsets or located[0][1].base_offset == end_before, (end_before, located[0][1].base_offset)
        with self._io_guard("append"):
            self._write(data, located, now_ms)
            self._note_unflushed(record_count, now_ms)
        if assign_offsets and len(data) <= TAIL_CACHE_MAX_BYTES:
            self._tail = _Tail(end_before, self.log_end_offset, self._truncations, bytes(data))
        assert self.log_end_offset == located[-1][1].last_offset + 1, (self.log_end_offset, located[-1][1].last_offset)
        return AppendResult(
            first_offset=located[0][1].base_offset,
            last_offset=located[-1][1].last_offset,
            record_count=record_count,
            log_append_time_ms=now_ms if assign_offsets and self.settings.log_append_time else -1,
            max_timestamp=max(header.max_timestamp for _, header in located),
            headers=tuple(header for _, header in located),
        )

    def _validate(self, batches: bytes | memoryview, check: Callable[[bytes | memoryview, int], BatchHeader]) -> list[tuple[int, BatchHeader]]:
        located: list[tuple[int, BatchHeader]] = []
        pos = 0
        while pos < len(batches):
            header = check(batches, pos)
            if header.batch_length > self.settings.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch at position {pos} is {header.batch_length} bytes, over the topic's max.message.bytes="
                    f"{self.settings.max_message_bytes}: send smaller batches or raise max.message.bytes"
                )
            located.append((pos, header))
            pos += header.batch_length
        if not located:
            raise CorruptBatchError("the append carries no record batch: send at least one")
        return located

    def _assign_offsets(
        self, buffer: bytearray, located: list[tuple[int, BatchHeader]], leader_epoch: int, now_ms: int
    ) -> list[tuple[int, BatchHeader]]:
        assert leader_epoch >= self.leader_epoch_cache.latest_epoch, (
            f"leader epoch {leader_epoch} is older than the log's latest {self.leader_epoch_cache.latest_epoch}"
        )
        stamped: list[tuple[int, BatchHeader]] = []
        next_offset = self.log_end_offset
        for pos, header in located:
            stamp_batch(buffer, pos, next_offset, leader_epoch)
            if self.settings.log_append_time:
                set_log_append_time(buffer, pos, now_ms)
            stamped.append((pos, read_header(buffer, pos)))
            next_offset += header.record_count
        return stamped

    def _check_follower_offsets(self, located: list[tuple[int, BatchHeader]]) -> None:
        expected = self.log_end_offset
        for pos, header in located:
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"{self.directory.name}: batch at position {pos} starts at offset {header.base_offset} but the log "
                    f"continues at {expected}: fetch from offset {self.log_end_offset} (after truncating if diverged)"
                )
            expected = header.next_offset

    def _write(self, data: memoryview, located: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        """Write runs of batches, one ``write`` per run, rolling a segment between runs when due."""
        i = 0
        while i < len(located):
            reason = self.active.roll_reason(located[i][1], now_ms)
            if reason is not None:
                self._roll(located[i][1].base_offset, reason)
            j, run_bytes = i + 1, located[i][1].batch_length
            while j < len(located) and self.active.roll_reason(located[j][1], now_ms, run_bytes, j - i) is None:
                run_bytes += located[j][1].batch_length
                j += 1
            start = located[i][0]
            fault_injection.check("append")
            if not self.active.has_file:
                self._layout += 1  # the append creates the segment's file: the directory needs an fsync
            self.active.append(data[start : start + run_bytes], [(pos - start, h) for pos, h in located[i:j]], now_ms)
            self.log_end_offset = self.active.next_offset
            self._record_epochs(located[i:j])
            i = j

    def _record_epochs(self, located: list[tuple[int, BatchHeader]]) -> None:
        for _, header in located:
            if header.leader_epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(header.leader_epoch, header.base_offset)

    def _roll(self, base_offset: int, reason: str) -> None:
        self.active.seal()
        fault_injection.check("roll")
        self.segments.append(LogSegment.create(self.directory, base_offset, self.settings))
        self._layout += 1
        self._log.info("rolled segment", base_offset=base_offset, reason=reason)

    # ---------------------------------------------------------------- flush

    def _note_unflushed(self, record_count: int, now_ms: int) -> None:
        self._unflushed_records += record_count
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now_ms
        if 0 <= self.settings.flush_messages <= self._unflushed_records:
            self.flush()

    def flush(self) -> None:
        """fsync everything above the recovery point; the recovery point becomes the log end."""
        self._check_online()
        with self._io_guard("flush"):
            for segment in self._segments_from(self.recovery_point):
                segment.flush()
            self.leader_epoch_cache.flush()
            fsync_dir(self.directory)
        self._layout_synced = self._layout
        self._changed_since_flush = False
        self.recovery_point = self.log_end_offset
        self._unflushed_records = 0
        self._first_unflushed_ms = None

    @property
    def durable_offset(self) -> int:
        """Records below this offset were fsynced (by a flush or a group-commit round)."""
        return min(max(self._synced_offset, self.recovery_point), self.log_end_offset)

    def sync_plan(self) -> SyncPlan | None:
        """What a group-commit round must fsync to make this log durable to its end now; None
        when it already is (or the log is offline). Runs on the loop; the fsyncs do not."""
        if self.is_offline or (self.durable_offset >= self.log_end_offset and self._layout_synced == self._layout):
            return None
        paths = tuple(segment.log_path for segment in self._segments_from(self.durable_offset) if segment.has_file)
        directory = self.directory if self._layout_synced != self._layout else None
        return SyncPlan(self, self.log_end_offset, paths, directory, self._truncations, self._layout)

    def note_synced(self, plan: SyncPlan) -> None:
        """``plan``'s fsyncs are done: what it covered is durable, unless the log was
        truncated since (records written after a truncation were not in the plan)."""
        assert plan.log is self
        if plan.truncations != self._truncations:
            return
        self._synced_offset = max(self._synced_offset, plan.offset)
        if plan.directory is not None:
            self._layout_synced = max(self._layout_synced, plan.layout)

    def maybe_flush(self, now_ms: int) -> None:
        """Flush by ``flush.ms``, or at least the segments rolled since the last flush (call it periodically)."""
        if self.is_offline:
            return
        due_ms = self.settings.flush_ms
        if due_ms >= 0 and self._first_unflushed_ms is not None and now_ms - self._first_unflushed_ms >= due_ms:
            self.flush()
        elif self.recovery_point < self.active.base_offset:
            with self._io_guard("flush"):
                for segment in self._segments_from(self.recovery_point)[:-1]:
                    segment.flush()
                self.leader_epoch_cache.flush()  # the recovery point passes records whose epochs it may not hold yet
                fsync_dir(self.directory)
            self.recovery_point = self.active.base_offset

    # ---------------------------------------------------------------- read

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` (at least one batch
        if any), none whose base offset is >= ``max_offset`` (the HW) or the log end."""
        self._check_online()
        if not self.log_start_offset <= start_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside {self.directory.name}'s range "
                f"[{self.log_start_offset}, {self.log_end_offset}]: seek to the earliest or latest offset"
            )
        stop = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        tail = self._tail
        if (tail is not None and tail.first_offset == start_offset and tail.next_offset == stop == self.log_end_offset
                and tail.truncations == self._truncations and len(tail.data) <= max_bytes):
            return ReadResult(tail.data, start_offset, stop)
        with self._io_guard("read"):
            chunks, next_offset, blocked = self._retrying_unparsable(lambda: self._read_verified(start_offset, max_bytes, stop))
        if blocked is not None and not chunks:
            raise DamagedRangeError(blocked)
        first_offset = read_header(chunks[0]).base_offset if chunks else start_offset
        return ReadResult(b"".join(chunks), first_offset, next_offset)

    def _read_verified(self, start_offset: int, max_bytes: int, stop: int) -> tuple[list[bytes], int, DamagedRange | None]:
        """(chunks, next offset, the damaged range that stopped the read) for ``read``."""
        chunks: list[bytes] = []
        next_offset, budget = start_offset, max_bytes
        blocked: DamagedRange | None = None
        for segment in self._segments_from(start_offset):
            with self._unparsable_is_damage(segment):
                pos = segment.find_position(next_offset)
                while pos < segment.size_bytes and blocked is None:
                    hole = segment.damaged.get(pos)
                    if hole is not None:
                        if hole.first_offset >= stop:
                            break
                        if not hole.lost:
                            blocked = hole
                            break
                        pos, next_offset = hole.end_position, max(next_offset, hole.next_offset)
                        continue
                    data, after = segment.read_batches(pos, budget, stop, at_least_one=not chunks)
                    taken, after = self._verified(segment, pos, data, after)
                    if taken:
                        chunks.append(data if taken == len(data) else data[:taken])
                        pos, next_offset, budget = pos + taken, after, budget - taken  # type: ignore[assignment]
                    if taken == len(data) and pos not in segment.damaged:
                        break  # stopped by the budget, the stop offset or the segment's end
            if blocked is not None or budget <= 0 or pos < segment.size_bytes:
                break
        return chunks, next_offset, blocked

    def _retrying_unparsable(self, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` again after each batch header it could not parse (now a damaged
        range every scan jumps over), at most UNPARSABLE_RETRIES_MAX times."""
        for _ in range(UNPARSABLE_RETRIES_MAX):
            try:
                return attempt()
            except _DamageNoted:
                continue
        raise CorruptBatchError(f"more than {UNPARSABLE_RETRIES_MAX} unparsable batch headers found in one pass")

    @contextlib.contextmanager
    def _unparsable_is_damage(self, segment: LogSegment) -> Iterator[None]:
        """A header in ``segment`` that does not parse becomes a damaged range (then _DamageNoted)."""
        try:
            yield
        except UnparsableBatchError as exc:
            self._note_damage(segment, exc.position, segment.offset_at(exc.position), str(exc))
            raise _DamageNoted() from exc

    def _verified(self, segment: LogSegment, pos: int, data: bytes, after: int | None) -> tuple[int, int | None]:
        """(bytes, next offset) of the prefix of ``data`` (read at ``pos``) whose batches pass
        their CRC; the first batch that fails becomes a damaged range."""
        at, next_offset = 0, None
        while at < len(data):
            try:
                header = validate_batch(data, at)
            except CorruptBatchError as exc:
                expected = segment.offset_at(pos) if next_offset is None else next_offset
                self._note_damage(segment, pos + at, expected, str(exc))
                return at, next_offset
            at, next_offset = at + header.batch_length, header.next_offset
        return at, after

    # ---------------------------------------------------------------- damage

    def damaged_ranges(self) -> list[DamagedRange]:
        """Every damaged range, lowest offsets first. Cheap on an undamaged log: the repair
        loop asks every partition several times a second."""
        ranges = [r for segment in self.segments if segment.damaged for r in segment.damaged.values()]
        return sorted(ranges, key=_first_offset) if ranges else ranges

    def _note_damage(self, segment: LogSegment, position: int, expected_offset: int, reason: str) -> DamagedRange:
        """Take the failed batch at ``position`` out of service up to the next intact batch
        (or the segment's end), record it on disk and log it."""
        resync = find_resync(segment.pread, position, segment.size_bytes, expected_offset)
        end, next_offset = (resync[0], resync[1].base_offset) if resync else (segment.size_bytes, segment.next_offset)
        damage = DamagedRange(segment.base_offset, position, end, expected_offset, max(next_offset, expected_offset + 1))
        for inside in [p for p in segment.damaged if position <= p < end]:
            del segment.damaged[inside]  # found earlier from a wrong length in front of it: the new range covers it
        segment.damaged[position] = damage
        PartitionLog.damage_noted += 1
        self._save_damage()
        self._log.error("damaged batch found: taken out of service until repaired", segment=segment.base_offset,
                        position=position, first_offset=damage.first_offset, next_offset=damage.next_offset, reason=reason)
        return damage

    def _save_damage(self) -> None:
        with self._io_guard("recording damaged ranges"):
            write_damage_file(self.directory, self.damaged_ranges())

    def _save_damage_if_changed(self, before: list[DamagedRange]) -> None:
        """Truncation and retention drop the damaged ranges of the bytes they remove: keep the file in step."""
        if self.damaged_ranges() != before:
            self._save_damage()

    def mark_lost(self, damage: DamagedRange) -> None:
        """No replica can give ``damage`` back: readers skip its offsets from now on (never reused)."""
        segment = self._segment_at(damage.segment_base)
        if segment is not None and segment.damaged.get(damage.position) == damage:
            segment.damaged[damage.position] = damage.marked_lost()
            self._save_damage()

    def repair(self, damage: DamagedRange, copy: bytes) -> None:
        """Write a replica's copy of the damaged range over it. The copy must be whole batches
        that pass their CRC, hold exactly offsets [first_offset, next_offset) in exactly the
        range's bytes, and carry the leader epochs this log's epoch cache expects at those
        offsets; CorruptBatchError says which check failed (nothing is written then)."""
        self._check_online()
        segment = self._segment_at(damage.segment_base)
        if segment is None or damage.position not in segment.damaged:
            return  # truncated or deleted meanwhile
        length = damage.end_position - damage.position
        expected, at = damage.first_offset, 0
        while at < length:
            header = validate_batch(copy, at, length - at)
            if header.base_offset != expected or header.leader_epoch != self._epoch_at(header.base_offset):
                raise CorruptBatchError(
                    f"the copy's batch at offset {header.base_offset} (epoch {header.leader_epoch}) is not the one this log "
                    f"holds there (offset {expected}, epoch {self._epoch_at(expected)})"
                )
            at, expected = at + header.batch_length, header.next_offset
        if expected != damage.next_offset:
            raise CorruptBatchError(f"the copy ends at offset {expected}, the damaged range at {damage.next_offset}")
        with self._io_guard("repair"):
            fd, data, written = segment.fd, memoryview(copy)[:length], 0
            while written < length:  # pwrite: the append position stays at the file's end
                written += os.pwrite(fd, data[written:], damage.position + written)
            os.fdatasync(fd)
        del segment.damaged[damage.position]
        self._save_damage()
        self._log.warning("damaged range repaired from a replica's copy", first_offset=damage.first_offset,
                          next_offset=damage.next_offset, bytes=length)

    def _epoch_at(self, offset: int) -> int:
        epoch = -1
        for e, start in self.leader_epoch_cache.entries:
            if start <= offset:
                epoch = e
        return epoch

    def _segment_at(self, base_offset: int) -> LogSegment | None:
        return next((segment for segment in self.segments if segment.base_offset == base_offset), None)

    def scrub(self, max_bytes: int) -> int:
        """Verify the CRCs of up to ``max_bytes`` more of the log (whole batches), from where the
        last call stopped, wrapping to the log start at the end; returns bytes verified. A batch
        that fails becomes a damaged range, as on a read."""
        self._check_online()
        done = unparsable = 0
        with self._io_guard("scrub"):
            while done < max_bytes:
                base, pos = self._scrub_at
                segment = self._segment_at(base) or self.segments[0]
                if segment.base_offset != base:
                    pos = 0
                hole = segment.damaged.get(pos)
                if hole is not None:
                    self._scrub_at = (segment.base_offset, hole.end_position)
                    continue
                if pos >= segment.size_bytes:
                    later = [s for s in self.segments if s.base_offset > segment.base_offset]
                    self._scrub_at = (later[0].base_offset if later else self.segments[0].base_offset, 0)
                    if not later:
                        self.scrub_laps += 1
                        break
                    continue
                try:
                    with self._unparsable_is_damage(segment):
                        data, after = segment.read_batches(pos, max_bytes - done, segment.next_offset + 1, at_least_one=True)
                except _DamageNoted:
                    unparsable += 1
                    if unparsable > UNPARSABLE_RETRIES_MAX:
                        raise CorruptBatchError(f"more than {UNPARSABLE_RETRIES_MAX} unparsable batch headers found in one pass") from None
                    continue  # the next round jumps over the new damaged range
                taken, _ = self._verified(segment, pos, data, after)
                self._scrub_at = (segment.base_offset, pos + taken)
                done += taken
                if not data:
                    break
        return done

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after ``timestamp_ms``; None if there is none."""
        self._check_online()
        with self._io_guard("timestamp lookup"):
            for segment in self.segments:
                if segment.max_timestamp >= timestamp_ms:
                    found = segment.find_timestamp(timestamp_ms)
                    if found is not None:
                        return found
        return None

    def checksum(self, upto_offset: int) -> int:
        """CRC32 over the raw bytes of the batches from the log start whose base offset is below ``upto_offset``."""
        crc, offset = 0, self.log_start_offset
        while offset < min(upto_offset, self.log_end_offset):
            result = self.read(offset, CHECKSUM_READ_BYTES, max_offset=upto_offset)
            if not result.data:
                break
            crc, offset = zlib.crc32(result.data, crc), result.next_offset
        return crc

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches from the one holding ``from_offset`` to the log end, read
        from the files without the bodies (rebuilding producer state on open)."""
        for segment in self._segments_from(from_offset):
            for _, header in scan_headers(segment.pread, 0, segment.size_bytes, segment.damaged):
                if header.last_offset >= from_offset:
                    yield header

    def _segments_from(self, offset: int) -> list[LogSegment]:
        """The segments that may hold ``offset`` or anything after it."""
        first = floor_slot([segment.base_offset for segment in self.segments], offset)  # type: ignore[arg-type]
        return self.segments[max(first, 0) :]

    # ---------------------------------------------------------------- truncation and retention

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or after ``offset`` (a follower's truncation).

        Truncation works on whole batches: if ``offset`` falls inside a batch, that batch goes
        too and the log end offset becomes its base offset.
        """
        self._check_online()
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch this broker started as leader and never wrote in
            # may sit at the log end (Kafka's UnifiedLog.truncateTo keeps the same rule). It
            # must go: kept, the follower keeps naming it as its last fetched epoch and the
            # leader keeps answering "diverging" at this very offset, forever.
            with self._io_guard("truncate the epoch cache"):
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        damage_before = self.damaged_ranges()
        with self._io_guard("truncate"):
            while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                self.segments.pop().delete()
            self.active.truncate_to(offset)
            self.log_end_offset = self.active.next_offset
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._save_damage_if_changed(damage_before)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._synced_offset = min(self._synced_offset, self.log_end_offset)
        self._truncations += 1
        self._clean_at_most_to(self.log_end_offset)
        assert self.log_end_offset <= offset, (self.log_end_offset, offset)
        self._log.info("truncated", requested_offset=offset, log_end_offset=self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower far behind the leader's log start)."""
        self._check_online()
        damage_before = self.damaged_ranges()
        with self._io_guard("truncate"):
            while self.segments:
                self.segments.pop().delete()
            self.segments.append(LogSegment.create(self.directory, offset, self.settings))
            self._layout += 1
            self._truncations += 1
            self.leader_epoch_cache.clear()
            write_offset(self.directory / LOG_START_CHECKPOINT, offset)
            write_cleaned_up_to(self.directory, offset)
        self._save_damage_if_changed(damage_before)
        self.log_start_offset = self.log_end_offset = self.recovery_point = self._synced_offset = offset
        self._log.info("truncated fully", log_start_offset=offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole old segments by ``retention.ms`` / ``retention.bytes`` (unless the policy is
        ``compact`` alone); returns how many. A log of one segment is left at once: the active
        segment is never deleted, and the broker's pass asks every replica, 50,000 of them on a
        large broker, most with that one segment."""
        if self.is_offline or not self.settings.deletes or len(self.segments) < 2:
            return 0
        segments = [(segment.size_bytes, segment.max_timestamp) for segment in self.segments]
        doomed = segments_to_delete(segments, now_ms, self.settings.retention_ms, self.settings.retention_bytes)
        if not doomed:
            return 0
        damage_before = self.damaged_ranges()
        with self._io_guard("retention"):
            for _ in range(doomed):
                self.segments[0].delete()
                self.segments.pop(0)
                self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._save_damage_if_changed(damage_before)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self._log.info("retention deleted segments", segments=doomed, log_start_offset=self.log_start_offset)
        return doomed

    # ---------------------------------------------------------------- compaction

    def cleaning_candidates(self, last_stable_offset: int, now_ms: int) -> tuple[list[SegmentFile], CleaningPlan] | None:
        """The closed segments and the cleaning plan when this compacted log is due a pass
        (nothing when offline, not compacted, damaged, or not dirty enough). Only segments
        below ``last_stable_offset`` are cleaned: below the HW, and no open transaction."""
        if self.is_offline or not self.settings.compacted or self.damaged_ranges():
            return None
        closed = self.segments[:-1]
        infos = [
            SegmentInfo(s.base_offset, nxt.base_offset, s.size_bytes, s.max_timestamp) for s, nxt in zip(closed, self.segments[1:])
        ]
        cleaned_up_to = max(read_cleaned_up_to(self.directory), self.log_start_offset)
        plan = plan_cleaning(infos, cleaned_up_to, last_stable_offset, now_ms, self.settings.min_compaction_lag_ms,
                             self.settings.min_cleanable_dirty_ratio)
        if plan is None:
            return None
        return [SegmentFile(info, s.log_path) for info, s in zip(infos, closed)], plan

    def _clean_at_most_to(self, offset: int) -> None:
        """After a truncation: what is written again above ``offset`` is dirty."""
        if read_cleaned_up_to(self.directory) > offset:
            with self._io_guard("cleaner checkpoint"):
                write_cleaned_up_to(self.directory, offset)

    def install_cleaned(self, result: PassResult) -> int:
        """Swap in the cleaned segments of a pass (oldest first) and checkpoint how far the
        log is clean; a segment deleted, truncated or damaged meanwhile keeps its old file and
        ends the install there. Returns how many were installed. Each swap is one rename; the
        reopened segment's tail state comes from a header scan of the new file. Cleaned files
        not installed are deleted."""
        self._check_online()
        installed = 0
        with self._io_guard("install cleaned segments"):
            for cleaned in result.cleaned:
                segment = self._segment_at(cleaned.base_offset)
                unchanged = segment is not None and segment is not self.active and segment.size_bytes == cleaned.old_size
                if not unchanged or segment.damaged:
                    break
                install_cleaned_file(cleaned.path, segment.log_path)
                segment.release()
                replacement = LogSegment.open(self.directory, segment.base_offset, self.settings, trusted=True)
                replacement.seal()
                self.segments[self.segments.index(segment)] = replacement
                if self._scrub_at[0] == segment.base_offset:
                    self._scrub_at = (segment.base_offset, 0)
                installed += 1
            discard(result.cleaned[installed:])
            if installed == len(result.cleaned):
                write_cleaned_up_to(self.directory, result.cleaned_up_to)
        return installed

    def advance_log_start(self, offset: int) -> None:
        """Make ``offset`` the log start (DeleteRecords): records below it are no longer
        served, segments wholly below it are deleted, and the new start is checkpointed so a
        restart keeps it even where it falls inside the first remaining segment.

        The log is flushed first: the checkpoint never names an offset a crash could take
        back, so after recovery the start is never past the end."""
        self._check_online()
        assert self.log_start_offset < offset <= self.log_end_offset, (self.log_start_offset, offset, self.log_end_offset)
        self.flush()
        damage_before = self.damaged_ranges()
        with self._io_guard("advance the log start"):
            write_offset(self.directory / LOG_START_CHECKPOINT, offset)
            while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
                self.segments.pop(0).delete()
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
        self._save_damage_if_changed(damage_before)
        self.recovery_point = max(self.recovery_point, offset)
        self._log.info("log start advanced", log_start_offset=offset)

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush and release the files. No flush when offline, or when nothing changed since
        the last flush (or a clean load, or creation) and every record is below the recovery
        point: its files are as durable as they will get (an epoch truncation done at load
        may still be unflushed; the next load redoes it)."""
        try:
            if not self.is_offline and (self._changed_since_flush or self.recovery_point < self.log_end_offset):
                self.flush()
        finally:
            for segment in self.segments:
                with contextlib.suppress(OSError):
                    segment.close()

    def delete(self) -> None:
        """Remove the partition's directory and everything in it."""
        for segment in self.segments:
            segment.release()
        try:
            shutil.rmtree(self.directory)
        except OSError as exc:
            raise StorageError.from_os_error(exc, "deleting the log", self.directory) from exc

    # ---------------------------------------------------------------- offline handling

    def _check_online(self) -> None:
        error = self.offline_error
        if error is not None:
            raise StorageError(f"{self.directory.name} is offline after an earlier error: {error}", errno=error.errno, path=error.path)

    @contextlib.contextmanager
    def _io_guard(self, action: str) -> Iterator[None]:
        """Turn an OSError (or our own files no longer parsing) into StorageError and go offline.
        Any other action than those in ``_ACTIONS_NEEDING_NO_FLUSH`` may write: the log then
        needs a flush before close."""
        if action not in _ACTIONS_NEEDING_NO_FLUSH:
            self._changed_since_flush = True
        try:
            yield
        except OSError as exc:
            self._go_offline(StorageError.from_os_error(exc, action, self.directory), exc)
        except CorruptBatchError as exc:
            error = StorageError(
                f"{action} failed: the log on disk does not parse ({exc}); partition {self.directory.name} is offline: "
                f"restart the broker to recover it, or delete {self.directory} and let it re-replicate",
                errno=None,
                path=self.directory,
            )
            self._go_offline(error, exc)

    def _go_offline(self, error: StorageError, cause: Exception) -> None:
        self.offline_error = error
        self.went_offline(error)
        self._log.error("partition offline", error=str(error))
        raise error from cause


# Reads, and the epoch cache's own truncation: its checkpoint writes are durable by
# themselves (or flagged for the log's next flush, see LeaderEpochCache.flush).
_ACTIONS_NEEDING_NO_FLUSH = frozenset(
    {"read", "scrub", "timestamp lookup", "flush", "truncate the epoch cache", "write the leader-epoch checkpoint"}
)


class _DamageNoted(Exception):
    """An unparsable header was just recorded as a damaged range: the pass starts over."""


def _first_offset(damage: DamagedRange) -> int:
    return damage.first_offset


def _remove_strays(directory: Path) -> list[str]:
    """Delete temp files, unfinished cleaned segments and indexes whose segment is gone (left by
    a crash mid-operation); the names of the files that stay."""
    names = os.listdir(directory)
    present, kept = set(names), []
    for name in names:
        stem, _, suffix = name.rpartition(".")
        orphan_index = suffix in ("index", "timeindex") and f"{stem}.log" not in present
        if f".{suffix}" in (".tmp", CLEANED_SUFFIX) or orphan_index:
            (directory / name).unlink()
        else:
            kept.append(name)
    return kept


def _load_epochs(path: Path) -> tuple[LeaderEpochCache, bool]:
    """The checkpointed cache and whether it can be trusted (missing or unreadable: rebuild it)."""
    try:
        return LeaderEpochCache.load(path), path.exists()
    except CorruptEpochCheckpointError as exc:
        log.warning("rebuilding leader epoch cache from the log", path=str(path), reason=str(exc))
        return LeaderEpochCache(path), False


def _read_log_start(directory: Path) -> int:
    """The checkpointed log start (0 when none was ever set, or the file is unreadable: the
    first segment's base then stands, which only shows deleted records again, never loses any)."""
    try:
        return read_offset(directory / LOG_START_CHECKPOINT)
    except ValueError as exc:
        log.warning("log start checkpoint unreadable: starting at the first segment", partition=directory.name, reason=str(exc))
        return 0


def _ignore_batch(header: BatchHeader) -> None:
    """Recovery's batch observer while the epoch cache is to be rebuilt afterwards anyway."""


def _epoch_observer(epochs: LeaderEpochCache) -> Callable[[BatchHeader], None]:
    def observe(header: BatchHeader) -> None:
        if header.leader_epoch > epochs.latest_epoch:
            epochs.assign(header.leader_epoch, header.base_offset)

    return observe


def _rebuild_epochs(epochs: LeaderEpochCache, segments: list[LogSegment]) -> None:
    """Rebuild a lost or unreadable epoch checkpoint from the batch headers, and write it
    durably at once: the recovery point may already be past these batches, so a crash
    before the next flush would find the file trusted and short of them."""
    epochs.clear()
    observe = _epoch_observer(epochs)
    for segment in segments:
        for _, header in scan_headers(segment.pread, 0, segment.size_bytes, segment.damaged):
            observe(header)
    epochs.flush()
