"""A sparse index file: fixed-size (key, value) entries, kept in memory, appended to disk.

Both of a segment's indexes are this shape: the offset index (relative offset int32 ->
file position int32) and the time index (timestamp int64 -> relative offset int32). Entries
live in two ``array`` columns; new ones reach the file at ``persist()`` (called on flush,
roll and close). The files are a cache of what the log says: recovery rebuilds them from the
segment, so an index that fails its sanity check on load is simply rebuilt.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Self, Sequence


def floor_slot(keys: Sequence[int], target: int) -> int:
    """Slot of the largest key <= target, or -1 when every key is larger."""
    return bisect_right(keys, target) - 1


def below_slot(keys: Sequence[int], target: int) -> int:
    """Slot of the largest key < target, or -1 when none is smaller."""
    return bisect_left(keys, target) - 1


class IndexFileCorrupt(Exception):
    """The file on disk is not a valid index (wrong size, keys out of order): rebuild it."""


class IndexFile:
    """Append-only (key, value) entries with strictly increasing keys; subclasses pick the key type."""

    KEY_CODE = "i"  # array/struct code of the key column; values are always int32

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys = array(self.KEY_CODE)
        self.values = array("i")
        self._entry = struct.Struct("<" + self.KEY_CODE + "i")
        self._persisted = 0  # entries already in the file

    @classmethod
    def load(cls, path: Path) -> Self:
        """Read the file (missing = empty); raise IndexFileCorrupt when it cannot be trusted."""
        index = cls(path)
        data = path.read_bytes() if path.exists() else b""
        if len(data) % index._entry.size:
            raise IndexFileCorrupt(f"{path}: {len(data)} bytes is not a whole number of {index._entry.size}-byte entries")
        for key, value in index._entry.iter_unpack(data):
            index.keys.append(key)
            index.values.append(value)
        if any(a >= b for a, b in zip(index.keys, index.keys[1:])):
            raise IndexFileCorrupt(f"{path}: keys are not strictly increasing")
        index._persisted = len(index.keys)
        return index

    def __len__(self) -> int:
        return len(self.keys)

    def append(self, key: int, value: int) -> None:
        assert not self.keys or key > self.keys[-1], f"{self.path}: index keys must increase ({key} after {self.keys[-1]})"
        self.keys.append(key)
        self.values.append(value)

    def truncate(self, count: int) -> None:
        """Keep only the first ``count`` entries, in memory and on disk."""
        if count >= len(self.keys):
            return
        del self.keys[count:]
        del self.values[count:]
        if self._persisted > count:
            os.truncate(self.path, count * self._entry.size)
            self._persisted = count

    def clear(self) -> None:
        """Forget every entry and remove the file (whatever it held)."""
        del self.keys[:]
        del self.values[:]
        self._persisted = 0
        self.path.unlink(missing_ok=True)

    def persist(self, fsync: bool) -> None:
        """Write entries not yet in the file; with ``fsync`` make the file durable."""
        if self._persisted == len(self.keys) and not fsync:
            return
        pending = b"".join(self._entry.pack(k, v) for k, v in zip(self.keys[self._persisted :], self.values[self._persisted :]))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, pending, self._persisted * self._entry.size)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._persisted = len(self.keys)

