"""Log compaction decisions: pure functions of segment sizes, timestamps, offsets and keys.

The cleaner (``log_cleaner.py``) reads and writes files; everything it decides comes from here:

- ``plan_cleaning``: which closed segments are *cleanable* (below the active segment, the
  last stable offset, and ``min.compaction.lag.ms``), how dirty they are (bytes not yet cleaned
  over all cleanable bytes), and whether that reaches ``min.cleanable.dirty.ratio``.
- ``OffsetMap``: key -> latest offset over the dirty segments, bounded in entries. It is
  filled whole segments at a time; the segment that would overflow it waits for the next
  pass (the first dirty segment always goes in, so every pass makes progress).
- ``keep_record``: a record survives when no later record of its key lies in the map's
  range, unless it is a tombstone (null value) older than ``delete.retention.ms``. Records
  without a key are always kept (nothing can supersede them).
- ``kept_runs``: kept records as runs of consecutive offsets: a batch's records carry
  consecutive offsets, so each run is re-encoded as one batch and offsets never change.
- ``TransactionCleaning``: transactions, as Kafka's cleaner treats them. The records of an
  aborted transaction (the partition's aborted-transaction index says which) are removed and
  never enter the offset map, so an aborted value never replaces a committed one; a marker
  stays while its transaction has records left in the log, and once it has none it goes when
  it is ``delete.retention.ms`` old (as a tombstone would). Cleaning never goes past the LSO,
  so every transaction it sees is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from data_plane.replication.transaction_index import AbortedTxn, in_aborted


@dataclass(frozen=True)
class SegmentInfo:
    """A closed segment as the planner sees it: its offsets [base, end) and bytes."""

    base_offset: int
    end_offset: int  # the next segment's base offset
    size_bytes: int
    max_timestamp: int


@dataclass(frozen=True)
class CleaningPlan:
    """Segments ``[first_dirty, end)`` (indexes into the list given) are dirty and cleanable."""

    first_dirty: int
    end: int
    dirty_ratio: float

    @property
    def dirty_indexes(self) -> range:
        return range(self.first_dirty, self.end)


def plan_cleaning(
    closed: Sequence[SegmentInfo], cleaned_up_to: int, last_stable_offset: int, now_ms: int, min_lag_ms: int, min_dirty_ratio: float
) -> CleaningPlan | None:
    """The dirty, cleanable segments of a log, or None when cleaning is not due.

    ``closed`` are the segments below the active one, oldest first; ``cleaned_up_to`` the
    cleaner checkpoint (everything below it was cleaned). A segment is cleanable when it
    ends at or below the last stable offset (at most the high watermark: a follower never
    cleans what it may truncate; and no open transaction, whose outcome decides what stays)
    and its newest record is at least ``min_lag_ms`` old; cleanable segments are a prefix.
    """
    end = 0
    while end < len(closed) and closed[end].end_offset <= last_stable_offset and now_ms - closed[end].max_timestamp >= min_lag_ms:
        end += 1
    first_dirty = next((i for i in range(end) if closed[i].end_offset > cleaned_up_to), end)
    dirty = sum(s.size_bytes for s in closed[first_dirty:end])
    total = sum(s.size_bytes for s in closed[:end])
    if dirty == 0:
        return None
    ratio = dirty / total
    return CleaningPlan(first_dirty, end, ratio) if ratio >= min_dirty_ratio else None


class OffsetMap:
    """Key -> latest offset seen, holding at most ``max_entries`` keys (the cleaner's memory bound)."""

    def __init__(self, max_entries: int) -> None:
        assert max_entries > 0, max_entries
        self.max_entries = max_entries
        self.latest: dict[bytes, int] = {}

    def new_keys(self, keys: Iterable[bytes | None]) -> int:
        """How many of ``keys`` the map does not hold yet (to decide whether a segment fits)."""
        return len({k for k in keys if k is not None and k not in self.latest})

    def fits(self, new_keys: int) -> bool:
        return len(self.latest) + new_keys <= self.max_entries

    def put_all(self, keys: Sequence[bytes | None], offsets: Sequence[int]) -> None:
        """Record each key's offset (later wins; null keys are skipped)."""
        for key, offset in zip(keys, offsets):
            if key is not None:
                self.latest[key] = offset


def keep_record(
    key: bytes | None, value: bytes | None, offset: int, timestamp_ms: int, latest: Mapping[bytes, int], tombstone_horizon_ms: int
) -> bool:
    """Whether the cleaner keeps this record. ``latest`` is the offset map (over every dirty
    record cleaned in this pass); ``tombstone_horizon_ms`` is now - delete.retention.ms."""
    if key is None:
        return True
    if latest.get(key, offset) > offset:
        return False
    return value is not None or timestamp_ms >= tombstone_horizon_ms


def kept_runs(keep: Sequence[bool]) -> list[tuple[int, int]]:
    """[start, stop) index ranges of consecutive kept records."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, kept in enumerate(keep):
        if kept and start is None:
            start = i
        elif not kept and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(keep)))
    return runs


class TransactionCleaning:
    """One pass's decisions about transactions, fed the batches of the rewritten segments in
    offset order from the log start (so a marker comes after every record of its
    transaction that is still in the log)."""

    def __init__(self, aborted: Sequence[AbortedTxn], marker_horizon_ms: int) -> None:
        self.aborted = aborted
        self.marker_horizon_ms = marker_horizon_ms
        self._has_records: dict[int, bool] = {}  # producer id -> its current transaction kept a record

    def is_aborted(self, producer_id: int, base_offset: int, is_transactional: bool) -> bool:
        """Whether a data batch belongs to an aborted transaction: all its records go."""
        return is_transactional and in_aborted(self.aborted, producer_id, base_offset)

    def on_data(self, producer_id: int, is_transactional: bool, kept_any: bool) -> None:
        """A data batch was rewritten, keeping at least one record or none."""
        if is_transactional:
            self._has_records[producer_id] = self._has_records.get(producer_id, False) or kept_any

    def keep_marker(self, producer_id: int, timestamp_ms: int) -> bool:
        """Whether a marker stays: while its transaction has records left, or while it is
        younger than ``delete.retention.ms`` (a reader that read the records before they
        were cleaned may still need to see it)."""
        return self._has_records.pop(producer_id, False) or timestamp_ms >= self.marker_horizon_ms
