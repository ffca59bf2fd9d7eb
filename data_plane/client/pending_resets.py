"""Partitions whose offset reset (auto_offset_reset "earliest"/"latest") found no answer yet.

A partition without a reachable leader must not hold up the others (Kafka's consumer keeps
fetching what it can and retries the reset in the background), and must not cost a request
or a log line per poll either: each failed attempt doubles the wait before the next, from
``backoff_s`` up to ``backoff_max_s``, and a partition's warning is logged at most once per
``warn_interval_s``. A pure core: the clock is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from data_plane.client.metadata_cache import TopicPartition


class _Pending(NamedTuple):
    retry_at: float
    backoff_s: float
    warned_at: float | None


class PendingResets:
    """Per partition: when its reset may be tried again, and when it last warned."""

    def __init__(self, backoff_s: float, backoff_max_s: float, warn_interval_s: float) -> None:
        self._backoff_s = backoff_s
        self._backoff_max_s = max(backoff_max_s, backoff_s)
        self._warn_interval_s = warn_interval_s
        self._pending: dict[TopicPartition, _Pending] = {}

    def due(self, tps: Iterable[TopicPartition], now: float) -> list[TopicPartition]:
        """Those of ``tps`` never tried or whose backoff is over."""
        return [tp for tp in tps if tp not in self._pending or self._pending[tp].retry_at <= now]

    def failed(self, tp: TopicPartition, now: float) -> bool:
        """An attempt got no answer: backs off further. True when a warning is due."""
        held = self._pending.get(tp)
        backoff_s = self._backoff_s if held is None else min(held.backoff_s * 2, self._backoff_max_s)
        warned_at = None if held is None else held.warned_at
        warn = warned_at is None or now - warned_at >= self._warn_interval_s
        self._pending[tp] = _Pending(now + backoff_s, backoff_s, now if warn else warned_at)
        return warn

    def retry_in(self, tp: TopicPartition, now: float) -> float:
        """Seconds until ``tp`` may be tried again (0 when it may be now)."""
        held = self._pending.get(tp)
        return 0.0 if held is None else max(held.retry_at - now, 0.0)

    def next_retry_in(self, now: float) -> float | None:
        """Seconds until the first pending partition may be tried again; None: none pending."""
        return min((self.retry_in(tp, now) for tp in self._pending), default=None)

    def resolved(self, tps: Iterable[TopicPartition]) -> None:
        """``tps`` have a position (reset answered, seek): nothing pending for them."""
        for tp in tps:
            self._pending.pop(tp, None)

    def keep_only(self, tps: set[TopicPartition]) -> None:
        """The assignment is now ``tps``: forgets the others."""
        self._pending = {tp: held for tp, held in self._pending.items() if tp in tps}

    def __contains__(self, tp: object) -> bool:
        return tp in self._pending
