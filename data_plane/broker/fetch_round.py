"""What one replica fetch round sends, and how long a round with nothing to send waits.

Pure: the follower's fetcher (`replica_fetcher.LeaderFetcher`) describes each of its
partitions (fetchable, or the reason it is not) and its per-partition backoffs; this module
decides. Two rules keep a replica from going quiet for good:

- A round with nothing to send waits at most ``IDLE_RECHECK_S`` (or until the earliest
  backoff ends), never longer: metadata wakes the fetcher at once, and this bound catches
  any change that arrives some other way (a log going offline, a missed wake).
- Every partition held back for a reason other than a backoff is reported, so the fetcher
  logs when a partition stops being fetched and why, instead of skipping it in silence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

TopicPartition = tuple[str, int]

# The longest a fetcher with partitions ever waits before looking at them again.
IDLE_RECHECK_S = 1.0


@dataclass(frozen=True)
class RoundPlan:
    """``send``: the partitions this round asks for, in order; ``skipped``: why each partition
    that is neither sent nor backing off is held back; ``idle_s``: how long to wait before the
    next round when ``send`` is empty."""

    send: tuple[TopicPartition, ...]
    skipped: dict[TopicPartition, str]
    idle_s: float


def plan_round(
    blocked: Mapping[TopicPartition, str | None], backoff_until: Mapping[TopicPartition, float], now: float
) -> RoundPlan:
    """``blocked`` maps each of the fetcher's partitions to None (it can be fetched) or the
    reason it cannot; ``backoff_until`` holds the monotonic time each backing-off partition
    may be fetched again."""
    waiting = {tp: until for tp, until in backoff_until.items() if until > now and tp in blocked}
    send = tuple(tp for tp in sorted(blocked) if blocked[tp] is None and tp not in waiting)
    skipped = {tp: reason for tp, reason in blocked.items() if reason is not None}
    idle_s = min([IDLE_RECHECK_S, *(until - now for until in waiting.values())])
    return RoundPlan(send, skipped, idle_s)


def skip_changes(
    before: Mapping[TopicPartition, str], plan: RoundPlan
) -> tuple[dict[TopicPartition, str], tuple[TopicPartition, ...]]:
    """What to log between two rounds: partitions newly held back (or for a new reason),
    and held-back partitions this round fetches again."""
    held = {tp: reason for tp, reason in plan.skipped.items() if before.get(tp) != reason}
    resumed = tuple(tp for tp in plan.send if tp in before)
    return held, resumed
