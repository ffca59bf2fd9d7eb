"""The transaction coordinator's shell: which `__transaction_state` partitions this broker
leads, loading their transactional ids, and running each request as decide → write at the
HW → apply → write markers (state_machine.py decides; this module does the I/O).

- **Shards.** One `Shard` per partition of `__transaction_state` this broker leads, at one
  leader epoch, as the group coordinator does for `__consumer_offsets`: `sync_leadership` (a
  timer) starts a shard when the broker becomes leader (it replays the partition up to its log
  end, then waits until the HW covers it; meanwhile requests get COORDINATOR_LOAD_IN_PROGRESS)
  and drops it when leadership goes (NOT_COORDINATOR).
- **Decisions.** A shard runs one decision at a time (its lock): the metadata the state
  machine returns is appended as one batch through the partition's leader append, acks=all,
  at the shard's leader epoch, and applied to memory (and answered) only once the HW covers
  it. A failed write changes nothing; a write of unknown outcome reloads the shard from the
  log, so memory never differs from the log.
- **Markers.** After a PrepareCommit/PrepareAbort is durable, a task writes the markers to
  every partition's leader (markers.py), retrying with backoff until each has one, then makes
  CompleteCommit/CompleteAbort durable. A shard that loads an id in PrepareCommit/PrepareAbort
  resumes its markers, so a decision survives the coordinator's failover.
- **Timers.** `tick` aborts transactions past their timeout (fencing their producer) and
  forgets ids idle past the expiration (a tombstone).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from data_plane.broker.requests import ProduceItem
from data_plane.broker.internal_partitions import led_partitions, partition_count, replay, wait_until_committed
from data_plane.groups.coordinator import LOAD_RETRY_MS, OUTCOME_UNKNOWN, WRITE_TIMEOUT_MS
from data_plane.groups.membership import Refused
from data_plane.groups.placement import TRANSACTION_STATE_TOPIC, offsets_partition
from data_plane.record_batch import DecodedBatch, encode_batch
from data_plane.replication.errors import ErrorCode
from data_plane.replication.partition_state import ACKS_ALL
from data_plane.transactions import record_codec
from data_plane.transactions import state_machine as sm
from data_plane.transactions.markers import Confirmation, MarkerWriter, Written
from data_plane.transactions.state_machine import Decision, MarkerPlan, TopicPartition, TxnMetadata, TxnState
from kraftlog_proto import broker_pb2

log = structlog.get_logger("transactions")

TOPIC = TRANSACTION_STATE_TOPIC
# First and largest wait between marker rounds (doubling). The first is short because the usual
# wait is one replication round trip for the marker to pass the HW, and the producer's next
# transaction waits (CONCURRENT_TRANSACTIONS) until the markers are confirmed.
MARKER_BACKOFF_MS = (5, 1000)
Decide = Callable[[TxnMetadata | None, int, int], Decision]  # (metadata, now, fresh producer id) -> decision


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TxnSettings:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass
class Shard:
    """The transactional ids of one `__transaction_state` partition led here at ``leader_epoch``."""

    partition: int
    leader_epoch: int
    ids: dict[str, TxnMetadata] = field(default_factory=dict)
    loaded: bool = False
    active: bool = True
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task | None = None
    completing: dict[str, asyncio.Task] = field(default_factory=dict)  # per id: its markers being written
    busy: set[str] = field(default_factory=set)  # ids a timer decision is running for


class TransactionCoordinator:
    def __init__(self, broker_id: int, replicas, settings: TxnSettings,
                 allocate_producer_id: Callable[[], Awaitable[broker_pb2.InitProducerIdResponse]],
                 markers: MarkerWriter, clock_ms: Callable[[], int] = now_ms, markers_before_decision: bool = False) -> None:
        self.broker_id = broker_id
        self.markers_before_decision = markers_before_decision  # --unsafe-testing only: a chaos negative control
        self.replicas = replicas  # the broker's ReplicaManager: partitions, produce, the metadata image
        self.settings = settings
        self.markers = markers
        self.clock_ms = clock_ms
        self._allocate = allocate_producer_id  # the idempotent InitProducerId's allocation (ids from the controller)
        self.shards: dict[int, Shard] = {}
        self._load_retry_at_ms: dict[int, int] = {}
        self._log = log.bind(broker_id=broker_id)

    # ------------------------------------------------------------------ leadership

    def partition_count(self) -> int:
        return partition_count(self.replicas, TOPIC)

    def sync_leadership(self) -> None:
        """Start a shard for each partition led here at a new epoch; drop the others."""
        led = led_partitions(self.replicas, TOPIC)
        for index, shard in list(self.shards.items()):
            if led.get(index) != shard.leader_epoch:
                self._unload(shard, "leadership moved")
        now = self.clock_ms()
        for index, epoch in led.items():
            if index not in self.shards and self._load_retry_at_ms.get(index, 0) <= now:
                shard = self.shards[index] = Shard(index, epoch)
                shard.task = asyncio.ensure_future(self._load(shard))

    def _unload(self, shard: Shard, why: str) -> None:
        shard.active = False
        if shard.task is not None:
            shard.task.cancel()
        for task in shard.completing.values():
            task.cancel()  # the next leader resumes the markers from the log
        if self.shards.get(shard.partition) is shard:
            del self.shards[shard.partition]
        self._log.info("transactions unloaded", topic=TOPIC, partition=shard.partition, leader_epoch=shard.leader_epoch,
                       transactional_ids=len(shard.ids), reason=why)

    async def _load(self, shard: Shard) -> None:
        """Replay the partition up to its log end, wait for the HW to cover it, then resume the
        markers of every decided transaction."""
        fields = {"topic": TOPIC, "partition": shard.partition, "leader_epoch": shard.leader_epoch}
        try:
            partition = self.replicas.partitions[(TOPIC, shard.partition)]

            def take(batch: DecodedBatch) -> int:
                if batch.header.is_control:
                    return 0
                record_codec.replay(zip(batch.keys, batch.values), shard.ids)
                return len(batch.values)

            end, records = await replay(partition, take)
            if not await wait_until_committed(partition, end, lambda: shard.active):
                return
            shard.loaded = True
            self._log.info("transactions loaded", **fields, transactional_ids=len(shard.ids), records=records, log_end_offset=end)
            for meta in shard.ids.values():
                plan = sm.pending_markers(meta)
                if plan is not None:
                    self._log.info("resuming the markers of a decided transaction", **fields, **_fields(meta))
                    self._complete_later(shard, meta.transactional_id, plan)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failing load must not leave a shard answering "loading" forever
            self._log.exception("loading transactions failed; retrying", **fields, retry_in_ms=LOAD_RETRY_MS)
            self._load_retry_at_ms[shard.partition] = self.clock_ms() + LOAD_RETRY_MS
            self._unload(shard, "load failed")

    def _shard_for(self, transactional_id: str) -> Shard:
        count = self.partition_count()
        if count == 0:
            raise Refused(ErrorCode.NOT_COORDINATOR, f"the {TOPIC} topic does not exist yet: call FindCoordinator "
                          "(key_type TRANSACTION creates it) and retry")
        index = offsets_partition(transactional_id, count)
        shard = self.shards.get(index)
        leader = self.replicas.leader_hint(TOPIC, index).leader_id
        if shard is None and leader == self.broker_id:
            raise Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"broker {self.broker_id} is starting to load "
                          f"{TOPIC}-{index}: retry shortly")
        if shard is None:
            raise Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} does not coordinate transactional id "
                          f"{transactional_id!r} ({TOPIC}-{index} is led by broker {leader}): call FindCoordinator and retry there")
        if not shard.loaded:
            raise Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"broker {self.broker_id} is loading {TOPIC}-{index}: retry shortly")
        return shard

    # ------------------------------------------------------------------ decide, write, apply

    async def run(self, transactional_id: str, decide: Decide, registering: bool = False) -> Decision:
        """Decide on the id's current metadata, make the decision's log durable, apply it, and
        start its markers: the one path of every change. Raises `Refused` (retriable
        coordinator errors); the decision's own error is in the returned Decision."""
        shard = self._shard_for(transactional_id)
        async with shard.lock:
            if not shard.active:
                raise Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} stopped coordinating {transactional_id!r}: "
                              "call FindCoordinator and retry")
            meta = shard.ids.get(transactional_id)
            fresh = await self._fresh_producer_id() if sm.needs_fresh_producer_id(meta, registering) else sm.NO_PRODUCER_ID
            decision = decide(meta, self.clock_ms(), fresh)
            if self.markers_before_decision and decision.markers is not None:
                self._complete_later(shard, transactional_id, decision.markers)  # unsafe: before the decision is durable
            if decision.log:
                await self._write(shard, decision.log)
                self._apply(shard, decision.log)
        if decision.markers is not None:
            self._complete_later(shard, transactional_id, decision.markers)
        return decision

    async def _fresh_producer_id(self) -> int:
        answer = await self._allocate()
        if answer.error_code != ErrorCode.NONE:
            raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no producer id could be allocated ({answer.error_message}): retry shortly")
        return answer.producer_id

    async def _write(self, shard: Shard, entries: tuple[TxnMetadata, ...]) -> None:
        encoded = [record_codec.encode(meta) for meta in entries]
        batch = encode_batch([v for _, v in encoded], [k for k, _ in encoded], now_ms=self.clock_ms())
        [result] = await self.replicas.produce(ACKS_ALL, WRITE_TIMEOUT_MS, [ProduceItem(TOPIC, shard.partition, batch, shard.leader_epoch)])
        if not result.failed:
            return
        if result.error.code in OUTCOME_UNKNOWN and shard.active:
            self._unload(shard, f"a write's outcome is unknown ({result.error.code.name}): reload from the log")
            self.sync_leadership()
        code = ErrorCode.NOT_COORDINATOR if result.error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) \
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        raise Refused(code, f"transactional id {entries[-1].transactional_id!r}: the write to {TOPIC}-{shard.partition} failed "
                      f"({result.error.code.name}: {result.error.message}); nothing changed: call FindCoordinator and retry")

    def _apply(self, shard: Shard, entries: tuple[TxnMetadata, ...]) -> None:
        last = entries[-1]
        if shard.active:  # else durable, but no longer ours: the next leader replays it
            if last.state is TxnState.DEAD:
                shard.ids.pop(last.transactional_id, None)
            else:
                shard.ids[last.transactional_id] = last
        for meta in entries:
            self._log.info("transaction state", topic=TOPIC, partition=shard.partition, **_fields(meta),
                           partitions=sorted(f"{tp.topic}-{tp.partition}" for tp in meta.partitions))

    # ------------------------------------------------------------------ markers

    def _complete_later(self, shard: Shard, transactional_id: str, plan: MarkerPlan) -> None:
        running = shard.completing.get(transactional_id)
        if running is None or running.done():
            shard.completing[transactional_id] = asyncio.ensure_future(self._complete(shard, transactional_id, plan))

    async def _complete(self, shard: Shard, transactional_id: str, plan: MarkerPlan) -> None:
        """Write every partition's marker until it is below the partition's HW (rounds with
        backoff, leaders read afresh each round), then make CompleteCommit/CompleteAbort durable. Stops if the shard goes:
        the next leader resumes from the PrepareCommit/PrepareAbort record."""
        missing, backoff_ms = set(plan.partitions), MARKER_BACKOFF_MS[0]
        unconfirmed: dict[TopicPartition, Written] = {}  # written, not yet known to be below the partition's HW
        try:
            while (missing or unconfirmed) and shard.active:
                progress = False
                if missing:
                    written = await self.markers.write_round(plan, missing, shard.leader_epoch, transactional_id)
                    missing -= written.keys()
                    unconfirmed.update({tp: w for tp, w in written.items() if w is not None})
                    progress = bool(written)
                if unconfirmed:
                    for tp, outcome in (await self.markers.confirm_round(unconfirmed, transactional_id)).items():
                        if outcome is not Confirmation.WAITING:
                            del unconfirmed[tp]
                            progress = True
                        if outcome is Confirmation.LOST:
                            missing.add(tp)
                if missing or unconfirmed:
                    backoff_ms = MARKER_BACKOFF_MS[0] if progress else min(backoff_ms * 2, MARKER_BACKOFF_MS[1])
                    await asyncio.sleep(backoff_ms / 1000)
            while shard.active:
                try:
                    await self._markers_written(shard, transactional_id, plan)
                    return
                except Refused as refusal:
                    self._log.info("completing a transaction deferred", transactional_id=transactional_id, reason=refusal.message)
                    await asyncio.sleep(backoff_ms / 1000)
                    backoff_ms = min(backoff_ms * 2, MARKER_BACKOFF_MS[1])
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not silently leave a transaction open: the next load resumes it
            self._log.exception("writing markers failed", transactional_id=transactional_id, topic=TOPIC, partition=shard.partition)
        finally:
            if shard.completing.get(transactional_id) is asyncio.current_task():
                del shard.completing[transactional_id]

    async def _markers_written(self, shard: Shard, transactional_id: str, plan: MarkerPlan) -> None:
        async with shard.lock:
            meta = shard.ids.get(transactional_id)
            if not shard.active or meta is None or sm.pending_markers(meta) != plan:
                return  # unloaded, or already completed
            done = sm.markers_written(meta, self.clock_ms())
            await self._write(shard, (done,))
            self._apply(shard, (done,))

    # ------------------------------------------------------------------ the requests

    async def init_producer_id(self, transactional_id: str, timeout_ms: int) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.init_producer_id(
            meta, transactional_id, timeout_ms, self.settings.max_timeout_ms, now, fresh), registering=True)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: frozenset[TopicPartition]) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.add_partitions(
            meta, producer_id, producer_epoch, partitions, now))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.end_txn(
            meta, producer_id, producer_epoch, commit, now, fresh))

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self._shard_for(transactional_id).ids.get(transactional_id)

    def loaded_transactions(self) -> list[TxnMetadata]:
        return [meta for shard in self.shards.values() if shard.loaded for meta in shard.ids.values()]

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Follow leadership; abort timed-out transactions and expire idle ids."""
        self.sync_leadership()
        now = self.clock_ms()
        for shard in list(self.shards.values()):
            if not shard.loaded:
                continue
            for transactional_id, meta in list(shard.ids.items()):
                if transactional_id in shard.busy or not self._overdue(meta, now):
                    continue
                shard.busy.add(transactional_id)
                asyncio.ensure_future(self._expire(shard, transactional_id))

    def _overdue(self, meta: TxnMetadata, now: int) -> bool:
        return meta.is_timed_out(now) or sm.expire_transactional_id(meta, now, self.settings.id_expiration_ms) is not None

    async def _expire(self, shard: Shard, transactional_id: str) -> None:
        def decide(meta: TxnMetadata | None, now: int, fresh: int) -> Decision:
            if meta is None:
                return Decision(ErrorCode.NONE, None)
            aborted = sm.abort_timed_out(meta, now, fresh)
            if aborted is not None:
                self._log.info("transaction timed out: aborting it and fencing its producer", **_fields(meta), timeout_ms=meta.timeout_ms)
                return aborted
            dead = sm.expire_transactional_id(meta, now, self.settings.id_expiration_ms)
            return Decision(ErrorCode.NONE, dead, (dead,)) if dead is not None else Decision(ErrorCode.NONE, meta)
        try:
            await self.run(transactional_id, decide)
        except Refused as refusal:
            self._log.info("transaction timer deferred", transactional_id=transactional_id, reason=refusal.message)
        finally:
            shard.busy.discard(transactional_id)


def _fields(meta: TxnMetadata) -> dict[str, object]:
    return {"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch, "state": meta.state.value}
