"""The transaction coordinator's shell: which `__transaction_state` partitions this broker
leads, loading their transactional ids, and running each request as decide → write at the
HW → apply → write markers (state_machine.py decides; this module does the I/O).

- **Shards.** One `TxnShard` per partition of `__transaction_state` this broker leads, at one
  leader epoch, as the group coordinator does for `__consumer_offsets`: `sync_leadership` (a
  timer) starts a shard when the broker becomes leader (it replays the partition up to its log
  end, then waits until the HW covers it; meanwhile requests get COORDINATOR_LOAD_IN_PROGRESS)
  and drops it when leadership goes (NOT_COORDINATOR).
- **Decisions.** A shard has one write in flight at a time: the decisions that arrive
  meanwhile queue, and are decided in order (each on what the earlier ones left,
  decision_batch.py) and appended together as one batch through the partition's leader
  append, acks=all, at the shard's leader epoch (group commit); they are applied to memory
  (and answered) only once the HW covers the batch. A failed write refuses every decision
  in it and changes nothing; a write of unknown outcome reloads the shard from the log, so
  memory never differs from the log.
- **Markers.** After a PrepareCommit/PrepareAbort is durable, a task writes the markers to
  every partition's leader (markers.py), retrying with backoff until each is committed, then
  makes CompleteCommit/CompleteAbort durable: in the write of the producer's next request if
  one waits for the markers (it would otherwise be answered CONCURRENT_TRANSACTIONS), else
  alone. The producer's next transaction does not wait for them unless it adds a partition
  that owes one: it starts Ongoing with the markers ``owed`` (state_machine.py), and the
  record clearing them goes in that transaction's next write after they are all committed.
  A shard that loads an id in PrepareCommit/PrepareAbort, or Ongoing owing markers,
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

from data_plane.requests import ProduceItem
from data_plane.coordination.internal_partitions import LedShards, Shard, replay, wait_until_committed
from data_plane.coordination import OUTCOME_UNKNOWN, WRITE_TIMEOUT_MS, Refused
from server_common.internal_topics import TRANSACTION_STATE_TOPIC
from data_plane.record_batch import DecodedBatch, encode_batch
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import ACKS_ALL
from data_plane.transactions import record_codec
from data_plane.transactions import state_machine as sm
from data_plane.transactions.decision_batch import DecisionBatch
from data_plane.transactions.markers import MarkerWriter
from data_plane.transactions.state_machine import Decision, MarkerPlan, TopicPartition, TxnMetadata, TxnState
from kraftlog_proto import broker_pb2

log = structlog.get_logger("transactions")

TOPIC = TRANSACTION_STATE_TOPIC
# First and largest wait between marker rounds (doubling): a round misses a partition only when
# its leader is unknown, moved or unreachable, so the next round waits for metadata to catch up.
MARKER_BACKOFF_MS = (10, 1000)
# How long a producer's request waits for its previous transaction's markers before it is
# answered CONCURRENT_TRANSACTIONS (which the producer retries after a backoff): the markers
# usually take one replication round trip, so the request is decided the moment they are done.
MARKERS_WAIT_MS = 500
# How long a decided transaction whose markers are all committed waits for the producer's next
# request to carry CompleteCommit/CompleteAbort in its write before writing it alone: a producer
# that goes on sends its next transaction's first batch within a few milliseconds, and a write
# of its own would hold that request's write behind it (one write in flight per shard).
COMPLETE_LINGER_MS = 20
Decide = Callable[[TxnMetadata | None, int, int], Decision]  # (metadata, now, fresh producer id) -> decision


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TxnSettings:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass
class Completion:
    """A decided transaction's markers being written (``task``). ``marked`` is set once every
    marker is committed: from then on the next decision on the id carries CompleteCommit/
    CompleteAbort in its own write instead of waiting for the task's."""

    plan: MarkerPlan
    task: asyncio.Task  # done and ``marked``, still here: the next transaction's next write records it
    marked: asyncio.Event = field(default_factory=asyncio.Event)
    recorded: asyncio.Event = field(default_factory=asyncio.Event)  # set: a request's write carried the record


