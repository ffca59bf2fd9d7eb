"""The broker's partitions and the data-plane operations on them (produce, fetch, offsets).

Plain Python in, plain Python out: ``service.py`` translates gRPC messages to and from these
calls. Runs entirely on the broker's asyncio loop, so no locks: every await point is
explicit, and reads of partition state between awaits are consistent.

Partitions come and go only through metadata: ``on_metadata(delta, image)`` creates, updates or
deletes the local replicas the metadata delta says changed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import structlog

from data_plane.broker.config import BrokerConfig, UnsafeBehaviour
from data_plane.broker.errors import PartitionError, not_leader, unknown_partition
from data_plane.broker.partition import LeadershipState, Partition
from data_plane.record_batch import BatchHeader
from data_plane.replication.divergence import DivergingEpoch, FetchRejected, ServeFrom
from data_plane.replication.errors import ErrorCode
from data_plane.replication.partition_state import AlterPartitionCommitted, BrokerStatus, FollowerFetch, IsrProposal
from data_plane.replication.producer_state import NO_PRODUCER_ID, Duplicate, ProducerState, Rejected
from data_plane.storage import (
    CorruptBatchError,
    DamagedRange,
    DamagedRangeError,
    InvalidRecordError,
    LogManager,
    LogSettings,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from metadata_quorum import topic_config
from metadata_quorum.delta import MetadataDelta
from metadata_quorum.image import MetadataImage, PartitionImage, TopicImage

log = structlog.get_logger("broker.replicas")

TopicPartition = tuple[str, int]
APPLY_SLICE_MS = 20  # longest stretch of metadata application between yields to the event loop
ISR_SWEEP_INTERVAL_MS = 1000  # how often tick() looks at every leader for lagging followers
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
class ReplicaFetchItem:
    topic: str
    partition: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int


@dataclass
class ReplicaFetchResult(PartitionAnswer):
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: DivergingEpoch | None = None
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
        self.image = None  # the metadata image being applied or last applied
        self._applying = False  # on_metadata is creating or changing replicas
        self._last_isr_sweep_ms = 0
        self._log = log.bind(broker_id=config.broker_id)
        self._high_watermarks = logs.read_high_watermarks()
        self._scrub_next = 0  # index (in sorted order) of the partition the scrub works on
        # Set by the server: where ISR proposals go (AlterPartition) and who follows leaders.
        self.propose_isr: Callable[[Partition, IsrProposal], None] = lambda partition, proposal: None
        self.followers_changed: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ metadata

    async def on_metadata(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """React to what ``delta`` (one metadata batch, replayed) changed for this broker's
        replicas, never to the rest of the cluster: replicas of deleted topics and replicas
        reassigned away go first, then each changed topic takes its new settings and its
        changed partitions are created or become leader or follower. ``image`` is the image
        the delta leads to. A delta that failed half way comes again (the metadata stream
        restarts after the last offset applied, on the same base image) and every step is
        idempotent, so the next attempt completes it.

        Creating thousands of replicas takes seconds (each new log fsyncs its files), so the
        work yields to the event loop every APPLY_SLICE_MS: heartbeats, fetches and produces
        go on meanwhile, and requests for replicas not created yet get a retriable answer."""
        changes = delta.local_changes(self.config.broker_id, image)
        self.image = image
        self._applying = True
        try:
            moved = changes.brokers_changed  # the fetchers may have to reconnect
            for topic in changes.deleted_topics:
                moved |= self._remove_topic(topic)
            for tp in changes.stopped:
                if tp in self.partitions:  # reassigned away from this broker
                    self._remove_partition(tp)
                    moved = True
            for name in dict.fromkeys([*changes.configs, *changes.replicas]):
                moved |= await self._apply_topic_change(image, image.topics[name], changes.replicas.get(name, {}), name in changes.configs)
        finally:
            self._applying = False
        if moved:
            self.followers_changed()

    def _remove_topic(self, topic: TopicImage) -> bool:
        """Drop the local replicas (and their data) of a deleted topic; True if there were any."""
        local = [(topic.name, index) for index in topic.partitions if (topic.name, index) in self.partitions]
        for tp in local:
            self._remove_partition(tp)
        self.topic_ids.pop(topic.name, None)
        return bool(local)

    async def _apply_topic_change(self, image: MetadataImage, topic: TopicImage, changed: dict[int, PartitionImage], configs_changed: bool) -> bool:
        """Bring this broker's replicas of ``topic`` in line with ``image``: the settings of
        every local replica if its configs changed, and the ``changed`` partitions (this
        broker is a replica of each). True if a replica came or changed leader (the fetchers
        must follow)."""
        name = topic.name
        settings = self._settings(image, name)
        if configs_changed:
            for index in topic.partitions:
                partition = self.partitions.get((name, index))
                if partition is not None:
                    partition.log.update_settings(settings)
        moved = False
        slice_started = time.monotonic()
        for index, part in changed.items():
            if time.monotonic() - slice_started > APPLY_SLICE_MS / 1000:
                await asyncio.sleep(0)
                slice_started = time.monotonic()
            assert self.config.broker_id in part.replicas, "the delta hands over only this broker's replicas"
            self.topic_ids[name] = topic.topic_id
            state = LeadershipState(part.leader, part.leader_epoch, part.partition_epoch, tuple(part.replicas), tuple(part.isr))
            existing = self.partitions.get((name, index))
            if existing is None:
                self._add_partition(name, index, state, settings)
                moved = True
            elif existing.state != state:
                if existing.is_leader and state.leader != self.config.broker_id and self.config.unsafe is UnsafeBehaviour.SKIP_EPOCH_FENCING:
                    self._log.warning("unsafe: ignoring a newer leader epoch, still leading", **_fields(existing),
                                      new_leader=state.leader, new_leader_epoch=state.leader_epoch)
                    continue
                moved |= existing.state.leader != state.leader
                self._change_leadership(existing, state)
        return moved

    def _propose(self, partition: Partition, proposal: IsrProposal) -> None:
        """Send an ISR proposal to the controller, which checks its epochs before committing.

        Unsafe ``skip-epoch-fencing``: the leader adopts its own proposal at once, as a leader
        with no epoch-checked controller would (a deposed leader shrinks the ISR to itself)."""
        if self.config.unsafe is not UnsafeBehaviour.SKIP_EPOCH_FENCING:
            self.propose_isr(partition, proposal)
            return
        committed = AlterPartitionCommitted(proposal.leader_epoch, proposal.partition_epoch + 1, proposal.new_isr)
        follow_up = partition.on_alter_partition_result(committed, self.clock_ms())
        if follow_up is not None:
            self._propose(partition, follow_up)

    def unsafe_leaderships(self) -> dict[TopicPartition, int]:
        """Partitions this broker still leads against metadata (only with skip-epoch-fencing):
        its Metadata answers name itself as their leader, with the image's epoch."""
        return {
            tp: self.config.broker_id
            for tp, p in self.partitions.items()
            if p.leader_core is not None and self.image is not None
            and self.image.topics[tp[0]].partitions[tp[1]].leader != self.config.broker_id
        }

    def _settings(self, image, topic: str) -> LogSettings:
        overrides = dict(self.config.topic_defaults)
        overrides.update(_configs(image, topic))
        return LogSettings.from_config(topic_config.effective(overrides))

    def _add_partition(self, topic: str, index: int, state: LeadershipState, settings: LogSettings) -> None:
        try:
            plog = self.logs.get_or_create(topic, index, settings)
            partition = Partition(
                topic, index, self.config.broker_id, plog, state,
                high_watermark=min(self._high_watermarks.get((topic, index), 0), plog.log_end_offset),
                skip_epoch_fencing=self.config.unsafe is UnsafeBehaviour.SKIP_EPOCH_FENCING,
            )
            partition.producers.rebuild_from_batches(plog.batch_headers(plog.log_start_offset))
        except StorageError as exc:
            self._log.error("partition offline: cannot open log", topic=topic, partition=index, error=str(exc))
            return
        self.partitions[(topic, index)] = partition
        self._take_role(partition, state, "new replica")

    def _change_leadership(self, partition: Partition, state: LeadershipState) -> None:
        if state.leader_epoch == partition.state.leader_epoch and partition.is_leader == (state.leader == self.config.broker_id):
            proposal = partition.update_within_epoch(state, self.clock_ms())
            self._log.info("partition changed", **_fields(partition), isr=list(state.isr), replicas=list(state.replicas))
            if proposal is not None:
                self._propose(partition, proposal)
            return
        self._take_role(partition, state, "leader epoch changed")

    def _take_role(self, partition: Partition, state: LeadershipState, why: str) -> None:
        """Become leader or follower for ``state``'s leader epoch.

        Leader epochs only grow, so a state older than the newest epoch in the log is
        metadata from the past (a restarting broker streams the metadata log from its start
        and sees every old leadership go by). Leading in it would re-assign that old epoch at
        the log end and erase the epoch history after it, and followers would then truncate
        by that wrong history; so the replica only steps aside and waits for current metadata."""
        if partition.offline_reason is not None:
            partition.state = state
            return
        log_epoch = partition.log.leader_epoch_cache.latest_epoch
        if state.leader_epoch < log_epoch:
            partition.become_follower(state)
            self._log.info("metadata older than the log; waiting for newer metadata", **_fields(partition), reason=why,
                           leader=state.leader, log_latest_epoch=log_epoch, log_end_offset=partition.log.log_end_offset)
            return
        if state.leader == self.config.broker_id:
            partition.become_leader(state, partition.log.settings.min_insync_replicas, self.clock_ms())
            role = "leader"
        else:
            partition.become_follower(state)
            if self.config.unsafe is UnsafeBehaviour.TRUNCATE_TO_HW:
                self.truncate_follower(partition, partition.high_watermark, "unsafe: truncate to the high watermark")
            role = "follower"
        self._log.info(
            f"became {role}", **_fields(partition), reason=why, leader=state.leader, isr=list(state.isr),
            log_end_offset=partition.log.log_end_offset, high_watermark=partition.high_watermark,
        )

    def _remove_partition(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp)
        partition.resign()
        self.logs.delete(*tp)
        self._log.info("replica removed", **_fields(partition))

    # ------------------------------------------------------------------ lookups

    def _partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        if self.image is not None and topic in self.image.topics and index in self.image.topics[topic].partitions:
            leader = self.image.topics[topic].partitions[index].leader
            if self._applying and self.config.broker_id in self.image.topics[topic].partitions[index].replicas:
                raise PartitionError(
                    "REPLICA_NOT_AVAILABLE",
                    f"{topic}-{index} is still being created on broker {self.config.broker_id} (metadata being applied): retry shortly",
                )
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

    def _broker_status(self, broker_id: int) -> BrokerStatus | None:
        broker = self.image.brokers.get(broker_id) if self.image is not None else None
        if broker is None:
            return None
        return BrokerStatus(broker.epoch, broker.fenced, broker.in_controlled_shutdown)

    # ------------------------------------------------------------------ produce

    async def produce(self, acks: int, timeout_ms: int, items: Iterable[ProduceItem]) -> list[ProduceResult]:
        """Append each partition's batches; with acks=all wait until the HW covers them."""
        results: list[ProduceResult] = []
        waits: list[tuple[ProduceResult, Partition, asyncio.Future]] = []
        now = self.clock_ms()
        for item in items:
            result = ProduceResult(item.topic, item.partition)
            results.append(result)
            try:
                partition = self._partition(item.topic, item.partition)
                partition.require_leader(item.leader_epoch)
                end_offset = self._append(partition, item, acks, result)
            except PartitionError as exc:
                self._fail(result, exc)
                continue
            if acks == -1 and end_offset is not None and self.config.unsafe is not UnsafeBehaviour.ACK_BEFORE_REPLICATION:
                waits.append((result, partition, partition.delayed_produce(end_offset, now + timeout_ms, now)))
        if waits:
            await asyncio.wait([future for _, _, future in waits], timeout=timeout_ms / 1000)
            for result, partition, future in waits:
                self._finish_produce(result, partition, future, timeout_ms)
        return results

    def _fail(self, result: PartitionAnswer, exc: PartitionError) -> None:
        result.error, result.message = exc.code, exc.message
        result.leader = self.leader_hint(result.topic, result.partition)

    def _finish_produce(self, result: ProduceResult, partition: Partition, future: asyncio.Future, timeout_ms: int) -> None:
        code = future.result() if future.done() else ErrorCode.REQUEST_TIMED_OUT
        if code == ErrorCode.NONE:
            return
        result.error = code.name
        result.leader = self.leader_hint(partition.topic, partition.partition)
        result.message = {
            ErrorCode.REQUEST_TIMED_OUT: f"{partition.name}: the high watermark did not reach the batch within {timeout_ms} ms; "
            "the write may still commit: retry (idempotent producers do not duplicate)",
            ErrorCode.NOT_LEADER_OR_FOLLOWER: f"{partition.name} lost leadership before the write was replicated: "
            "its outcome is unknown, refresh metadata and retry",
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: f"{partition.name}: the ISR fell below min.insync.replicas while the "
            "write waited; it was appended but may not survive a failure: retry",
        }.get(code, f"{partition.name}: {code.name}")

    def _append(self, partition: Partition, item: ProduceItem, acks: int, result: ProduceResult) -> int | None:
        """Append as leader and fill ``result``; returns the offset after the last appended
        record, or None when the batch was a duplicate of one already in the log."""
        core = partition.leader_core
        assert core is not None
        check = core.check_produce(acks)
        if check == ErrorCode.NOT_ENOUGH_REPLICAS:
            raise PartitionError(
                check.name,
                f"{partition.name} has {len(core.isr)} in-sync replicas, fewer than min.insync.replicas="
                f"{core.min_insync_replicas}; nothing was written: retry once replicas catch up",
            )
        if check != ErrorCode.NONE:
            raise PartitionError(check.name, f"acks must be 0, 1 or -1 (all), not {acks}")
        try:
            located = partition.log.validate_append(item.batches)
            duplicate = self._check_sequence(partition, [header for _, header in located])
            if duplicate is not None:
                result.base_offset = duplicate.first_offset
                result.log_start_offset = partition.log.log_start_offset
                return duplicate.last_offset + 1 if duplicate.last_offset + 1 > partition.high_watermark else None
            appended = partition.log.append(
                item.batches, assign_offsets=True, leader_epoch=partition.state.leader_epoch, now_ms=self.clock_ms(),
                validated=located,
            )
        except InvalidRecordError as exc:
            raise PartitionError(
                exc.error_code, f"{partition.name}: {exc}; nothing was written: the producer encoded this batch wrong, "
                "fix its encoder (data_plane.record_batch.encode_batch writes valid batches)",
            ) from None
        except CorruptBatchError as exc:
            raise PartitionError(
                "CORRUPT_MESSAGE", f"{partition.name}: {exc}; nothing was written: the bytes changed after they were "
                "encoded (client memory or network): send the batch again",
            ) from None
        except RecordTooLargeError as exc:
            raise PartitionError("MESSAGE_TOO_LARGE", str(exc)) from None
        except StorageError as exc:
            self._go_offline(partition, exc)
        partition.producers.rebuild_from_batches(appended.headers)
        result.base_offset = appended.first_offset
        result.log_append_time_ms = appended.log_append_time_ms
        result.log_start_offset = partition.log.log_start_offset
        self._after_append(partition, core.on_leader_append(partition.log.log_end_offset, self.clock_ms()))
        return appended.last_offset + 1

    def _check_sequence(self, partition: Partition, headers: list[BatchHeader]) -> Duplicate | None:
        """Idempotent producers: a retried request is answered from memory, a gap is refused."""
        if all(h.producer_id == NO_PRODUCER_ID for h in headers):
            return None
        verdict = partition.producers.check_run(headers)
        if isinstance(verdict, Rejected):
            h = headers[0]
            raise PartitionError(
                verdict.error.name,
                f"{partition.name}: batch of producer {h.producer_id} (epoch {h.producer_epoch}) at sequence "
                f"{h.base_sequence} does not follow its last batch: an earlier batch was lost; restart the producer",
            )
        return verdict if isinstance(verdict, Duplicate) else None

    def _after_append(self, partition: Partition, decisions) -> None:
        proposal = partition.apply(decisions)
        partition.notify_appended()
        if proposal is not None:
            self._propose(partition, proposal)

    def _go_offline(self, partition: Partition, exc: StorageError):
        partition.mark_offline(exc)
        self._log.error("log directory failed", **_fields(partition), error=str(exc))
        raise PartitionError("STORAGE_ERROR", f"{partition.name} went offline on broker {self.config.broker_id}: {exc}") from None

    # ------------------------------------------------------------------ fetch (consumers)

    async def fetch(self, max_wait_ms: int, min_bytes: int, max_bytes: int, items: list[FetchItem]) -> list[FetchResult]:
        """Long poll: read below the HW until ``min_bytes`` are available or ``max_wait_ms`` passes."""
        return await self._long_poll(
            max_wait_ms, min_bytes, [(i.topic, i.partition) for i in items], lambda: self._read_all(items, max_bytes), Partition.waiter
        )

    async def _long_poll(
        self, max_wait_ms: int, min_bytes: int, tps: list[TopicPartition], read, waiter: Callable[[Partition], asyncio.Event]
    ) -> list:
        """Call ``read`` (-> results, bytes, answer_now) until it has ``min_bytes`` or something
        to say, waking on ``waiter`` events of the partitions in ``tps`` instead of polling."""
        deadline = time.monotonic() + min(max_wait_ms, self.config.fetch_max_wait_ms_cap) / 1000
        while True:
            waiters = [waiter(p) for tp in set(tps) if (p := self.partitions.get(tp))]
            results, total, answer_now = read()
            remaining = deadline - time.monotonic()
            if total >= min_bytes or answer_now or remaining <= 0 or not waiters:
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
                partition.check_high_watermark_settled()
                result.high_watermark = partition.high_watermark
                result.log_start_offset = partition.log.log_start_offset
                if budget > 0 or total == 0:
                    result.data = self._read(partition, item.offset, max(budget, 1), partition.high_watermark)
                    total += len(result.data)
            except PartitionError as exc:
                self._fail(result, exc)
                errors = True
        return results, total, errors

    def _read(self, partition: Partition, offset: int, max_bytes: int, upto: int) -> bytes:
        if partition.log.log_start_offset <= offset <= partition.log.log_end_offset and offset >= upto:
            return b""
        try:
            return partition.log.read(offset, max_bytes, max_offset=upto).data
        except OffsetOutOfRangeError:
            raise PartitionError(
                "OFFSET_OUT_OF_RANGE",
                f"offset {offset} is outside {partition.name}'s range [{partition.log.log_start_offset}, {upto}]: "
                "seek to the earliest or latest offset",
            ) from None
        except DamagedRangeError as exc:
            raise PartitionError(
                "STORAGE_ERROR",
                f"{partition.name}: {exc} on broker {self.config.broker_id} (its copy from another replica is on the "
                "way): retry shortly; every record before the damage is readable",
            ) from None
        except StorageError as exc:
            self._go_offline(partition, exc)

    # ------------------------------------------------------------------ fetch (followers)

    async def replica_fetch(
        self, replica_id: int, broker_epoch: int, max_wait_ms: int, min_bytes: int, max_bytes: int, items: list[ReplicaFetchItem]
    ) -> list[ReplicaFetchResult]:
        """A follower's fetch: serve up to the LEO (not the HW), track its progress, and tell it
        where its log diverged from ours."""
        return await self._long_poll(
            max_wait_ms, min_bytes, [(i.topic, i.partition) for i in items],
            lambda: self._serve_replica(replica_id, broker_epoch, items, max_bytes),
            Partition.append_waiter,
        )

    def _serve_replica(
        self, replica_id: int, broker_epoch: int, items: list[ReplicaFetchItem], max_bytes: int
    ) -> tuple[list[ReplicaFetchResult], int, bool]:
        results: list[ReplicaFetchResult] = []
        total = 0
        answer_now = False
        now = self.clock_ms()
        broker = self._broker_status(replica_id)
        for item in items:
            result = ReplicaFetchResult(item.topic, item.partition)
            results.append(result)
            try:
                partition = self._partition(item.topic, item.partition)
                epoch = -1 if partition.skip_epoch_fencing else item.current_leader_epoch
                partition.require_leader(epoch)
                core = partition.leader_core
                assert core is not None
                fetch = FollowerFetch(replica_id, broker_epoch, epoch, item.fetch_offset, item.last_fetched_epoch)
                decided = core.on_follower_fetch(fetch, broker, partition.log.log_start_offset, now)
                proposal = partition.apply(decided.decisions)
                if proposal is not None:
                    self._propose(partition, proposal)
            except PartitionError as exc:
                self._fail(result, exc)
                answer_now = True
                continue
            result.high_watermark = partition.high_watermark
            result.log_start_offset = partition.log.log_start_offset
            result.log_end_offset = partition.log.log_end_offset
            check = decided.fetch
            if isinstance(check, DivergingEpoch):
                result.diverging = check
                answer_now = True
            elif isinstance(check, FetchRejected):
                result.error = check.error.name
                result.message = (
                    f"{partition.name}: fetch offset {item.fetch_offset} (last epoch {item.last_fetched_epoch}) cannot be "
                    f"served from [{partition.log.log_start_offset}, {partition.log.log_end_offset}]"
                )
                answer_now = True
            elif isinstance(check, ServeFrom):
                budget = max_bytes - total
                if budget > 0 and check.offset < partition.log.log_end_offset:
                    try:
                        result.data = self._read(partition, check.offset, budget, partition.log.log_end_offset)
                    except PartitionError as exc:
                        self._fail(result, exc)
                        answer_now = True
                    total += len(result.data)
        return results, total, answer_now

    # ------------------------------------------------------------------ follower appends

    def append_as_follower(self, partition: Partition, data: bytes) -> None:
        """Append replicated batches (offsets and epochs already set by the leader)."""
        try:
            appended = partition.log.append(data, assign_offsets=False, leader_epoch=-1, now_ms=self.clock_ms())
        except (CorruptBatchError, UnexpectedAppendOffsetError) as exc:
            raise PartitionError("CORRUPT_MESSAGE", f"{partition.name}: replicated batches refused: {exc}") from None
        except StorageError as exc:
            self._go_offline(partition, exc)
        partition.producers.rebuild_from_batches(appended.headers)

    def truncate_follower(self, partition: Partition, offset: int, why: str) -> None:
        """Cut the log back to ``offset`` (divergence, or the unsafe truncate-to-HW mode).
        At or past the log end no record goes, but the log still drops an epoch entry that
        starts there with no record in it (see PartitionLog.truncate_to)."""
        before = partition.log.log_end_offset
        last_epoch = partition.log.leader_epoch_cache.latest_epoch
        try:
            partition.log.truncate_to(offset)
        except StorageError as exc:
            self._go_offline(partition, exc)
        if offset >= before:
            if partition.log.leader_epoch_cache.latest_epoch != last_epoch:
                self._log.info("dropped an epoch with no record at the log end", **_fields(partition), reason=why,
                               dropped_epoch=last_epoch, last_epoch=partition.log.leader_epoch_cache.latest_epoch,
                               log_end_offset=before)
            return
        partition.producers.truncate_to(partition.log.log_end_offset)
        partition.high_watermark = min(partition.high_watermark, partition.log.log_end_offset)
        self._log.warning(
            "truncated log", **_fields(partition), reason=why, from_offset=before, to_offset=partition.log.log_end_offset
        )

    def restart_follower_at(self, partition: Partition, offset: int) -> None:
        """The leader's log starts after ours ends (retention): start over at its log start."""
        try:
            partition.log.truncate_fully_and_start_at(offset)
        except StorageError as exc:
            self._go_offline(partition, exc)
        partition.producers = ProducerState()
        partition.producers.next_offset = offset
        partition.high_watermark = offset
        self._log.warning("follower log restarted at the leader's log start", **_fields(partition), log_start_offset=offset)

    # ------------------------------------------------------------------ damaged ranges

    def repair_read(self, items: list[FetchItem]) -> list[FetchResult]:
        """Serve another replica's repair: our own copy from ``offset``, up to our log end,
        whatever our role (the asker checks offsets, epochs and CRCs before using it)."""
        results: list[FetchResult] = []
        for item in items:
            result = FetchResult(item.topic, item.partition)
            results.append(result)
            try:
                partition = self._partition(item.topic, item.partition)
                if partition.offline_reason is not None:
                    raise PartitionError("STORAGE_ERROR", f"{partition.name} is offline on broker {self.config.broker_id}")
                result.data = self._read(partition, item.offset, max(item.max_bytes, 1), partition.log.log_end_offset)
            except PartitionError as exc:
                self._fail(result, exc)
        return results

    def damaged(self) -> list[tuple[Partition, DamagedRange]]:
        """Every damaged range still waiting for a copy, on online replicas."""
        return [
            (p, damage)
            for p in list(self.partitions.values())
            if p.offline_reason is None
            for damage in p.log.damaged_ranges()
            if not damage.lost
        ]

    def repair_sources(self, partition: Partition) -> list[int]:
        """The other replicas to ask for a copy: the leader first (a follower's source of
        truth), then in-sync replicas, then the rest."""
        others = [r for r in partition.state.replicas if r != self.config.broker_id]
        in_sync = partition.in_sync()
        return sorted(others, key=lambda r: (r != partition.state.leader, r not in in_sync))

    def repair(self, partition: Partition, damage: DamagedRange, copy: bytes, source: int) -> bool:
        """Write ``source``'s copy over ``damage``; False (logged) when the copy does not fit."""
        try:
            partition.log.repair(damage, copy)
        except CorruptBatchError as exc:
            self._log.warning("replica's copy refused for a damaged range", **_fields(partition), source=source,
                              first_offset=damage.first_offset, next_offset=damage.next_offset, reason=str(exc))
            return False
        except StorageError as exc:
            partition.mark_offline(exc)
            return False
        self._log.warning("damaged range repaired", **_fields(partition), source=source,
                          first_offset=damage.first_offset, next_offset=damage.next_offset)
        partition.notify_waiters()
        return True

    def declare_lost(self, partition: Partition, damage: DamagedRange, why: str) -> None:
        """No replica can give the range back: its records are gone; readers skip them and
        the offsets are never given to new records."""
        partition.log.mark_lost(damage)
        self._log.error(
            f"RECORDS LOST: damaged range cannot be repaired ({why}); readers skip it",
            **_fields(partition), first_offset=damage.first_offset, next_offset=damage.next_offset,
            records=damage.next_offset - damage.first_offset,
        )
        partition.notify_waiters()

    def run_scrub(self, budget_bytes: int) -> None:
        """Verify the CRCs of up to ``budget_bytes`` more stored bytes: one partition's log
        to its end, then the next one's (round robin), so an idle broker's cost stays flat
        however many partitions it holds."""
        tps = sorted(self.partitions)
        for _ in range(len(tps)):
            tp = tps[self._scrub_next % len(tps)]
            partition = self.partitions[tp]
            if partition.offline_reason is None:
                try:
                    budget_bytes -= partition.log.scrub(budget_bytes)
                except StorageError as exc:
                    partition.mark_offline(exc)
            if budget_bytes <= 0:
                return
            self._scrub_next += 1  # this log is verified to its end (or offline): the next one

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Expire delayed produces (every tick, for the leaders that have some) and shrink
        ISRs of lagging followers (every leader, once per ISR_SWEEP_INTERVAL_MS at most: a
        lag of replica.lag.time.max.ms needs no finer clock than that, so an idle broker
        need not look at thousands of leaders ten times a second)."""
        now = self.clock_ms()
        sweep_interval_ms = min(ISR_SWEEP_INTERVAL_MS, self.config.replica_lag_time_max_ms // 2)
        sweep = now - self._last_isr_sweep_ms >= sweep_interval_ms
        if sweep:
            self._last_isr_sweep_ms = now
        for partition in [p for p in self.partitions.values() if sweep or p.has_delayed_produces]:
            if partition.leader_core is not None:
                proposal = partition.apply(partition.leader_core.on_tick(now, self.config.replica_lag_time_max_ms))
                if proposal is not None:
                    self._propose(partition, proposal)

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
                if timestamp != EARLIEST:
                    partition.check_high_watermark_settled()
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


def _fields(partition: Partition) -> dict:
    """The log context every partition event carries."""
    return {
        "topic": partition.topic,
        "partition": partition.partition,
        "leader_epoch": partition.state.leader_epoch,
        "partition_epoch": partition.state.partition_epoch,
    }


def _configs(image, topic: str) -> dict[str, str]:
    return dict(image.configs.get(topic, {}))


async def _wait_any(events: list[asyncio.Event], timeout_s: float) -> None:
    """Wait until any of ``events`` is set or the timeout passes (the caller re-checks its condition)."""
    if len(events) == 1:
        try:
            await asyncio.wait_for(events[0].wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        return
    tasks = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
