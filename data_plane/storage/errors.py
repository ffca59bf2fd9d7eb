"""The errors the storage engine raises, each with a message that says what to do next.

User-caused problems (a corrupt or oversized batch, an offset outside the log) are plain
ValueErrors the broker turns into protocol error codes. ``StorageError`` is the disk failing
under us: the partition goes offline rather than the process going down.
"""

from __future__ import annotations

import errno as errno_names
from pathlib import Path

from data_plane.record_batch import CorruptBatchError, InvalidRecordError
from data_plane.storage.damage import DamagedRange

__all__ = [
    "CorruptBatchError",
    "DamagedRangeError",
    "InvalidRecordError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]


class StorageError(Exception):
    """An I/O error on a partition's files; the partition is offline until the broker restarts."""

    def __init__(self, message: str, *, errno: int | None, path: Path | str | None) -> None:
        super().__init__(message)
        self.errno = errno
        self.path = None if path is None else str(path)

    @classmethod
    def from_os_error(cls, exc: OSError, action: str, partition_dir: Path) -> "StorageError":
        path = exc.filename or partition_dir
        code = errno_names.errorcode.get(exc.errno or 0, "unknown errno")
        if exc.errno == errno_names.ENOSPC:
            advice = ("free space on that disk (or move partitions off it): the broker opens the log again by itself once a "
                      "write there succeeds (no need to restart the broker)")
        elif exc.errno in (errno_names.EMFILE, errno_names.ENFILE):
            advice = ("the broker ran out of file descriptors, not disk: raise its open-file limit (ulimit -n, systemd "
                      "LimitNOFILE) or move replicas off it (docs/operations.md, Sizing)")
        else:
            advice = ("check the disk (dmesg, SMART, mount state): the broker retries opening the log and recovers it once a "
                      "write there succeeds again (a restart of the broker recovers it too)")
        return cls(
            f"{action} failed on {path}: {exc.strerror or exc} ({code}); partition {partition_dir.name} is offline: {advice}",
            errno=exc.errno,
            path=path,
        )


class OffsetOutOfRangeError(ValueError):
    """A read or truncation asked for an offset outside [log_start_offset, log_end_offset]."""


class RecordTooLargeError(ValueError):
    """A batch larger than the topic's ``max.message.bytes``."""


class UnexpectedAppendOffsetError(ValueError):
    """A follower append whose batches do not continue the log exactly at its end offset."""


class DamagedRangeError(ValueError):
    """A read starts at a damaged range that is waiting for its repair from a replica."""

    def __init__(self, damage: DamagedRange) -> None:
        super().__init__(f"offsets {damage.first_offset}-{damage.next_offset - 1} are damaged on this replica and being repaired")
        self.damage = damage
