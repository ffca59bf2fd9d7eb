"""Replicas whose log failed after it was created (an append, a flush, a checkpoint: EIO,
ENOSPC, EMFILE) come back without a restart once the cause is gone.

``ReopenBackoff`` is the pure core (the clock is passed in): each offline replica is tried
``first_s`` after it went offline, then after a wait that doubles up to ``max_s`` while it
stays offline, so a disk that stays broken costs a probe write every half minute per
replica and one log line per attempt at most. ``OfflineRecovery.run`` is the shell: every
``TICK_S`` it tries the replicas that are due (``ReplicaManager.reopen_offline``: a probe
write in the replica's directory, then the log loaded as after a crash and the replica
following the leader the controller elected meanwhile).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import structlog

from data_plane.storage.errors import StorageError

log = structlog.get_logger("storage")

TICK_S = 0.5
FIRST_S = 1.0
MAX_S = 30.0

TopicPartition = tuple[str, int]


class ReopenBackoff:
    """When each offline replica may be tried again."""

    def __init__(self, first_s: float = FIRST_S, max_s: float = MAX_S) -> None:
        self._first_s, self._max_s = first_s, max(max_s, first_s)
        self._next: dict[TopicPartition, tuple[float, float]] = {}  # (retry at, current wait)

    def due(self, offline: Iterable[TopicPartition], now: float) -> list[TopicPartition]:
        """Those of ``offline`` whose wait is over (one seen for the first time waits ``first_s``);
        forgets the replicas no longer offline."""
        offline = set(offline)
        self._next = {tp: at for tp, at in self._next.items() if tp in offline}
        for tp in offline - self._next.keys():
            self._next[tp] = (now + self._first_s, self._first_s)
        return sorted(tp for tp, (at, _) in self._next.items() if at <= now)

    def failed(self, tp: TopicPartition, now: float) -> float:
        """An attempt failed: the wait doubles; returns it."""
        wait = min(self._next.get(tp, (now, self._first_s / 2))[1] * 2, self._max_s)
        self._next[tp] = (now + wait, wait)
        return wait


class OfflineRecovery:
    def __init__(self, replicas) -> None:
        self._replicas = replicas
        self._backoff = ReopenBackoff()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        partitions = self._replicas.partitions
        candidates = self._replicas.taken_offline
        offline = [tp for tp in candidates if tp in partitions and partitions[tp].offline_reason is not None]
        candidates.intersection_update(offline)  # back online or removed: no longer looked at
        for tp in self._backoff.due(offline, now):
            was = partitions[tp]
            try:
                if not self._replicas.reopen_offline(tp):
                    return  # metadata is being applied: the next tick
            except StorageError as exc:
                wait = self._backoff.failed(tp, now)
                log.warning("partition still offline: reopening its log failed", topic=tp[0], partition=tp[1], error=str(exc),
                            retry_in_s=wait)
                continue
            log.info("partition back online: log reopened", **partitions[tp].fields(), offline_reason=was.offline_reason)
