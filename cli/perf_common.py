"""What the ``kraftlog perf`` commands share: percentiles, fixed-rate pacing, progress timing.

Pacing follows absolute deadlines (``start + i / rate``), so a late wake-up shortens the next
wait instead of pushing every later send back: the rate asked for is the rate produced, and
how far the loop fell behind its schedule is reported rather than silently absorbed.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Sequence

from server_common.errors import ErrorCode

PROGRESS_INTERVAL_S = 2.0


async def pace(pause_s: float) -> None:
    """The gap after one measured message before the next (`perf latency --pause-ms`): pacing,
    not a wait for anything."""
    if pause_s > 0:
        await asyncio.sleep(pause_s)


def percentiles(samples_ms: Sequence[float], weights: Sequence[int] | None = None) -> dict[str, float]:
    """p50/p99/p99.9 and max of ``samples_ms``; with ``weights`` each sample stands for that
    many records (a batch's latency counts once per record in it)."""
    if not samples_ms:
        return {"p50": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    pairs = sorted(zip(samples_ms, weights if weights is not None else [1] * len(samples_ms)))
    total = sum(weight for _, weight in pairs)
    result: dict[str, float] = {}
    for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        threshold = q * total
        running = 0
        for value, weight in pairs:
            running += weight
            if running >= threshold:
                result[name] = round(value, 3)
                break
    result["max"] = round(pairs[-1][0], 3)
    return result


def topic_partitions(bootstrap: str, topic: str) -> list[int]:
    """The topic's partition numbers, sorted (a missing topic is a one-line error)."""
    from cli.bootstrap import partitions_of

    return partitions_of(bootstrap, topic)


TOPIC_READY_TIMEOUT_S = 60.0


def ensure_one_partition_topic(bootstrap: str, topic: str, replication_factor: int, configs: dict[str, str]) -> None:
    """Create the one-partition topic a perf command measures on (an existing one is used as it
    is) and wait until the brokers' metadata gives it a leader, so that the producer starts
    without its "waiting for the topic" warning telling the user to create it."""
    from data_plane.client import Admin
    from data_plane.client.errors import KraftlogError
    from metadata_quorum.controller_client import ControllerError
    from server_common.waiting import wait_for

    with Admin(bootstrap) as admin:
        try:
            admin.create_topics([(topic, 1, replication_factor)], configs)
        except ControllerError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

        def has_leader() -> bool:
            try:
                return admin.describe_topics([topic])[topic].partitions[0].leader >= 0
            except KraftlogError as exc:  # not in the brokers' metadata yet
                if exc.error is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
                return False

        wait_for(has_leader, TOPIC_READY_TIMEOUT_S, f"partition 0 of {topic} to have a leader in the brokers' metadata")


class DeliveryLog:
    """Outcomes of paced sends, recorded by the producer's sender thread (delivery callbacks):
    which sequence numbers were acknowledged, when, and how long each took."""

    def __init__(self) -> None:
        self.acked_seqs = array("q")
        self.acked_at_s = array("d")  # time.monotonic(), non-decreasing: one sender thread appends
        self.latencies_ms = array("d")
        self.failed = 0
        self.first_error = ""

    @property
    def acked(self) -> int:
        return len(self.acked_seqs)

    def callback(self, seq: int, sent_ns: int) -> Callable[[object, object], None]:
        """The producer's ``on_delivery`` for the record numbered ``seq``, sent at ``sent_ns``
        (``time.monotonic_ns()``)."""

        def delivered(error: object, metadata: object) -> None:
            if error is None:
                now_ns = time.monotonic_ns()
                self.acked_seqs.append(seq)
                self.acked_at_s.append(now_ns / 1e9)
                self.latencies_ms.append((now_ns - sent_ns) / 1e6)
            else:
                self.failed += 1
                self.first_error = self.first_error or str(error)

        return delivered

    def acked_after(self, since_s: float) -> bool:
        """Whether any acknowledgement arrived after ``since_s`` (monotonic seconds)."""
        return bool(self.acked_at_s) and self.acked_at_s[-1] > since_s

    def first_ack_after(self, since_s: float) -> float | None:
        """When the first acknowledgement after ``since_s`` arrived (monotonic seconds), or None."""
        times = self.acked_at_s
        at = bisect.bisect_right(times, since_s)
        return times[at] if at < len(times) else None

    def longest_gap_ms(self, start_s: float, end_s: float) -> float:
        """The longest time without an acknowledgement between ``start_s`` and ``end_s``:
        what an application writing through the producer saw as an outage."""
        times = self.acked_at_s
        inside = times[bisect.bisect_right(times, start_s) : bisect.bisect_right(times, end_s)]
        edges = [start_s, *inside, end_s]
        return round(max(b - a for a, b in zip(edges, edges[1:])) * 1000, 3)


class Schedule:
    """Fixed-rate send times: the i-th send is due at ``start + i / rate``."""

    def __init__(self, rate_per_s: float) -> None:
        if rate_per_s <= 0:
            raise ValueError("--rate must be positive")
        self.interval_s = 1.0 / rate_per_s
        self.started = time.monotonic()
        self.lag_s_max = 0.0  # how far behind its schedule the sending loop got

    def ticks(self, stop: threading.Event, duration_s: float | None = None) -> Iterator[int]:
        """Yields 0, 1, 2, ... each at its due time, until ``stop`` is set or ``duration_s`` has
        passed. Waits on ``stop`` (not a bare sleep) so that stopping is immediate."""
        end = float("inf") if duration_s is None else self.started + duration_s
        i = 0
        while not stop.is_set():
            due = self.started + i * self.interval_s
            if due >= end:
                return
            wait_s = due - time.monotonic()
            if wait_s > 0:
                if stop.wait(wait_s):
                    return
            else:
                self.lag_s_max = max(self.lag_s_max, -wait_s)
            yield i
            i += 1


class Ticker:
    """True from ``due()`` once per interval: when to print the next progress line."""

    def __init__(self, interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.started = self._last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return False
        self._last = now
        return True

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started
