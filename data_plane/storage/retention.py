"""Which old segments retention deletes: a pure function of sizes, timestamps and the clock.

Whole segments only, oldest first, never the active (last) one. By time, a segment goes
once its newest timestamp is more than ``retention.ms`` old; by size, the oldest go while
the partition stays at or above ``retention.bytes`` without them. Both are prefixes of the
segment list; the longer one wins.
"""

from __future__ import annotations

from typing import Sequence


def segments_to_delete(
    segments: Sequence[tuple[int, int]], now_ms: int, retention_ms: int, retention_bytes: int
) -> int:
    """How many of the oldest segments to delete; ``segments`` are (size_bytes, max_timestamp_ms), oldest first."""
    candidates = segments[:-1]
    by_time = 0
    if retention_ms >= 0:
        while by_time < len(candidates) and now_ms - candidates[by_time][1] > retention_ms:
            by_time += 1
    by_size = 0
    if retention_bytes >= 0:
        excess = sum(size for size, _ in segments) - retention_bytes
        while by_size < len(candidates) and excess - candidates[by_size][0] >= 0:
            excess -= candidates[by_size][0]
            by_size += 1
    return max(by_time, by_size)
