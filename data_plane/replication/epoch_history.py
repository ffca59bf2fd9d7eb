"""The leader-epoch history of one replica's log: (epoch, start_offset) entries.

KIP-101 stamps every batch with the leader epoch it was appended in and keeps, per replica,
the offset at which each epoch's records begin (Kafka's `LeaderEpochFileCache`). The entries
are what makes truncation safe: two logs that hold the same epoch at the same offset agree on
everything before it, so comparing histories finds exactly where two logs part ways.

These are pure functions over an immutable tuple; the storage layer persists the tuple in its
leader-epoch checkpoint and calls `assign_epoch` / `truncate_from_end` at the same points
Kafka does (on becoming leader, on appending a batch with a newer epoch, on truncation).
"""

from dataclasses import dataclass
from typing import NamedTuple, Sequence

NO_EPOCH = -1


class EpochEntry(NamedTuple):
    """Records from `start_offset` on (until the next entry) were written in `epoch`."""

    epoch: int
    start_offset: int


EpochHistory = tuple[EpochEntry, ...]


@dataclass(frozen=True)
class EpochEndOffset:
    """Answer to "where does epoch E end in your log?" (OffsetsForLeaderEpoch, KIP-279).

    `epoch` is the largest epoch this log holds that is <= the one asked about, and
    `end_offset` is the first offset after that epoch's records in this log.
    """

    epoch: int
    end_offset: int


def check_history(entries: Sequence[tuple[int, int]], log_end_offset: int) -> EpochHistory:
    """Return `entries` as a tuple after asserting the cache invariants.

    Epochs and start offsets both strictly increase (Kafka's `assign` removes entries that
    would break that), and no epoch starts beyond the log end.
    """
    history = as_history(entries)
    for earlier, later in zip(history, history[1:]):
        assert earlier.epoch < later.epoch, history
        assert earlier.start_offset < later.start_offset, history
    assert not history or history[0].epoch >= 0, history
    assert not history or history[-1].start_offset <= log_end_offset, (history, log_end_offset)
    return history


def as_history(entries: Sequence[tuple[int, int]]) -> EpochHistory:
    """Accept plain (epoch, start_offset) pairs wherever a history is expected."""
    return tuple(EpochEntry(*entry) for entry in entries)


def latest_epoch(entries: Sequence[tuple[int, int]]) -> int:
    """Epoch of the last entry, NO_EPOCH for an empty history."""
    return entries[-1][0] if entries else NO_EPOCH


def assign_epoch(entries: Sequence[tuple[int, int]], epoch: int, start_offset: int) -> EpochHistory:
    """Record that `epoch` starts at `start_offset` (becoming leader, or appending a batch
    stamped with a newer epoch on a follower).

    As in Kafka's `LeaderEpochFileCache.assign`, entries with an epoch > the new one or a
    start offset >= the new one are dropped; an entry for the same epoch at an earlier offset
    already covers the records and is kept. Dropped entries can only be empty: an epoch this
    replica led without appending anything (elected twice in a row, or elected and demoted
    before writing), which must not claim offsets it never held. A newer epoch covering
    records before `start_offset` would mean epochs go backwards in the log: asserted.
    """
    assert epoch >= 0 and start_offset >= 0, (epoch, start_offset)
    entries = as_history(entries)
    for entry in entries:
        assert entry.epoch <= epoch or entry.start_offset >= start_offset, (
            "epochs never go backwards within a log", entries, epoch, start_offset)
    kept = tuple(e for e in entries if e.epoch <= epoch and e.start_offset < start_offset)
    if kept and kept[-1].epoch == epoch:
        return kept
    return kept + (EpochEntry(epoch, start_offset),)


def truncate_from_end(entries: Sequence[tuple[int, int]], offset: int) -> EpochHistory:
    """The history after the log is truncated to `offset` (records >= offset removed)."""
    return tuple(e for e in as_history(entries) if e.start_offset < offset)


def end_offset_for_epoch(
    entries: Sequence[tuple[int, int]], log_end_offset: int, requested_epoch: int
) -> EpochEndOffset | None:
    """Where `requested_epoch` ends in this log (Kafka's `LeaderEpochFileCache.endOffsetFor`).

    - the latest epoch ends at the log end;
    - an older epoch the log holds ends where the next held epoch starts;
    - an epoch the log never held is answered with the largest held epoch below it (KIP-279:
      returning the requested epoch with the next start offset let followers keep records of
      an epoch the leader never had);
    - an epoch older than the whole history ends where the history starts (its records are
      gone from this log, e.g. by retention).

    None when the question has no answer: empty history, NO_EPOCH, or an epoch newer than
    anything this log has seen.
    """
    if requested_epoch == NO_EPOCH or not entries:
        return None
    if requested_epoch == entries[-1][0]:  # the usual question (a caught-up follower's): no copy of the history
        return EpochEndOffset(requested_epoch, log_end_offset)
    entries = as_history(entries)
    higher = next((e for e in entries if e.epoch > requested_epoch), None)
    if higher is None:
        return None
    floor = next((e for e in reversed(entries) if e.epoch <= requested_epoch), None)
    if floor is None:
        return EpochEndOffset(requested_epoch, higher.start_offset)
    return EpochEndOffset(floor.epoch, higher.start_offset)
