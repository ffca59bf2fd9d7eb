"""The offset index: relative base offset of a batch -> its position in the segment file.

Sparse (one entry per ``index.interval.bytes`` of log), so a lookup gives the position of
the nearest indexed batch at or before the wanted offset and the reader scans forward from
there over batch headers.
"""

from __future__ import annotations

from data_plane.storage.index_file import IndexFile, floor_slot


class OffsetIndex(IndexFile):
    KEY_CODE = "i"

    def position_at_or_before(self, relative_offset: int) -> int:
        """File position to start scanning from to find ``relative_offset`` (0 when unindexed)."""
        slot = floor_slot(self.keys, relative_offset)
        return self.values[slot] if slot >= 0 else 0

    def last_position(self) -> int:
        """Position of the last indexed batch (0 when the index is empty)."""
        return self.values[-1] if self.values else 0

    def count_before_position(self, position: int) -> int:
        """How many entries point before ``position`` (the ones to keep when cutting the log there)."""
        return floor_slot(self.values, position - 1) + 1