@dataclass
class Request:
    """A decision waiting for the shard's next write; ``answer`` resolves once it is durable."""

    transactional_id: str
    decide: Decide
    registering: bool
    answer: asyncio.Future
    settling: bool = False  # the marker task's own: markers the next transaction owes are left to that one's next write


@dataclass
class TxnShard(Shard):
    """The transactional ids of one `__transaction_state` partition led here at ``leader_epoch``."""

    ids: dict[str, TxnMetadata] = field(default_factory=dict)
    queue: list[Request] = field(default_factory=list)  # decisions for the next write
    writer: asyncio.Task | None = None  # writing the queued decisions
    completing: dict[str, Completion] = field(default_factory=dict)  # per id: its markers being written
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
        self._log = log.bind(broker_id=broker_id)
        self._led = LedShards(TOPIC, broker_id, replicas, lambda: self.clock_ms(), TxnShard, self._load, self._unloaded)
        self.shards = self._led.by_index

    # ------------------------------------------------------------------ leadership

    def partition_count(self) -> int:
        return self._led.partition_count()

    def sync_leadership(self) -> None:
        """Start a shard for each partition led here at a new epoch; drop the others."""
        self._led.sync()

    def _unloaded(self, shard: TxnShard, why: str) -> None:
        for completion in shard.completing.values():
            completion.task.cancel()  # the next leader resumes the markers from the log
        self._log.info("transactions unloaded", topic=TOPIC, partition=shard.partition, leader_epoch=shard.leader_epoch,
                       transactional_ids=len(shard.ids), reason=why)

    async def _load(self, shard: TxnShard) -> None:
        """Replay the partition up to its log end, wait for the HW to cover it, then resume the
        markers of every decided transaction (`LedShards` retries a load that raises)."""
        fields = {"topic": TOPIC, "partition": shard.partition, "leader_epoch": shard.leader_epoch}
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

    def _shard_for(self, transactional_id: str) -> TxnShard:
        return self._led.shard_for(transactional_id, "transactional id", " with key_type TRANSACTION")

    # ------------------------------------------------------------------ decide, write, apply

    async def run(self, transactional_id: str, decide: Decide, registering: bool = False,
                  adding: frozenset[TopicPartition] | None = None, settling: bool = False) -> Decision:
        """Decide on the id's current metadata, make the decision's log durable, apply it, and
        start its markers: the one path of every change. Decisions queue while the shard's
        previous write replicates and go out together (group commit, decision_batch.py).
        ``adding``: the partitions of an add, which waits for the last transaction's markers
        only if one of them owes one. Raises `Refused` (retriable coordinator errors); the
        decision's own error is in the returned Decision."""
        shard = self._shard_for(transactional_id)
        await self._markers_done(shard, transactional_id, adding)
        if not shard.active:
            raise Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} stopped coordinating {transactional_id!r}: "
                          "call FindCoordinator and retry")
        request = Request(transactional_id, decide, registering, asyncio.get_running_loop().create_future(), settling)
        shard.queue.append(request)
        if shard.writer is None or shard.writer.done():
            shard.writer = asyncio.ensure_future(self._write_queued(shard))
        return await asyncio.shield(request.answer)  # a caller that goes away does not cancel the batch

    async def _write_queued(self, shard: TxnShard) -> None:
        """Write the queued decisions, a batch at a time, until none is left."""
        while shard.queue:
            requests, shard.queue = shard.queue, []
            try:
                if not shard.active:
                    raise Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} stopped coordinating {TOPIC}-{shard.partition}: "
                                  "call FindCoordinator and retry")
                answers = await self._decide_and_write(shard, requests)
            except Refused as refusal:
                answers = [refusal] * len(requests)
            except Exception as exc:  # a bug must not leave requests waiting forever
                self._log.exception("transaction decisions failed", topic=TOPIC, partition=shard.partition)
                answers = [Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the coordinator failed ({exc!r}): retry")] * len(requests)
            for request, answer in zip(requests, answers):
                if isinstance(answer, Decision) and answer.markers is not None:
                    self._complete_later(shard, request.transactional_id, answer.markers)
                if request.answer.done():
                    continue
                if isinstance(answer, Refused):
                    request.answer.set_exception(answer)
                else:
                    request.answer.set_result(answer)

    async def _decide_and_write(self, shard: TxnShard, requests: list[Request]) -> list[Decision | Refused]:
        """Decide every request in order, write their records as one batch (acks=all) and apply
        them. A refused producer id allocation refuses its request only; a failed write raises
        `Refused` for all (nothing changed)."""
        batch = DecisionBatch(shard.ids)
        answers: list[Decision | Refused] = []
        recording: list[Completion] = []  # completions whose record this write carries
        for request in requests:
            tid = request.transactional_id
            completed = self._completed(shard, tid, batch.current(tid), request.settling)
            if completed:
                recording.append(shard.completing[tid])
            meta = completed[0] if completed else batch.current(tid)
            try:
                fresh = await self._fresh_producer_id() if sm.needs_fresh_producer_id(meta, request.registering) else sm.NO_PRODUCER_ID
            except Refused as refusal:
                answers.append(refusal)
                continue
            decision = request.decide(meta, self.clock_ms(), fresh)
            decision = Decision(decision.error, decision.answer, completed + decision.log, decision.markers)
            if self.markers_before_decision and decision.markers is not None:
                self._complete_later(shard, tid, decision.markers)  # unsafe: before the decision is durable
            batch.add(decision)
            answers.append(decision)
        if batch.log:
            await self._write(shard, tuple(batch.log))
            self._apply(shard, tuple(batch.log))
        for completion in recording:
            completion.recorded.set()
        return answers

    async def _markers_done(self, shard: TxnShard, transactional_id: str, adding: frozenset[TopicPartition] | None) -> None:
        """Wait (up to MARKERS_WAIT_MS) for the id's markers in flight, if any: the state
        machine would answer CONCURRENT_TRANSACTIONS until they are written, and the producer
        retry after a backoff; deciding once they are done answers the same, sooner, and
        carries CompleteCommit/CompleteAbort in the same write (`_completed`). An add of
        partitions none of these markers go to (``adding``) does not wait: the state machine
        starts the next transaction owing them."""
        completion = shard.completing.get(transactional_id)
        if completion is None or completion.task.done() or completion.marked.is_set():
            return
        if adding is not None and not adding & completion.plan.partitions:
            return
        marked = asyncio.ensure_future(completion.marked.wait())
        try:
            await asyncio.wait([completion.task, marked], timeout=MARKERS_WAIT_MS / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            marked.cancel()

    def _completed(self, shard: TxnShard, transactional_id: str, meta: TxnMetadata | None,
                   settling: bool = False) -> tuple[TxnMetadata, ...]:
        """CompleteCommit/CompleteAbort of the id's transaction (``meta``) if every marker is
        committed but that record is not yet written (it then goes in the same batch as the
        decision at hand: one replication round trip less before the next transaction), else ().
        For an Ongoing transaction that owed them, the record clearing ``owed``: left to that
        transaction's next write (its EndTxn) when ``settling`` (the marker task's own), so
        that the shard's writer is free when that write comes."""
        completion = shard.completing.get(transactional_id)
        if completion is None or not completion.marked.is_set() or meta is None or sm.pending_markers(meta) != completion.plan:
            return ()
        if settling and meta.state is TxnState.ONGOING:
            return ()
        return (sm.markers_written(meta, self.clock_ms()),)

    async def _fresh_producer_id(self) -> int:
        answer = await self._allocate()
        if answer.error_code != ErrorCode.NONE:
            raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no producer id could be allocated ({answer.error_message}): retry shortly")
        return answer.producer_id

    async def _write(self, shard: TxnShard, entries: tuple[TxnMetadata, ...]) -> None:
        encoded = [record_codec.encode(meta) for meta in entries]
        batch = encode_batch([v for _, v in encoded], [k for k, _ in encoded], now_ms=self.clock_ms())
        [result] = await self.replicas.produce(ACKS_ALL, WRITE_TIMEOUT_MS, [ProduceItem(TOPIC, shard.partition, batch, shard.leader_epoch)])
        if not result.failed:
            return
        if result.error.code in OUTCOME_UNKNOWN and shard.active:
            self._led.unload(shard, f"a write's outcome is unknown ({result.error.code.name}): reload from the log")
            self.sync_leadership()
        code = ErrorCode.NOT_COORDINATOR if result.error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) \
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        ids = sorted({meta.transactional_id for meta in entries})
        raise Refused(code, f"transactional ids {ids}: the write to {TOPIC}-{shard.partition} failed "
                      f"({result.error.code.name}: {result.error.message}); nothing changed: call FindCoordinator and retry")

    def _apply(self, shard: TxnShard, entries: tuple[TxnMetadata, ...]) -> None:
        for meta in entries:
            if shard.active:  # else durable, but no longer ours: the next leader replays it
                if meta.state is TxnState.DEAD:
                    shard.ids.pop(meta.transactional_id, None)
                else:
                    shard.ids[meta.transactional_id] = meta
            self._log.info("transaction state", topic=TOPIC, partition=shard.partition, **_fields(meta),
                           partitions=_names(meta.partitions), **({"owed_markers": _names(meta.owed.partitions)} if meta.owed else {}))

    # ------------------------------------------------------------------ markers

    def _complete_later(self, shard: TxnShard, transactional_id: str, plan: MarkerPlan) -> None:
        running = shard.completing.get(transactional_id)
        if running is None or running.task.done() or running.plan != plan:  # another plan: the last one is complete
            shard.completing[transactional_id] = Completion(plan, asyncio.ensure_future(self._complete(shard, transactional_id, plan)))

    async def _complete(self, shard: TxnShard, transactional_id: str, plan: MarkerPlan) -> None:
        """Write every partition's marker until each is committed (rounds with backoff, leaders
        read afresh each round), then make CompleteCommit/CompleteAbort durable. Stops if the shard goes:
        the next leader resumes from the PrepareCommit/PrepareAbort record."""
        missing, backoff_ms = set(plan.partitions), MARKER_BACKOFF_MS[0]
        try:
            while missing and shard.active:
                written = await self.markers.write_round(plan, missing, shard.leader_epoch, transactional_id)
                missing -= written
                if missing:
                    backoff_ms = MARKER_BACKOFF_MS[0] if written else min(backoff_ms * 2, MARKER_BACKOFF_MS[1])
                    await asyncio.sleep(backoff_ms / 1000)
            completion = shard.completing.get(transactional_id)
            if not missing and completion is not None and completion.task is asyncio.current_task():
                completion.marked.set()
                try:  # the producer's next request, waiting or about to come, carries CompleteCommit/CompleteAbort
                    await asyncio.wait_for(completion.recorded.wait(), COMPLETE_LINGER_MS / 1000)
                    return
                except TimeoutError:
                    pass
            while shard.active:
                try:  # a decision changing nothing: `_completed` adds CompleteCommit/CompleteAbort if still owed
                    await self.run(transactional_id, lambda meta, now, fresh: Decision(ErrorCode.NONE, meta), settling=True)
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
            completion = shard.completing.get(transactional_id)
            if completion is not None and completion.task is asyncio.current_task() and not self._owed(shard, transactional_id, completion):
                del shard.completing[transactional_id]

    @staticmethod
    def _owed(shard: TxnShard, transactional_id: str, completion: Completion) -> bool:
        """Whether the next transaction's record still owes ``completion``'s markers, all
        committed: kept, so that its next write records them (`_completed`)."""
        meta = shard.ids.get(transactional_id)
        return completion.marked.is_set() and meta is not None and sm.pending_markers(meta) == completion.plan

    # ------------------------------------------------------------------ the requests

    async def init_producer_id(self, transactional_id: str, timeout_ms: int) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.init_producer_id(
            meta, transactional_id, timeout_ms, self.settings.max_timeout_ms, now, fresh), registering=True)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: frozenset[TopicPartition]) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.add_partitions(
            meta, producer_id, producer_epoch, partitions, now), adding=partitions)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, keep_epoch: bool = False) -> Decision:
        return await self.run(transactional_id, lambda meta, now, fresh: sm.end_txn(
            meta, producer_id, producer_epoch, commit, now, fresh, keep_epoch))

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self._shard_for(transactional_id).ids.get(transactional_id)

    def loaded_transactions(self) -> list[TxnMetadata]:
        return [meta for shard in self._led.loaded() for meta in shard.ids.values()]

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

    async def _expire(self, shard: TxnShard, transactional_id: str) -> None:
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


def _names(partitions: frozenset[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)


def _fields(meta: TxnMetadata) -> dict[str, object]:
    return {"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch, "state": meta.state.value}
