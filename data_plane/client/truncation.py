"""KIP-320 for consumers: is a consumer's position still on the leader's log?

A consumer only reads below the high watermark, so a clean leader change never takes a record
it has read away. An unclean election can: the new leader lacks the tail the consumer read,
and later writes reuse those offsets. A consumer that just kept fetching from its position
would then skip the new records at the reused offsets (or, past the new log end, reset and
re-read silently). So after a leader change, and after resuming from a committed offset, the
consumer asks the leader where the epoch of the last record it consumed ends in its log
(OffsetForLeaderEpoch) and compares, as Kafka's consumer does
(``SubscriptionState.maybeCompleteValidation``):

- the epoch ends at or after the position: the position stands;
- it ends before: the log was truncated below the position, and the first offset known to
  diverge is that end offset; the consumer moves there (reading what replaced the lost
  records), or raises `LogTruncationError` when ``auto_offset_reset`` is "none";
- the leader holds no record of that epoch or an earlier one: nothing tells where the logs
  diverge, so ``auto_offset_reset`` decides, as for an offset out of range.

This module is the decision; ``consumer.py`` asks and applies it.
"""

from __future__ import annotations

from typing import NamedTuple

from data_plane.client.errors import KraftlogError
from data_plane.client.metadata_cache import TopicPartition
from data_plane.client.offset_lookup import EpochEnd


class Position(NamedTuple):
    """Where a consumer stands: the next offset and the leader epoch of the record before it."""

    offset: int
    last_epoch: int


class Diverged(NamedTuple):
    """The log was truncated below the position: records from ``offset`` on differ (``offset``
    is None when the leader cannot say where)."""

    offset: int | None
    epoch: int


def check_position(position: Position, answer: EpochEnd) -> Diverged | None:
    """None when ``position`` is still on the leader's log, else where it diverged."""
    if answer.end_offset < 0 or answer.leader_epoch < 0:
        return Diverged(None, -1)
    if answer.end_offset < position.offset:
        return Diverged(answer.end_offset, answer.leader_epoch)
    return None


class LogTruncationError(KraftlogError):
    """Records the consumer read are gone from the partition's log (an unclean leader
    election truncated it), and ``auto_offset_reset`` is "none"."""

    def __init__(self, tp: TopicPartition, position: Position, diverged: Diverged) -> None:
        self.tp = tp
        self.position = position
        self.divergent_offset = diverged.offset
        where = (f"from offset {diverged.offset} on" if diverged.offset is not None
                 else "and the leader holds no record of its epoch or an earlier one")
        then = (f"seek({tp!r}, {diverged.offset}) to read the records that replaced them" if diverged.offset is not None
                else "seek to an offset of your choice")
        super().__init__(
            "LOG_TRUNCATION",
            f"{tp[0]}-{tp[1]}: the log was truncated below this consumer's position {position.offset} "
            f"(last record read in leader epoch {position.last_epoch}), {where}: records it read are no "
            f"longer in the log (an unclean leader election); {then}, or use auto_offset_reset='earliest' or "
            "'latest' to move there automatically",
            retriable=False,
        )
