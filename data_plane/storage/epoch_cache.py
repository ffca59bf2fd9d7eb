"""The leader-epoch cache: for each leader epoch, the first offset written in it (KIP-101, KIP-279).

This is the stored half: it keeps the entries in step with the log (append, truncation,
retention) and checkpoints them. The questions asked of the entries (where does an epoch
end, where do two logs diverge) are the replication core's, in
``data_plane/replication/epoch_history.py``. The entries are (epoch, start_offset) pairs,
both strictly increasing. The rules follow Kafka's ``LeaderEpochFileCache``. The arithmetic
is plain list work; with a path, the entries are written to ``leader-epoch-checkpoint``
atomically (temp file, fsync, rename) in Kafka's checkpoint format.

An assignment (``assign``: a new leader's epoch at its log end, a follower's first batch of
an epoch) writes nothing: ``flush`` writes it, and the log flushes its epoch cache before
its recovery point passes any record (its full flush and the flush of rolled segments).
Until then a crash loses nothing, since recovery rescans the batches above the recovery
point and finds their epochs in the headers, and an epoch with no record yet is dropped at
every load (``truncate_from_end(log end)``). So a broker creating 50,000 replicas writes
no checkpoint for the ones it leads. Truncations write at once, pending assignments
included. The first checkpoint of a log that had none is written without fsyncs: a crash
can only lose it whole or tear it, and the log then rebuilds its cache from its batches, as
it does for a missing checkpoint (``partition_log._load_epochs``). The same holds for the truncation a log does when it
loads (``truncate_from_end(log end, durable=False)``, Kafka's ``truncateFromEndAsyncFlush``,
KAFKA-15046): it drops an epoch a leader started at its log end and never wrote in, and a
crash that loses it only brings that entry back, which the next load drops again. A write
left without fsync is made durable by ``flush``, which the log calls whenever it flushes
its segments, so a checkpoint never lags records that are durable. A change that changes
nothing writes nothing::

    0            <- version
    2            <- number of entries
    0 0          <- epoch start_offset
    3 1500
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from data_plane.replication import epoch_history

from data_plane.storage.checkpoint_file import read_lines, write_lines
from server_common.fsync import fsync_dir, fsync_file

UNDEFINED = -1


class CorruptEpochCheckpointError(ValueError):
    """The checkpoint file cannot be parsed; the caller rebuilds the cache from the log."""


class LeaderEpochCache:
    def __init__(self, path: Path | None = None, entries: list[tuple[int, int]] | None = None, *, on_disk: bool | None = None) -> None:
        """``on_disk``: whether the checkpoint file exists, when the caller knows (a new log's
        directory holds none: no stat per replica created); looked up when None."""
        self.path = path
        self._entries: list[tuple[int, int]] = list(entries or [])
        # a checkpoint exists: every write must be durable
        self._on_disk = (path is not None and path.exists()) if on_disk is None else on_disk
        self._unflushed = False  # the file was last written without fsync
        self._pending = False  # entries assigned since the file was last written
        # Wraps every checkpoint write: the partition log's I/O guard, so that a failed write
        # (full disk, no descriptor left) takes the log offline with advice, whoever assigned
        # the epoch (a new leader does it outside any log call).
        self.write_guard: Callable[[], ContextManager[None]] = contextlib.nullcontext
        self._check()

    @classmethod
    def load(cls, path: Path) -> "LeaderEpochCache":
        """Read the checkpoint (missing = empty); raise CorruptEpochCheckpointError if unreadable."""
        try:
            lines = read_lines(path, version=0)
            entries = [(int(epoch), int(offset)) for epoch, offset in (line.split() for line in lines)]
            return cls(path, entries)
        except (ValueError, AssertionError) as exc:
            raise CorruptEpochCheckpointError(f"{path}: {exc}") from None

    def _check(self) -> None:
        if len(self._entries) < 2:
            return  # nothing to compare (most logs: every new replica's leader assigns one epoch)
        pairs = zip(self._entries, self._entries[1:])
        if any(a[0] >= b[0] or a[1] >= b[1] for a, b in pairs):
            raise ValueError(f"leader epoch entries must strictly increase in epoch and offset: {self._entries}")

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; entries it contradicts are dropped.

        A repeat of the latest epoch at the same or a later offset changes nothing.
        """
        assert epoch >= 0 and start_offset >= 0, f"bad epoch entry ({epoch}, {start_offset})"
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            if epoch == latest_epoch and start_offset >= latest_start:
                return
        self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        self._entries.append((epoch, start_offset))
        self._check()
        self._pending = self.path is not None  # written by the log's next flush, or with the next truncation

    def truncate_from_end(self, end_offset: int, *, durable: bool = True) -> None:
        """The log now ends at ``end_offset``: drop epochs that start at or after it.

        ``durable=False`` (only for a truncation that a later load redoes by itself) writes
        the checkpoint without fsync; ``flush`` makes it durable later."""
        kept = list(epoch_history.truncate_from_end(self._entries, end_offset))
        if kept != self._entries:
            self._entries = kept
            self._persist(durable)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs entirely before it, moving the
        start of the epoch that covers it up to ``start_offset``."""
        before = [entry for entry in self._entries if entry[1] <= start_offset]
        if not before:
            return
        covering_epoch = before[-1][0]
        kept = [(covering_epoch, start_offset)] + self._entries[len(before) :]
        if kept != self._entries:
            self._entries = kept
            self._persist()

    def clear(self) -> None:
        if not self._entries and (self.path is None or not self.path.exists()):
            return  # a new log: nothing to forget, and no checkpoint to write (and fsync) yet
        self._entries = []
        self._persist()

    def flush(self) -> None:
        """Make the checkpoint durable: write the entries assigned since the last write, and
        fsync a checkpoint written without fsync (nothing to do otherwise)."""
        if self._pending:
            self._persist()
        if self._unflushed and self.path is not None:
            fsync_file(self.path)
            fsync_dir(self.path.parent)
        self._unflushed = False

    def _persist(self, durable: bool = True) -> None:
        self._check()
        if self.path is not None:
            durable = durable and self._on_disk
            with self.write_guard():
                write_lines(self.path, version=0, lines=[f"{e} {o}" for e, o in self._entries], durable=durable)
            self._on_disk, self._unflushed, self._pending = True, not durable, False
