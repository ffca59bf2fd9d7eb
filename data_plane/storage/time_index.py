"""The time index: largest timestamp so far -> relative base offset of the batch holding it.

Entries are added next to offset-index entries, only when the segment's largest timestamp
has grown, so keys strictly increase. Every batch before an entry's batch has an older
timestamp than the entry's, which lets a timestamp lookup skip straight past them.
"""

from __future__ import annotations

from data_plane.storage.index_file import IndexFile, below_slot, floor_slot


class TimeIndex(IndexFile):
    KEY_CODE = "q"

    def maybe_append(self, max_timestamp_ms: int, relative_offset: int) -> None:
        if not self.keys or max_timestamp_ms > self.keys[-1]:
            self.append(max_timestamp_ms, relative_offset)

    def offset_before(self, timestamp_ms: int) -> int:
        """Relative offset of a batch that, with all batches before it, is older than ``timestamp_ms`` (0 if none)."""
        slot = below_slot(self.keys, timestamp_ms)
        return self.values[slot] if slot >= 0 else 0

    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    def count_before_offset(self, relative_offset: int) -> int:
        """How many entries point at batches before ``relative_offset``."""
        return floor_slot(self.values, relative_offset - 1) + 1  # values increase with keys
