"""Finding and repairing divergent follower logs by leader epoch, never by high watermark.

Rule (docs/architecture.md, "Replication"): a follower's fetch carries its fetch offset (its log
end) and the epoch of its last record. Where the logs diverge the leader answers with the
diverging epoch and that epoch's end offset in the leader's log; the follower truncates and
fetches again.

Why not the HW: a follower's HW lags the leader's by a fetch round trip, so truncating to it
on restart or on becoming follower throws away committed records (KIP-101 scenario 1), and
keeping everything up to it keeps records a later leader never had (scenario 2).

- Leader side, `check_follower_fetch`: KIP-595's diverging-epoch check done inline in the
  fetch (Kafka's `Partition.readRecords`), which replaced the separate OffsetsForLeaderEpoch
  round trip of KIP-101/KIP-279 with the same arithmetic.
- Follower side, `truncation_for_diverging_epoch`: Kafka's
  `AbstractFetcherThread.getOffsetTruncationState` (KIP-279). One answer is enough when the
  follower holds the diverging epoch; when it does not, it truncates to where its own history
  says that epoch would end, marks the truncation incomplete, and the next fetch (carrying
  its new last epoch) narrows it further. Each round removes at least one of the follower's
  epochs, so the loop ends.
"""

from dataclasses import dataclass
from typing import Sequence

from data_plane.replication.epoch_history import (
    NO_EPOCH,
    EpochEntry,
    end_offset_for_epoch,
)
from server_common.errors import ErrorCode


@dataclass(frozen=True)
class ServeFrom:
    """The follower's log matches ours up to `offset`: send records from there."""

    offset: int


@dataclass(frozen=True)
class DivergingEpoch:
    """The follower holds records we do not: its log must end at or before `end_offset`.

    `epoch` is the largest epoch in our log <= the follower's last fetched epoch, and
    `end_offset` where that epoch ends in our log.
    """

    epoch: int
    end_offset: int


@dataclass(frozen=True)
class FetchRejected:
    """The fetch cannot be served (fetch offset outside our log, or an epoch we cannot place)."""

    error: ErrorCode


FetchCheck = ServeFrom | DivergingEpoch | FetchRejected


@dataclass(frozen=True)
class Truncation:
    """Truncate the follower log to `offset` (keep records < offset), then fetch again.

    `complete` is False when the follower did not hold the diverging epoch: the next fetch
    may diverge again further back. The follower does not need to act on the flag (it
    always fetches again); it is reported for logs and tests.
    """

    offset: int
    complete: bool


def check_follower_fetch(
    *,
    leader_history: Sequence[EpochEntry],
    log_start_offset: int,
    log_end_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> FetchCheck:
    """Decide how the leader answers one partition of a follower fetch.

    `last_fetched_epoch` is NO_EPOCH when the follower's log is empty; then there is nothing
    to diverge and only the offset range is checked. A diverging answer takes precedence
    over an out-of-range fetch offset: a follower ahead of the leader usually holds records
    from an epoch the leader never finished, and must truncate rather than be reset.
    """
    assert 0 <= log_start_offset <= log_end_offset, (log_start_offset, log_end_offset)
    assert fetch_offset >= 0, fetch_offset
    if last_fetched_epoch != NO_EPOCH:
        ours = end_offset_for_epoch(leader_history, log_end_offset, last_fetched_epoch)
        if ours is None or fetch_offset < log_start_offset:
            return FetchRejected(ErrorCode.OFFSET_OUT_OF_RANGE)
        if ours.epoch < last_fetched_epoch or ours.end_offset < fetch_offset:
            return DivergingEpoch(ours.epoch, ours.end_offset)
    if not log_start_offset <= fetch_offset <= log_end_offset:
        return FetchRejected(ErrorCode.OFFSET_OUT_OF_RANGE)
    return ServeFrom(fetch_offset)


def truncation_for_diverging_epoch(
    diverging: DivergingEpoch,
    follower_history: Sequence[EpochEntry],
    follower_log_end_offset: int,
) -> Truncation:
    """Where a follower truncates after a DivergingEpoch answer (KIP-279).

    - The follower holds `diverging.epoch`: keep the part of that epoch both logs hold,
      min(leader's end, own end), and stop.
    - It does not: its own history places the epoch before the start of its next newer
      epoch; everything from there on was written in epochs the leader skipped (the leader's
      diverging epoch is the largest it has below the follower's last epoch). Truncate there
      and let the next fetch compare the older epoch.
    - It has no history at all: nothing to compare, fall back to the leader's end offset.
    """
    assert diverging.end_offset >= 0, diverging
    own = end_offset_for_epoch(follower_history, follower_log_end_offset, diverging.epoch)
    if own is None:
        truncation = Truncation(min(diverging.end_offset, follower_log_end_offset), True)
    elif own.epoch != diverging.epoch:
        truncation = Truncation(min(own.end_offset, follower_log_end_offset), False)
    else:
        truncation = Truncation(
            min(own.end_offset, diverging.end_offset, follower_log_end_offset), True
        )
    assert 0 <= truncation.offset <= follower_log_end_offset, (truncation, follower_log_end_offset)
    return truncation
