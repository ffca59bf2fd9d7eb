"""Reads: consumers' fetches (below the HW), followers' replica fetches (to the LEO, moving
their progress in the leader core; one partition at a time, for the follower's fetch session
in `fetch_session.py`), list offsets, and other replicas' repair reads.

Fetches are long polls: a read that has less than ``min_bytes`` to give waits for any of its
partitions' events (HW moved, log end moved) instead of polling, until ``max_wait_ms``. Only
batches a consumer gets records from count (``isolation.readable_bytes``): transaction
markers and aborted batches are answered, with the ``next_offset`` past them, only once the
wait is over or with readable data.
Every partition is reached through the replica manager, which also carries out what a
follower's fetch made the partition decide.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from data_plane.partition_errors import PartitionError
from data_plane.broker.isolation import read_end, readable_bytes
from data_plane.broker.partition import Partition
from data_plane.broker.replica_access import ServedReplicas
from data_plane.requests import EpochEndResult, FetchItem, FetchResult, OffsetResult, ReplicaFetchResult
from data_plane.wakeups import Wakeups, wait_until_woken, woken_by
from data_plane.replication.divergence import DivergingEpoch, FetchRejected, ServeFrom
from server_common.errors import ErrorCode
from data_plane.replication.epoch_history import end_offset_for_epoch
from data_plane.replication.partition_state import BrokerStatus, FollowerFetch
from data_plane.storage import StorageError

EARLIEST = -2
LATEST = -1


class FetchServing:
    def __init__(self, replicas: ServedReplicas) -> None:
        self._replicas = replicas

    async def fetch(
        self, max_wait_ms: int, min_bytes: int, max_bytes: int, items: list[FetchItem], read_committed: bool = False
    ) -> list[FetchResult]:
        """Long poll: read below the HW (``read_committed``: below the LSO, with the aborted
        transactions the answer overlaps) until ``min_bytes`` are available or ``max_wait_ms``
        passes. (Followers' fetches are long polls of their fetch sessions: `fetch_session.py`.)"""
        return await self._long_poll(
            max_wait_ms, min_bytes, [(i.topic, i.partition) for i in items],
            lambda: self._read_all(items, max_bytes, read_committed), Partition.waiter,
        )

    async def _long_poll(
        self, max_wait_ms: int, min_bytes: int, tps: list[tuple[str, int]], read, waiter: Callable[[Partition], Wakeups]
    ) -> list:
        """Call ``read`` (-> results, bytes, answer_now) until it has ``min_bytes`` or something
        to say, woken by the ``waiter`` wakeups of the partitions in ``tps`` instead of polling."""
        assert max_wait_ms >= 0 and min_bytes >= 0, (max_wait_ms, min_bytes)
        deadline = time.monotonic() + min(max_wait_ms, self._replicas.config.fetch_max_wait_ms_cap) / 1000
        partitions = self._replicas.partitions
        while True:
            sources = [waiter(p) for tp in set(tps) if (p := partitions.get(tp))]
            with woken_by(sources) as woken:  # registered before the read: no change is missed
                results, total, answer_now = read()
                remaining = deadline - time.monotonic()
                if total >= min_bytes or answer_now or remaining <= 0 or not sources:
                    return results
                await wait_until_woken(woken, remaining)

    def _read_all(self, items: list[FetchItem], max_bytes: int, read_committed: bool) -> tuple[list[FetchResult], int, bool]:
        results: list[FetchResult] = []
        total = readable = 0
        errors = False
        for item in items:
            result = FetchResult(item.topic, item.partition, next_offset=item.offset)
            results.append(result)
            budget = min(item.max_bytes or max_bytes, max_bytes - total)
            try:
                partition = self._replicas.lookup(item.topic, item.partition)
                partition.require_leader(item.leader_epoch)
                partition.check_high_watermark_settled()
                result.high_watermark = partition.high_watermark
                result.log_start_offset = partition.log_start_offset
                result.last_stable_offset = partition.last_stable_offset
                upto = result.last_stable_offset if read_committed else partition.high_watermark
                if budget > 0 or total == 0:
                    result.data = self._read(partition, item.offset, max(budget, 1), upto)
                    total += len(result.data)
                    if read_committed and result.data:
                        result.aborted = partition.aborted_transactions(item.offset, upto)
                    result.next_offset, result.last_leader_epoch = read_end(result.data, item.offset)
                    readable += readable_bytes(result.data, result.aborted)
            except PartitionError as exc:
                self._replicas.fail(result, exc)
                errors = True
        return results, readable, errors

    def serve_follower(
        self, topic: str, index: int, fetch: FollowerFetch, broker: BrokerStatus | None, max_bytes: int, now_ms: int
    ) -> tuple[ReplicaFetchResult, Partition | None, bool]:
        """One partition of a follower's fetch (through its fetch session): track its progress
        in the leader core, tell it where its log diverged from ours, or serve records up to
        the LEO (not the HW), at most ``max_bytes`` (none when 0). Returns the answer, the
        partition (None if there is no such replica here) and whether records remain unsent
        for lack of bytes."""
        result = ReplicaFetchResult(topic, index)
        try:
            partition = self._replicas.lookup(topic, index)
        except PartitionError as exc:
            self._replicas.fail(result, exc)
            return result, None, False
        try:
            check, ready = partition.on_follower_fetch(fetch, broker, now_ms)
        except PartitionError as exc:
            self._replicas.fail(result, exc)
            return result, partition, False
        self._replicas.carry_out(partition, ready)
        result.high_watermark = partition.high_watermark
        result.log_start_offset = partition.log_start_offset
        result.log_end_offset = end = partition.log_end_offset
        if isinstance(check, DivergingEpoch):
            result.diverging = check
        elif isinstance(check, FetchRejected):
            result.error = PartitionError(check.error, f"{partition.name}: fetch offset {fetch.fetch_offset} (last epoch "
                                          f"{fetch.last_fetched_epoch}) cannot be served from [{result.log_start_offset}, {end}]")
        elif isinstance(check, ServeFrom) and check.offset < end:
            if max_bytes <= 0:
                return result, partition, True
            try:
                result.data = self._read(partition, check.offset, max_bytes, end)
            except PartitionError as exc:
                self._replicas.fail(result, exc)
        return result, partition, False

    def repair_read(self, items: list[FetchItem]) -> list[FetchResult]:
        """Serve another replica's repair: our own copy from ``offset``, up to our log end,
        whatever our role (the asker checks offsets, epochs and CRCs before using it)."""
        results: list[FetchResult] = []
        for item in items:
            result = FetchResult(item.topic, item.partition)
            results.append(result)
            try:
                partition = self._replicas.lookup(item.topic, item.partition)
                if partition.offline_reason is not None:
                    raise PartitionError(ErrorCode.STORAGE_ERROR, f"{partition.name} is offline on broker "
                                         f"{self._replicas.config.broker_id}: ask another replica")
                result.data = self._read(partition, item.offset, max(item.max_bytes, 1), partition.log_end_offset)
            except PartitionError as exc:
                self._replicas.fail(result, exc)
        return results

    def list_offsets(self, items: Iterable[tuple[str, int, int, int]], read_committed: bool = False) -> list[OffsetResult]:
        """(topic, partition, timestamp, leader_epoch): -2 earliest, -1 latest (the HW; the LSO
        with ``read_committed``), else by time."""
        results: list[OffsetResult] = []
        for topic, index, timestamp, epoch in items:
            result = OffsetResult(topic, index)
            results.append(result)
            try:
                partition = self._replicas.lookup(topic, index)
                partition.require_leader(epoch)
                if timestamp != EARLIEST:
                    partition.check_high_watermark_settled()
            except PartitionError as exc:
                self._replicas.fail(result, exc)
                continue
            result.leader_epoch = partition.state.leader_epoch
            if timestamp == EARLIEST:
                result.offset = partition.log_start_offset
            elif timestamp == LATEST:
                result.offset = partition.last_stable_offset if read_committed else partition.high_watermark
            else:
                result.offset, result.timestamp = partition.offset_for_timestamp(timestamp) or (-1, -1)
        return results

    def epoch_end_offsets(self, items: Iterable[tuple[str, int, int, int]]) -> list[EpochEndResult]:
        """(topic, partition, epoch asked about, current leader epoch): where that epoch ends
        in this leader's log (KIP-320's truncation check for consumers). Not capped at the HW:
        a consumer's position is at most the HW, so the log end never reads as a truncation."""
        results: list[EpochEndResult] = []
        for topic, index, asked, current in items:
            result = EpochEndResult(topic, index)
            results.append(result)
            try:
                partition = self._replicas.lookup(topic, index)
                partition.require_leader(current)
            except PartitionError as exc:
                self._replicas.fail(result, exc)
                continue
            answer = end_offset_for_epoch(partition.epoch_entries, partition.log_end_offset, asked)
            if answer is not None:
                result.leader_epoch, result.end_offset = answer.epoch, answer.end_offset
        return results

    def _read(self, partition: Partition, offset: int, max_bytes: int, upto: int) -> bytes:
        try:
            return partition.read(offset, max_bytes, upto)
        except StorageError as exc:
            raise self._replicas.take_offline(partition, exc) from None
