"""The broker's partitions and the data-plane operations on them (produce, fetch, offsets).

Plain Python in, plain Python out: ``service.py`` translates gRPC messages to and from these
calls. Runs entirely on the broker's asyncio loop, so no locks: every await point is
explicit, and reads of partition state between awaits are consistent.

Partitions come and go only through metadata: ``on_metadata(previous, new)`` compares two
images and creates, updates or deletes local replicas in metadata order.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import structlog

from data_plane.broker.config import BrokerConfig
from data_plane.broker.errors import PartitionError, not_leader, unknown_partition
from data_plane.broker.partition import LeadershipState, Partition
from data_plane.storage import (
    CorruptBatchError,
    LogManager,
    LogSettings,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from metadata_quorum import topic_config

log = structlog.get_logger("broker.replicas")

TopicPartition = tuple[str, int]
EARLIEST = -2
LATEST = -1


@dataclass
class LeaderHint:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass
class ProduceItem:
    topic: str
    partition: int
    batches: bytes
    leader_epoch: int = -1


@dataclass
class PartitionAnswer:
    """What every per-partition answer carries: the partition, an ErrorCode name, and a hint."""

    topic: str
    partition: int
    error: str = "NONE"
    message: str = ""
    leader: LeaderHint = field(default_factory=LeaderHint)


@dataclass
class ProduceResult(PartitionAnswer):
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


@dataclass
class FetchItem:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


@dataclass
class FetchResult(PartitionAnswer):
    high_watermark: int = -1
    log_start_offset: int = -1
    data: bytes = b""


@dataclass
class OffsetResult(PartitionAnswer):
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    """Owns every partition replica on this broker."""

    def __init__(self, config: BrokerConfig, logs: LogManager, clock_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.logs = logs
        self.clock_ms = clock_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_ids: dict[str, str] = {}
        self.image = None  # the last metadata image applied
        self._log = log.bind(broker_id=config.broker_id)
        self._high_watermarks = logs.read_high_watermarks()

    # ------------------------------------------------------------------ metadata

    def on_metadata(self, previous, image) -> None:
        """React to the difference between two metadata images, in metadata order."""
        self.image = image
        wanted: dict[TopicPartition, tuple[str, object]] = {}
        for name, topic in image.topics.items():
            for index, part in topic.partitions.items():
                if self.config.broker_id in part.replicas:
                    wanted[(name, index)] = (topic.topic_id, part)
        for tp in list(self.partitions):
            if tp not in wanted or self.topic_ids.get(tp[0]) != wanted[tp][0]:
                # Gone from this broker: the topic was deleted (or recreated under a new id),
                # or this broker is no longer a replica. Either way its data goes.
                self._remove_partition(tp)
        for (name, index), (topic_id, part) in wanted.items():
            self.topic_ids[name] = topic_id
            state = LeadershipState(part.leader, part.leader_epoch, part.partition_epoch, tuple(part.replicas), tuple(part.isr))
            existing = self.partitions.get((name, index))
            settings = self._settings(image, name)
            if existing is None:
                self._add_partition(name, index, state, settings)
            else:
                if existing.state != state:
                    self._change_leadership(existing, state)
                if previous is None or _configs(previous, name) != _configs(image, name):
                    existing.log.update_settings(settings)

    def _settings(self, image, topic: str) -> LogSettings:
        overrides = dict(self.config.topic_defaults)
        overrides.update(_configs(image, topic))
        return LogSettings.from_config(topic_config.effective(overrides))

    def _add_partition(self, topic: str, index: int, state: LeadershipState, settings: LogSettings) -> None:
        try:
            plog = self.logs.get_or_create(topic, index, settings)
        except StorageError as exc:
            self._log.error("partition offline: cannot open log", topic=topic, partition=index, error=str(exc))
            return
        hw = min(self._high_watermarks.get((topic, index), 0), plog.log_end_offset)
        partition = Partition(topic, index, self.config.broker_id, plog, state, high_watermark=hw)
        self.partitions[(topic, index)] = partition
        role = "leader" if partition.is_leader else "follower"
        self._log.info(
            f"became {role}",
            topic=topic,
            partition=index,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            log_end_offset=plog.log_end_offset,
            high_watermark=hw,
        )
        if partition.is_leader:
            partition.maybe_advance_high_watermark()

    def _change_leadership(self, partition: Partition, state: LeadershipState) -> None:
        partition.apply_leadership(state)
        self._log.info(
            "leadership changed",
            topic=partition.topic,
            partition=partition.partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            isr=list(state.isr),
        )
        partition.notify_waiters()

    def _remove_partition(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp)
        partition.notify_waiters()
        self.logs.delete(*tp)
        self._log.info("replica removed", topic=tp[0], partition=tp[1], leader_epoch=partition.state.leader_epoch)

    # ------------------------------------------------------------------ lookups

    def _partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        if self.image is not None and topic in self.image.topics and index in self.image.topics[topic].partitions:
            leader = self.image.topics[topic].partitions[index].leader
            if leader == self.config.broker_id:
                raise PartitionError(
                    "STORAGE_ERROR",
                    f"{topic}-{index} is assigned to broker {leader} but its log could not be opened there: "
                    "check that broker's data directory and logs, then restart it",
                )
            raise not_leader(topic, index, leader)
        raise unknown_partition(topic, index)

    def leader_hint(self, topic: str, index: int) -> LeaderHint:
        if self.image is None or topic not in self.image.topics:
            return LeaderHint()
        part = self.image.topics[topic].partitions.get(index)
        return LeaderHint(part.leader, part.leader_epoch) if part else LeaderHint()

    # ------------------------------------------------------------------ produce

    async def produce(self, acks: int, timeout_ms: int, items: Iterable[ProduceItem]) -> list[ProduceResult]:
        """Append each partition's batches; with acks=all wait until the HW covers them."""
        results: list[ProduceResult] = []
        waits: list[tuple[ProduceResult, Partition, int]] = []
        for item in items:
            result = ProduceResult(item.topic, item.partition)
            results.append(result)
            try:
                partition = self._partition(item.topic, item.partition)
                partition.require_leader(item.leader_epoch)
                end_offset = self._append(partition, item, acks, result)
            except PartitionError as exc:
                result.error, result.message = exc.code, exc.message
                result.leader = self.leader_hint(item.topic, item.partition)
                continue
            if acks == -1:
                waits.append((result, partition, end_offset))
        if waits:
            await self._await_high_watermarks(waits, timeout_ms)
        return results

    def _append(self, partition: Partition, item: ProduceItem, acks: int, result: ProduceResult) -> int:
        """Append as leader and fill ``result``; returns the offset after the last appended record."""
        settings = partition.log.settings
        if acks == -1 and len(partition.state.isr) < settings.min_insync_replicas:
            raise PartitionError(
                "NOT_ENOUGH_REPLICAS",
                f"{partition.name} has {len(partition.state.isr)} in-sync replicas, fewer than "
                f"min.insync.replicas={settings.min_insync_replicas}; nothing was written: retry once replicas catch up",
            )
        try:
            appended = partition.log.append(
                item.batches, assign_offsets=True, leader_epoch=partition.state.leader_epoch, now_ms=self.clock_ms()
            )
        except CorruptBatchError as exc:
            raise PartitionError("CORRUPT_MESSAGE", f"{partition.name}: {exc}; nothing was written: re-encode the batch") from None
        except RecordTooLargeError as exc:
            raise PartitionError("MESSAGE_TOO_LARGE", str(exc)) from None
        except StorageError as exc:
            partition.mark_offline(exc)
            self._log.error("log directory failed", topic=partition.topic, partition=partition.partition, error=str(exc))
            raise PartitionError("STORAGE_ERROR", f"{partition.name} went offline on broker {self.config.broker_id}: {exc}") from None
        result.base_offset = appended.first_offset
        result.log_append_time_ms = appended.log_append_time_ms
        result.log_start_offset = partition.log.log_start_offset
        partition.maybe_advance_high_watermark()
        partition.notify_waiters()
        return appended.last_offset + 1

    async def _await_high_watermarks(self, waits: list[tuple[ProduceResult, Partition, int]], timeout_ms: int) -> None:
        deadline = time.monotonic() + timeout_ms / 1000
        pending = list(waits)
        while pending:
            still: list[tuple[ProduceResult, Partition, int]] = []
            for result, partition, required in pending:
                if partition.high_watermark >= required:
                    continue
                if not partition.is_leader or self.partitions.get((partition.topic, partition.partition)) is not partition:
                    result.error = "NOT_LEADER_OR_FOLLOWER"
                    result.message = f"{partition.name} lost leadership before the write was replicated: its outcome is unknown, retry"
                    result.leader = self.leader_hint(partition.topic, partition.partition)
                    continue
                still.append((result, partition, required))
            pending = still
            remaining = deadline - time.monotonic()
            if not pending:
                return
            if remaining <= 0:
                for result, partition, _ in pending:
                    result.error = "REQUEST_TIMED_OUT"
                    result.message = (
                        f"{partition.name}: the high watermark did not reach the batch within {timeout_ms} ms; "
                        "the write may still commit: retry (idempotent producers do not duplicate)"
                    )
                return
            await _wait_any([p.waiter() for _, p, _ in pending], remaining)

    # ------------------------------------------------------------------ fetch

    async def fetch(self, max_wait_ms: int, min_bytes: int, max_bytes: int, items: list[FetchItem]) -> list[FetchResult]:
        """Long poll: read below the HW until ``min_bytes`` are available or ``max_wait_ms`` passes."""
        deadline = time.monotonic() + min(max_wait_ms, self.config.fetch_max_wait_ms_cap) / 1000
        while True:
            results, total, errors = self._read_all(items, max_bytes)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or errors or remaining <= 0:
                return results
            waiters = [p.waiter() for tp in {(i.topic, i.partition) for i in items} if (p := self.partitions.get(tp))]
            if not waiters:
                return results
            await _wait_any(waiters, remaining)

    def _read_all(self, items: list[FetchItem], max_bytes: int) -> tuple[list[FetchResult], int, bool]:
        results: list[FetchResult] = []
        total = 0
        errors = False
        for item in items:
            result = FetchResult(item.topic, item.partition)
            results.append(result)
            budget = min(item.max_bytes or max_bytes, max_bytes - total)
            try:
                partition = self._partition(item.topic, item.partition)
                partition.require_leader(item.leader_epoch)
                result.high_watermark = partition.high_watermark
                result.log_start_offset = partition.log.log_start_offset
                if budget > 0 or total == 0:
                    result.data = self._read(partition, item.offset, max(budget, 1))
                    total += len(result.data)
            except PartitionError as exc:
                result.error, result.message = exc.code, exc.message
                result.leader = self.leader_hint(item.topic, item.partition)
                errors = True
        return results, total, errors

    def _read(self, partition: Partition, offset: int, max_bytes: int) -> bytes:
        hw = partition.high_watermark
        if partition.log.log_start_offset <= offset <= partition.log.log_end_offset and offset >= hw:
            return b""
        try:
            return partition.log.read(offset, max_bytes, max_offset=hw).data
        except OffsetOutOfRangeError:
            raise PartitionError(
                "OFFSET_OUT_OF_RANGE",
                f"offset {offset} is outside {partition.name}'s range [{partition.log.log_start_offset}, {hw}]: "
                "seek to the earliest or latest offset",
            ) from None
        except StorageError as exc:
            partition.mark_offline(exc)
            raise PartitionError("STORAGE_ERROR", f"{partition.name} went offline on broker {self.config.broker_id}: {exc}") from None

    # ------------------------------------------------------------------ offsets

    def list_offsets(self, items: Iterable[tuple[str, int, int, int]]) -> list[OffsetResult]:
        """(topic, partition, timestamp, leader_epoch): -2 earliest, -1 latest (the HW), else by time."""
        results: list[OffsetResult] = []
        for topic, index, timestamp, epoch in items:
            result = OffsetResult(topic, index)
            results.append(result)
            try:
                partition = self._partition(topic, index)
                partition.require_leader(epoch)
            except PartitionError as exc:
                result.error, result.message = exc.code, exc.message
                result.leader = self.leader_hint(topic, index)
                continue
            result.leader_epoch = partition.state.leader_epoch
            if timestamp == EARLIEST:
                result.offset = partition.log.log_start_offset
            elif timestamp == LATEST:
                result.offset = partition.high_watermark
            else:
                found = partition.log.offset_for_timestamp(timestamp)
                if found is not None and found[0] < partition.high_watermark:
                    result.offset, result.timestamp = found
        return results

    # ------------------------------------------------------------------ housekeeping

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def run_retention(self) -> None:
        now = self.clock_ms()
        for partition in list(self.partitions.values()):
            if partition.offline_reason is None:
                try:
                    deleted = partition.log.apply_retention(now)
                except StorageError as exc:
                    partition.mark_offline(exc)
                    continue
                if deleted:
                    self._log.info("retention deleted segments", topic=partition.topic, partition=partition.partition,
                                   segments=deleted, log_start_offset=partition.log.log_start_offset)

    def run_flush(self) -> None:
        now = self.clock_ms()
        for partition in list(self.partitions.values()):
            if partition.offline_reason is None:
                try:
                    partition.log.maybe_flush(now)
                except StorageError as exc:
                    partition.mark_offline(exc)


def _configs(image, topic: str) -> dict[str, str]:
    return dict(image.configs.get(topic, {}))


async def _wait_any(events: list[asyncio.Event], timeout_s: float) -> None:
    """Wait until any of ``events`` is set or the timeout passes (the caller re-checks its condition)."""
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
