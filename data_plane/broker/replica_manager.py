"""The broker's partitions and the data-plane operations on them (produce, fetch, offsets).

Plain Python in, plain Python out (``data_plane/requests.py``): ``service.py`` translates gRPC messages
to and from these calls. Runs entirely on the broker's asyncio loop, so no locks: every await
point is explicit, and reads of partition state between awaits are consistent.

Every event goes to its `Partition` (the only owner of a log, its producer state and its
replication core), which answers with a `Ready`; `carry_out` is the one place that acts on
it: answers completed acks=all produces, wakes waiting fetches, sends ISR proposals.

Partitions come and go only through metadata: ``on_metadata(delta, image)`` creates, updates or
deletes the local replicas the metadata delta says changed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Awaitable, Callable, Iterable

import structlog

from data_plane.broker.config import BrokerConfig, Durability, UnsafeBehaviour
from data_plane.broker.controller_link import MetadataNotApplied
from data_plane.broker.delayed_produces import MAX_DELAYED_PRODUCES, DelayedProduces
from data_plane.partition_errors import PartitionError, not_leader, unknown_partition
from data_plane.broker.partition import DelayedWait, LeadershipState, Partition, Ready
from data_plane.broker.fetch_serving import FetchServing
from data_plane.broker.fetch_session_registry import FetchSessionRegistry
from data_plane.broker.group_commit import GroupCommit
from data_plane.broker.log_maintenance import LogMaintenance
from data_plane.requests import LeaderHint, PartitionAnswer, ProduceItem, ProduceResult
from data_plane.broker.txn_verification import TxnVerifier
from data_plane.wakeups import settled
from data_plane.broker.unsafe_partitions import partition_class
from data_plane.control_batch import decode_marker
from data_plane.record_batch import decode_batch
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import ACKS_ALL, AlterPartitionCommitted, AlterPartitionRefused, BrokerStatus, IsrProposal
from data_plane.storage import LogManager, LogSettings, StorageError
from metadata_quorum import topic_config
from metadata_quorum.delta import MetadataDelta
from metadata_quorum.image import MetadataImage, PartitionImage, TopicImage
from server_common import clock

log = structlog.get_logger("broker.replicas")

TopicPartition = tuple[str, int]
MarkerListener = Callable[[str, int, int, bool, int], None]
APPLY_SLICE_MS = 20  # longest stretch of metadata application between yields to the event loop
ISR_SWEEP_INTERVAL_MS = 1000  # how often tick() looks at the leaders whose followers may lag


def now_ms() -> int:
    return clock.now_ms()


class ReplicaManager:
    """Owns every partition replica on this broker."""

    def __init__(self, config: BrokerConfig, logs: LogManager, clock_ms: Callable[[], int] = now_ms,
                 max_delayed_produces: int = MAX_DELAYED_PRODUCES) -> None:
        self.config = config
        self.logs = logs
        self.clock_ms = clock_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_ids: dict[str, str] = {}
        self.image = None  # the metadata image being applied or last applied
        self._applying = False  # on_metadata is creating or changing replicas
        self._not_created: dict[TopicPartition, StorageError] = {}  # replicas on_metadata could not create: it raises
        # What the metadata batch being applied did to this broker's replicas: its one log line
        # (a line per replica was a sixth of a broker's time creating 50,000 of them).
        self._applied: Counter[str] = Counter()
        self._last_isr_sweep_ms = 0
        self._log = log.bind(broker_id=config.broker_id)
        self._high_watermarks = logs.read_high_watermarks()
        self._checkpointed_high_watermarks: dict[TopicPartition, int] | None = None  # as last written
        self._partition_class = partition_class(config.unsafe)
        self._delayed = DelayedProduces(max_delayed_produces)
        # The leaders a timer tick can change, kept by carry_out from every event's outcome so
        # that an idle broker's timers cost nothing per replica: those with acks=all produces
        # waiting (expired every tick) and those with an in-sync follower behind their log end
        # (the ISR sweep's; a caught-up follower cannot start lagging without a new event).
        self._with_delayed_produces: dict[TopicPartition, Partition] = {}
        self._may_shrink_isr: dict[TopicPartition, Partition] = {}
        self.reads = FetchServing(self)
        self.maintenance = LogMaintenance(self)
        self.fetch_sessions = FetchSessionRegistry()  # followers' open streams, told of new leaderships
        # Every replica taken offline since it was last looked at (some may be back or gone):
        # what offline recovery looks at, so that its tick costs nothing per healthy replica.
        self.taken_offline: set[TopicPartition] = set()
        # --durability fsync: two group commits, so that a follower's round (which its next
        # fetch waits for) never queues behind a round of this broker's leader appends.
        self.group_commit, self.follower_commit = (GroupCommit(
            lambda partition: self.carry_out(partition, partition.on_synced(self.clock_ms())),
            self.take_offline, config.unsafe == UnsafeBehaviour.SKIP_FSYNC, config.broker_id,
        ) for _ in range(2))
        # Set by the server: where ISR proposals go (AlterPartition) and who follows leaders.
        self.propose_isr: Callable[[Partition, IsrProposal], None] = lambda partition, proposal: None
        # (the partitions created or whose leader changed; None: look at every one)
        self.followers_changed: Callable[[set[TopicPartition] | None], None] = lambda changed: None
        # Followed partitions to look at again at once (their state changed, their log went offline).
        self.recheck_followers: Callable[[set[TopicPartition]], None] = lambda tps: None
        # Told of every marker this broker appends as leader (the group coordinator completes
        # transactional offset commits with them): (topic, partition, producer id, commit, offset).
        self.marker_listeners: list[MarkerListener] = []
        # Set by the server: asks transaction coordinators about a producer's first
        # transactional batch on a partition. ``verify_transactions`` (the broker's
        # --transaction-partition-verification, KIP-890 part 1): check it with the coordinator;
        # a producer that leaves adding the partition to the leader (KIP-890 part 2) is asked
        # for in any case.
        self.txn_verifier: TxnVerifier | None = None
        self.verify_transactions = True

    # ------------------------------------------------------------------ the one driver

    def carry_out(self, partition: Partition, ready: Ready) -> None:
        """Do what a partition event decided: the only place that acts on a `Ready`."""
        self._delayed.complete(ready.completed)
        if ready.high_watermark_moved:
            partition.notify_waiters()
        elif ready.appended:
            partition.notify_appended()
        if ready.isr_proposal is not None:
            assert partition.is_leader, partition.name
            self.propose_isr(partition, ready.isr_proposal)
        tp = (partition.topic, partition.partition)
        _keep_if(self._with_delayed_produces, tp, partition, partition.has_delayed_produces)
        _keep_if(self._may_shrink_isr, tp, partition, partition.may_shrink_isr)

    def take_offline(self, partition: Partition, exc: StorageError) -> PartitionError:
        """The replica's log failed: take it offline; the error to answer with."""
        self.carry_out(partition, partition.mark_offline(exc))
        self.taken_offline.add((partition.topic, partition.partition))
        self.recheck_followers({(partition.topic, partition.partition)})  # its fetcher stops naming it
        self._log.error("log directory failed", **partition.fields(), error=str(exc))
        return PartitionError(ErrorCode.STORAGE_ERROR, f"{partition.name} went offline on broker {self.config.broker_id}: {exc}")

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
        self._not_created = {}
        self._applied = Counter()
        try:
            everything = changes.brokers_changed  # the fetchers may have to reconnect
            moved: set[TopicPartition] = set()
            changed_followed: set[TopicPartition] = set()
            for topic in changes.deleted_topics:
                everything |= self._remove_topic(topic)
            for tp in changes.stopped:
                if tp in self.partitions:  # reassigned away from this broker
                    self._remove_partition(tp)
                    everything = True
            for name in dict.fromkeys([*changes.configs, *changes.replicas]):
                moved |= await self._apply_topic_change(image, image.topics[name], changes.replicas.get(name, {}), name in changes.configs, changed_followed)
        finally:
            self._applying = False
            self._log_applied(image)
        if everything or moved:
            self.followers_changed(None if everything else moved)
        if changed_followed - moved and not everything:
            self.recheck_followers(changed_followed - moved)
        if self._not_created:  # the rest is done; the follower serves on and calls again later
            raise MetadataNotApplied(f"{len(self._not_created)} replica(s) could not be created", self._not_created)

    def _log_applied(self, image: MetadataImage) -> None:
        """One line per metadata batch that touched this broker's replicas (each replica's own
        line is at debug level): how many it created, changed and removed, and how many of
        those created or changed now lead or follow."""
        if self._applied or self._not_created:
            self._log.info("metadata applied to replicas", metadata_offset=image.offset, created=self._applied["created"],
                           changed=self._applied["changed"], removed=self._applied["removed"], leading=self._applied["leading"],
                           following=self._applied["following"], offline=self._applied["offline"], not_created=len(self._not_created))

    def _remove_topic(self, topic: TopicImage) -> bool:
        """Drop the local replicas (and their data) of a deleted topic; True if there were any."""
        local = [(topic.name, index) for index in topic.partitions if (topic.name, index) in self.partitions]
        for tp in local:
            self._remove_partition(tp)
        self.topic_ids.pop(topic.name, None)
        return bool(local)

    async def _apply_topic_change(self, image: MetadataImage, topic: TopicImage, changed: dict[int, PartitionImage], configs_changed: bool,
                                  changed_followed: set[TopicPartition]) -> set[TopicPartition]:
        """Bring this broker's replicas of ``topic`` in line with ``image``: the settings of
        every local replica if its configs changed, and the ``changed`` partitions (this
        broker is a replica of each). Returns the replicas that came or changed leader (the
        fetchers must move them, and only them). Followed partitions whose state changed under the same leader (the ISR,
        a leader epoch) go into ``changed_followed``: their fetcher looks at just those at once
        (a follower back in the ISR must hear it now), without a full rescan; the fetchers
        have no periodic full look that would see it later."""
        name = topic.name
        settings = self._settings(image, name)
        if configs_changed:
            for index in topic.partitions:
                partition = self.partitions.get((name, index))
                if partition is not None:
                    partition.update_settings(settings)
        moved: set[TopicPartition] = set()
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
                moved.add((name, index))
            elif existing.state != state:
                if existing.is_leader and state.leader != self.config.broker_id and self.config.unsafe is UnsafeBehaviour.SKIP_EPOCH_FENCING:
                    self._log.warning("unsafe: ignoring a newer leader epoch, still leading", **_fields(existing),
                                      new_leader=state.leader, new_leader_epoch=state.leader_epoch)
                    continue
                if existing.state.leader != state.leader:
                    moved.add((name, index))
                if state.leader != self.config.broker_id:
                    changed_followed.add((name, index))
                self._change_leadership(existing, state)
                self._applied["changed"] += 1
        return moved

    def on_alter_partition_answer(self, partition: Partition, proposal: IsrProposal,
                                  result: AlterPartitionCommitted | AlterPartitionRefused) -> None:
        """The controller answered an ISR proposal (the AlterPartition sender calls this)."""
        self.carry_out(partition, partition.on_alter_partition_answer(proposal, result, self.clock_ms()))

    def unsafe_leaderships(self) -> dict[TopicPartition, int]:
        """Partitions this broker still leads against metadata (only with skip-epoch-fencing):
        its Metadata answers name itself as their leader, with the image's epoch."""
        if self.config.unsafe is not UnsafeBehaviour.SKIP_EPOCH_FENCING or self.image is None:
            return {}
        return {
            tp: self.config.broker_id
            for tp, p in self.partitions.items()
            if p.is_leader and self.image.topics[tp[0]].partitions[tp[1]].leader != self.config.broker_id
        }

    def _settings(self, image, topic: str) -> LogSettings:
        overrides = dict(self.config.topic_defaults)
        overrides.update(_configs(image, topic))
        return LogSettings.from_config(topic_config.effective(overrides))

    def _add_partition(self, topic: str, index: int, state: LeadershipState, settings: LogSettings) -> None:
        try:
            plog = self.logs.get_or_create(topic, index, settings)
            partition = self._partition_class(
                topic, index, self.config.broker_id, plog, high_watermark=self._high_watermarks.get((topic, index), 0),
                durable_acks=self.config.durability == Durability.FSYNC,
            )
        except StorageError as exc:
            self._log.error("partition offline: cannot open log", topic=topic, partition=index, error=str(exc))
            self._not_created[(topic, index)] = exc
            return
        self.partitions[(topic, index)] = partition
        self._applied["created"] += 1
        self._lead_or_follow(partition, state, "new replica")

    def reopen_offline(self, tp: TopicPartition) -> bool:
        """Bring back a replica whose log went offline after it was created, once the log can
        be opened and written again (``LogManager.reopen``; raises StorageError while it
        cannot): a new Partition over the reopened log, at the metadata's current leadership,
        so it follows (the controller moved the leadership away) and catches up into the ISR.
        False, nothing done: metadata is being applied (its slices yield), try again later."""
        if self._applying:
            return False
        partition = self.partitions[tp]
        assert partition.offline_reason is not None and self.image is not None, tp
        part = self.image.partition(*tp)
        assert part is not None and self.config.broker_id in part.replicas, tp  # else it was removed with its topic or moved away
        plog = self.logs.reopen(*tp, self._settings(self.image, tp[0]))
        reopened = self._partition_class(tp[0], tp[1], self.config.broker_id, plog,
                                         high_watermark=min(partition.high_watermark, plog.log_end_offset),
                                         durable_acks=self.config.durability == Durability.FSYNC)
        self.partitions[tp] = reopened
        state = LeadershipState(part.leader, part.leader_epoch, part.partition_epoch, tuple(part.replicas), tuple(part.isr))
        self._lead_or_follow(reopened, state, "log reopened")
        self.followers_changed({tp})
        return True

    def _change_leadership(self, partition: Partition, state: LeadershipState) -> None:
        self._lead_or_follow(partition, state, "leader epoch changed")

    def _lead_or_follow(self, partition: Partition, state: LeadershipState, why: str) -> None:
        self.maintenance.note_opened(partition)
        try:
            self.carry_out(partition, partition.on_leadership(state, why, self.clock_ms()))
        except StorageError as exc:
            self._applied["offline"] += 1
            self.take_offline(partition, exc)
            return
        self._applied["leading" if partition.is_leader else "following"] += 1
        if partition.is_leader:
            self.fetch_sessions.leading((partition.topic, partition.partition), (r for r in state.replicas if r != self.config.broker_id))
        if partition.durable_acks:  # a new leader's tail may not be durable yet: its HW waits for this round
            self.group_commit.request([partition])

    def _remove_partition(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp)
        self.carry_out(partition, partition.resign())
        self.logs.delete(*tp)
        self._applied["removed"] += 1
        self._log.debug("replica removed", **partition.fields())

    # ------------------------------------------------------------------ lookups

    def lookup(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        if self.image is not None and topic in self.image.topics and index in self.image.topics[topic].partitions:
            leader = self.image.topics[topic].partitions[index].leader
            if self._applying and self.config.broker_id in self.image.topics[topic].partitions[index].replicas:
                raise PartitionError(
                    ErrorCode.REPLICA_NOT_AVAILABLE,
                    f"{topic}-{index} is still being created on broker {self.config.broker_id} (metadata being applied): retry shortly",
                )
            if leader == self.config.broker_id:
                raise PartitionError(
                    ErrorCode.STORAGE_ERROR,
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

    def broker_status(self, broker_id: int) -> BrokerStatus | None:
        broker = self.image.brokers.get(broker_id) if self.image is not None else None
        if broker is None:
            return None
        return BrokerStatus(broker.epoch, broker.fenced, broker.in_controlled_shutdown)

    def fail(self, result: PartitionAnswer, exc: PartitionError) -> None:
        assert exc.code != ErrorCode.NONE, exc
        result.error = exc
        result.leader = self.leader_hint(result.topic, result.partition)

    # ------------------------------------------------------------------ produce

    async def produce(self, acks: int, timeout_ms: int, items: Iterable[ProduceItem], transactional_id: str = "",
                      add_to_transaction: bool = False) -> list[ProduceResult]:
        """Append each partition's batches; with acks=all wait until the HW covers them. A
        transactional producer's first batch on a partition waits for its coordinator's
        verification first (``txn_verifier``), the partitions of one request concurrently;
        with ``add_to_transaction`` (KIP-890 part 2) the coordinator adds the partition instead."""
        assert timeout_ms >= 0, timeout_ms
        items = list(items)
        verdicts = await self._verify_transactions(items, transactional_id, add_to_transaction)
        results: list[ProduceResult] = []
        waits: list[tuple[ProduceResult, asyncio.Future]] = []
        now = self.clock_ms()
        for item, verified in zip(items, verdicts):
            result = ProduceResult(item.topic, item.partition)
            results.append(result)
            try:
                if isinstance(verified, PartitionError):
                    raise verified
                partition = self.lookup(item.topic, item.partition)
                wait = DelayedWait(self._delayed.reserve(item.topic, item.partition) if acks == ACKS_ALL else -1, now + timeout_ms, now)
                try:
                    appended, ready = partition.produce(item.batches, item.leader_epoch, acks, wait, item.from_coordinator, verified)
                except StorageError as exc:
                    raise self.take_offline(partition, exc) from None
                self.maintenance.note_written(partition)
            except PartitionError as exc:
                self.fail(result, exc)
                continue
            if partition.durable_acks:
                self.group_commit.request([partition])  # the HW moves over it once fsynced (on_synced)
            assert appended.base_offset >= 0 and (appended.wait_until is None or appended.wait_until > appended.base_offset), appended
            result.base_offset, result.log_append_time_ms = appended.base_offset, appended.log_append_time_ms
            result.log_start_offset = appended.log_start_offset
            if appended.wait_until is not None:
                waits.append((result, self._delayed.park(wait.token)))  # before carry_out, which may complete it
            self.carry_out(partition, ready)
        if waits:
            await settled([future for _, future in waits], timeout_ms / 1000, ErrorCode.REQUEST_TIMED_OUT)
            for result, future in waits:
                code = future.result() if future.done() else ErrorCode.REQUEST_TIMED_OUT
                if code != ErrorCode.NONE:
                    self.fail(result, _produce_wait_failed(f"{result.topic}-{result.partition}", code, timeout_ms))
        return results

    async def _verify_transactions(self, items: list[ProduceItem], transactional_id: str,
                                   add: bool = False) -> list[frozenset[tuple[int, int]] | PartitionError | None]:
        """Per item: the (producer id, epoch) pairs the coordinator confirmed for its first
        transactional write here, or the PartitionError refusing it; None when not verified
        (verification off). The group coordinator's write of a producer's transactional offsets
        (TxnOffsetCommit) is verified as a client's batch is, as Kafka does since 3.6: without it
        offsets sent without adding the offsets partition to the transaction (or after it ended)
        would stay staged with no marker to complete them. A partition not led here is left to
        the append's own checks. Re-checked on append: the state may move meanwhile. ``add``:
        the producer left adding the partition to the leader, which asks the coordinator even
        with verification off (else no marker would close the transaction there)."""
        verifier = self.txn_verifier if self.verify_transactions or add else None
        if verifier is None:
            return [None] * len(items)
        verdicts: list[frozenset[tuple[int, int]] | PartitionError | None] = []
        questions: list[tuple[int, asyncio.Future]] = []
        for i, item in enumerate(items):
            partition = self.partitions.get((item.topic, item.partition))
            leads = partition is not None and partition.is_leader
            needed = partition.unverified_transactions(item.batches, item.from_coordinator) if leads else frozenset()
            verdicts.append(needed)
            questions += [(i, asyncio.ensure_future(verifier.verify(transactional_id, item.topic, item.partition, pid, epoch, add)))
                          for pid, epoch in sorted(needed)]
        if questions:
            await asyncio.gather(*(q for _, q in questions))
            for i, answered in questions:
                if answered.result() is not None and not isinstance(verdicts[i], PartitionError):
                    verdicts[i] = answered.result()
        return verdicts

    def write_marker(self, topic: str, index: int, marker: bytes) -> int:
        """Append one transaction marker on a partition this broker leads (internal: the
        transaction coordinator's WriteTxnMarkers); returns its offset. Raises PartitionError."""
        partition = self.lookup(topic, index)
        partition.require_leader(-1)
        try:
            ready = partition.append_markers_as_leader(marker, self.clock_ms())
        except StorageError as exc:
            raise self.take_offline(partition, exc) from None
        self.maintenance.note_written(partition)
        self.carry_out(partition, ready)
        offset = partition.log_end_offset - 1
        written = decode_marker(decode_batch(marker))
        for listener in self.marker_listeners:
            listener(topic, index, written.producer_id, written.commit, offset)
        return offset

    def wait_replicated(self, topic: str, index: int, wait_until: int, timeout_ms: int) -> Awaitable[None]:
        """acks=all for an append made without waiting (a transaction marker, `write_marker`):
        parks a delayed produce until the HW reaches ``wait_until``. Call it right after the
        append, with no await between, so the wait belongs to the leader epoch the append was
        made under: a leadership change fails it. The returned awaitable raises PartitionError
        (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND) unless
        the append is committed."""
        partition = self.lookup(topic, index)
        partition.require_leader(-1)
        token = self._delayed.reserve(topic, index)
        if partition.durable_acks:
            self.group_commit.request([partition])
        now = self.clock_ms()
        future = self._delayed.park(token)
        self.carry_out(partition, partition.add_delayed_produce(token, wait_until, now + timeout_ms, now))
        return self._replicated(partition, future, timeout_ms)

    @staticmethod
    async def _replicated(partition: Partition, future: asyncio.Future, timeout_ms: int) -> None:
        await settled([future], timeout_ms / 1000, ErrorCode.REQUEST_TIMED_OUT)
        code = future.result()
        if code != ErrorCode.NONE:
            raise _produce_wait_failed(partition.name, code, timeout_ms)

    # ------------------------------------------------------------------ follower appends

    def append_as_follower(self, partition: Partition, data: bytes) -> None:
        """Append replicated batches (offsets and epochs already set by the leader)."""
        try:
            partition.append_as_follower(data, self.clock_ms())
        except StorageError as exc:
            raise self.take_offline(partition, exc) from None
        self.maintenance.note_written(partition)

    def truncate_follower(self, partition: Partition, offset: int, why: str) -> None:
        """Cut the log back to ``offset`` (a diverging epoch, or a log ahead of the leader's)."""
        try:
            partition.truncate(offset, why)
        except StorageError as exc:
            raise self.take_offline(partition, exc) from None
        self.maintenance.note_written(partition)

    def follow_log_start(self, partition: Partition, leader_log_start: int) -> None:
        """A follower's log start follows the leader's (DeleteRecords), below its own HW."""
        try:
            partition.follow_log_start(leader_log_start)
        except StorageError as exc:
            raise self.take_offline(partition, exc) from None
        self.maintenance.note_written(partition)

    def restart_follower_at(self, partition: Partition, offset: int) -> None:
        """The leader's log starts after ours ends (retention): start over at its log start."""
        try:
            partition.restart_at(offset)
        except StorageError as exc:
            raise self.take_offline(partition, exc) from None
        self.maintenance.note_written(partition)

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Expire delayed produces (every tick, for the leaders that have some) and shrink ISRs
        of lagging followers (once per ISR_SWEEP_INTERVAL_MS at most, for the leaders with an
        in-sync follower behind their log end: a lag of replica.lag.time.max.ms needs no finer
        clock than that). Both sets are kept by carry_out, so a tick on an idle broker visits
        no replica however many it holds."""
        now = self.clock_ms()
        sweep_interval_ms = min(ISR_SWEEP_INTERVAL_MS, self.config.replica_lag_time_max_ms // 2)
        due = self._with_delayed_produces
        if now - self._last_isr_sweep_ms >= sweep_interval_ms:
            self._last_isr_sweep_ms = now
            due = {**self._may_shrink_isr, **due}
        for partition in list(due.values()):  # carry_out updates both sets meanwhile
            self.carry_out(partition, partition.on_tick(now, self.config.replica_lag_time_max_ms))

    def high_watermarks(self, replicas: Iterable[tuple[TopicPartition, Partition]] | None = None) -> dict[TopicPartition, int]:
        """Each replica's HW: of ``replicas`` (a `checkpoint_replicas` list, which a worker
        thread may read), or of every replica now (on the event loop)."""
        return {tp: p.high_watermark for tp, p in (self.partitions.items() if replicas is None else replicas)}

    def checkpoint_replicas(self) -> list[tuple[TopicPartition, Partition]]:
        """The replicas as they are now, taken on the event loop for `high_watermarks_to_checkpoint`
        in a worker thread: one copy of the index, so that the thread never walks a dict the
        loop changes, while reading 50,000 HWs, the long part, leaves the loop serving."""
        return list(self.partitions.items())

    def high_watermarks_to_checkpoint(self, replicas: list[tuple[TopicPartition, Partition]]) -> dict[TopicPartition, int] | None:
        """The HWs of ``replicas`` (`checkpoint_replicas`) to write to the checkpoint, or None when
        they would say what the last write said (no HW moved, no replica came or went): an idle
        broker rewrites no file. Runs in the checkpoint's worker thread, one at a time; the
        caller writes them and then calls `high_watermarks_checkpointed`. Each HW is read as it
        is when the thread reaches it: a checkpoint says a HW each replica had, never one above
        its log end at load (the load takes the smaller)."""
        high_watermarks = self.high_watermarks(replicas)
        return None if high_watermarks == self._checkpointed_high_watermarks else high_watermarks

    def high_watermarks_checkpointed(self, high_watermarks: dict[TopicPartition, int]) -> None:
        self._checkpointed_high_watermarks = high_watermarks


def _produce_wait_failed(name: str, code: ErrorCode, timeout_ms: int) -> PartitionError:
    """Why an appended acks=all produce was not acknowledged: its outcome is unknown."""
    return PartitionError(code, {
        ErrorCode.REQUEST_TIMED_OUT: f"{name}: the high watermark did not reach the batch within {timeout_ms} ms; "
        "the write may still commit: retry (idempotent producers do not duplicate)",
        ErrorCode.NOT_LEADER_OR_FOLLOWER: f"{name} lost leadership before the write was replicated: "
        "its outcome is unknown, refresh metadata and retry",
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: f"{name}: the ISR fell below min.insync.replicas while the "
        "write waited; it was appended but may not survive a failure: retry",
    }.get(code, f"{name}: {code.name}: retry"))


def _keep_if(index: dict[TopicPartition, Partition], tp: TopicPartition, partition: Partition, keep: bool) -> None:
    """Hold ``partition`` in ``index`` exactly while ``keep`` (its latest event decides)."""
    if keep:
        index[tp] = partition
    elif index.get(tp) is partition:  # not a newer replica of the same partition
        del index[tp]


def _fields(partition: Partition) -> dict:
    """The log context every partition event carries."""
    return partition.fields()


def _configs(image, topic: str) -> dict[str, str]:
    return dict(image.configs.get(topic, {}))

