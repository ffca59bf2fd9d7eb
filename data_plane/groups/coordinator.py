"""The group coordinator's shell: which offsets partitions this broker leads, loading and
unloading their groups, and running each group operation as decide → write → apply.

- **Shards.** One `GroupShard` per partition of `__consumer_offsets` this broker leads, at one
  leader epoch. `sync_leadership` (a timer) starts a shard when the broker becomes leader
  (the shard replays the partition up to its log end, then waits until the HW covers it:
  until then requests get COORDINATOR_LOAD_IN_PROGRESS) and drops it when leadership goes
  (requests get NOT_COORDINATOR).
- **Writes.** A group's operations queue up and run in rounds: the pure core decides each
  on a scratch copy (the next one on what the previous left) and the round's records go, as
  one batch, through the partition's normal leader append with acks=all, at the shard's
  leader epoch. The scratch copy replaces the group, and the answers go out, only once the HW
  covers the batch; if the write fails, the group is unchanged and every answer of the round
  is retriable. A write whose outcome is unknown (timed out, or the ISR shrank after the
  append) makes the shard reload from the log, so memory never differs from the log.
- **Transactional offsets (KIP-447).** A TxnOffsetCommit's records go in a round of their
  own, as a transactional batch of the producer; once durable they are staged in the shard
  (`txn_offsets`), not applied. A marker this broker appends to the partition (the replica
  manager's ``marker_listeners``) is applied once the HW covers it, through each concerned
  group's queue (so it lands after any round already writing that producer's offsets): a
  commit makes the staged offsets committed, an abort drops them. Markers below the log end a
  load replayed were applied by the load.
- **Timers.** `tick` removes members past their session timeout (or past their rebalance
  timeout with partitions still to revoke) and, every offsets retention check interval,
  expires the committed offsets (and empty groups) past the retention (`offsets_expiry`).
- **Assignment log.** Every durable change of a member's current assignment is logged
  (``group assignment``: group, member, member epoch, assigned, pending revocation) in commit
  order: the ownership history a chaos checker reads.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, TypeVar

import structlog

from data_plane.requests import ProduceItem
from data_plane.coordination.internal_partitions import LedShards, Shard, replay, wait_until_committed
from data_plane.control_batch import decode_marker
from data_plane.groups import membership, offsets, offsets_expiry, record_codec
from data_plane.groups.changes import GroupChange
from data_plane.coordination import OUTCOME_UNKNOWN, WRITE_TIMEOUT_MS, Refused
from data_plane.groups.membership import GroupSettings
from server_common.internal_topics import OFFSETS_TOPIC
from data_plane.groups.state import Group, TopicPartition, partitions_by_topic
from data_plane.groups.txn_offsets import PendingTxnOffsets, note_logged
from data_plane.record_batch import DecodedBatch, encode_batch
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import ACKS_ALL

log = structlog.get_logger("groups")

T = TypeVar("T")
ROUND_BYTES_MAX = 256 * 1024  # records of one round (one batch); the offsets topic's max.message.bytes is 1 MiB
# A transactional offsets write the offsets partition refused for its producer (epoch, or KIP-890 verification).
TXN_REFUSALS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE,
                                ErrorCode.INVALID_PRODUCER_ID_MAPPING})


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class GroupShard(Shard):
    """The groups of one offsets partition this broker leads at ``leader_epoch``."""

    groups: dict[str, Group] = field(default_factory=dict)
    queues: dict[str, list[Pending]] = field(default_factory=dict)  # per group: operations waiting for the next write
    expiring: set[str] = field(default_factory=set)
    txn_offsets: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)
    load_end: int | None = None  # the log end the load replays to: markers below it are the load's


class TxnProducer(NamedTuple):
    """A TxnOffsetCommit's producer: its offsets are this producer's transactional batch, which
    the offsets partition's leader verifies with the coordinator of ``transactional_id``."""

    producer_id: int
    producer_epoch: int
    transactional_id: str


@dataclass
class Pending:
    """One queued operation: its decision, and the future its caller awaits."""

    decide: Callable[[Group | None, int], tuple[GroupChange, object]]
    future: asyncio.Future
    producer: TxnProducer | None = None  # a TxnOffsetCommit's: its records are that producer's transactional batch


class GroupCoordinator:
    def __init__(self, broker_id: int, replicas, settings: GroupSettings, clock_ms: Callable[[], int] = now_ms,
                 visible: membership.Visibility = membership.every_topic) -> None:
        self.broker_id = broker_id
        self.visible = visible  # which topics a member's principal may have in its subscription
        self.replicas = replicas  # the broker's ReplicaManager: partitions, produce, the metadata image
        self.settings = settings
        self.clock_ms = clock_ms
        self._log = log.bind(broker_id=broker_id)
        self._led = LedShards(OFFSETS_TOPIC, broker_id, replicas, lambda: self.clock_ms(), GroupShard, self._load, self._unloaded)
        self.shards = self._led.by_index
        self._next_retention_check_ms = clock_ms() + settings.offsets_retention_check_interval_ms

    # ------------------------------------------------------------------ leadership

    def offsets_partition_count(self) -> int:
        return self._led.partition_count()

    def topics(self) -> dict[str, int]:
        image = self.replicas.image
        return {name: len(t.partitions) for name, t in image.topics.items()} if image is not None else {}

    def sync_leadership(self) -> None:
        """Start a shard for each offsets partition led here at a new epoch; drop the others."""
        self._led.sync()

    def _unloaded(self, shard: GroupShard, why: str) -> None:
        self._log.info("groups unloaded", topic=OFFSETS_TOPIC, partition=shard.partition, leader_epoch=shard.leader_epoch,
                       groups=len(shard.groups), reason=why)

    async def _load(self, shard: GroupShard) -> None:
        """Replay the partition up to its log end, then wait for the HW to cover it (`LedShards`
        retries a load that raises)."""
        fields = {"topic": OFFSETS_TOPIC, "partition": shard.partition, "leader_epoch": shard.leader_epoch}
        partition = self.replicas.partitions[(OFFSETS_TOPIC, shard.partition)]
        shard.load_end = partition.log_end_offset

        def take(batch: DecodedBatch) -> int:
            header = batch.header
            if header.is_control:
                marker = decode_marker(batch)
                shard.txn_offsets.on_marker(header.producer_id, header.base_offset, marker.commit, shard.groups)
                return 0
            decoded = [record_codec.decode(k, v) for k, v in zip(batch.keys, batch.values)]
            if header.is_transactional:
                shard.txn_offsets.stage(header.producer_id, header.base_offset, decoded)
            else:
                shard.txn_offsets.replay_plain(shard.groups, decoded, header.base_offset)
            return len(decoded)

        end, records = await replay(partition, take)
        if not await wait_until_committed(partition, end, lambda: shard.active):
            return
        now = self.clock_ms()
        for group in shard.groups.values():
            membership.start_sessions(group, self.settings, now)
        shard.loaded = True
        self._log.info("groups loaded", **fields, groups=len(shard.groups), records=records, log_end_offset=end)

    def _shard_for(self, group_id: str) -> GroupShard:
        return self._led.shard_for(group_id, "group")

    # ------------------------------------------------------------------ operations

    async def run(self, group_id: str, decide: Callable[[Group | None, int], tuple[GroupChange, T]],
                  producer: TxnProducer | None = None) -> T:
        """Queue an operation on the group and wait until its records are durable and applied
        (with ``producer``: durable and staged): the one path of every group change. Raises
        `Refused` (from the decision, or a retriable coordinator error)."""
        return await self._queue(group_id, decide, producer)

    def _queue(self, group_id: str, decide: Callable[[Group | None, int], tuple[GroupChange, T]],
               producer: TxnProducer | None = None) -> asyncio.Future:
        """Queue an operation on the group; the future `run` awaits. Operations queued with no
        await between them run one after the other, with nothing else between."""
        shard = self._shard_for(group_id)
        future = asyncio.get_running_loop().create_future()
        queue = shard.queues.setdefault(group_id, [])
        queue.append(Pending(decide, future, producer))
        if len(queue) == 1:
            asyncio.ensure_future(self._drain(shard, group_id))
        return future

    async def _drain(self, shard: GroupShard, group_id: str) -> None:
        """Run the group's queued operations, a round at a time: each round decides every
        operation queued so far, each on the state the previous one left, and writes all their
        records as one batch (appended atomically), so a busy group pays one replication round
        trip per round, not per request. Operations queued meanwhile wait for the next round."""
        queue = shard.queues[group_id]
        try:
            await self._drain_rounds(shard, group_id, queue)
        except Exception:  # a bug must not leave callers waiting forever
            self._log.exception("group operation failed", group=group_id, topic=OFFSETS_TOPIC, partition=shard.partition)
            _settle(queue[:], Refused(ErrorCode.UNKNOWN_SERVER_ERROR, f"group {group_id}: the coordinator failed (see broker "
                                      f"{self.broker_id}'s log): retry"))
            queue.clear()
        if shard.queues.get(group_id) is queue:
            del shard.queues[group_id]

    async def _drain_rounds(self, shard: GroupShard, group_id: str, queue: list[Pending]) -> None:
        while queue:
            if not shard.active:
                refusal = Refused(ErrorCode.NOT_COORDINATOR, f"broker {self.broker_id} stopped coordinating group {group_id}: "
                                  "call FindCoordinator and retry")
                _settle(queue[:], refusal)
                queue.clear()
                break
            group = shard.groups.get(group_id)
            now = self.clock_ms()
            decided: list[tuple[Pending, GroupChange, object]] = []
            encoded: list[tuple[bytes, bytes | None]] = []
            round_bytes = round_size = 0
            producer = queue[0].producer  # a round is one batch: one producer's transactional records, or plain ones
            for pending in queue:
                if round_bytes >= ROUND_BYTES_MAX or pending.producer != producer:
                    break  # the rest waits for the next round: one batch stays well below max.message.bytes
                round_size += 1
                try:
                    change, result = pending.decide(group, now)
                except Refused as refusal:
                    _settle([pending], refusal)
                    continue
                if producer is None and (change.changed or group is not None):
                    group = None if change.group.deleted else change.group
                for record in change.records:
                    key, value = record_codec.encode(record)
                    encoded.append((key, value))
                    round_bytes += len(key) + len(value or b"")
                decided.append((pending, change, result))
            try:
                base_offset = await self._write(shard, group_id, encoded, producer) if encoded else -1
            except Refused as refusal:
                _settle([p for p, _, _ in decided], refusal)
            else:
                if producer is None:
                    self._apply(shard, group_id, group, [change for _, change, _ in decided], base_offset)
                elif encoded and shard.active:
                    shard.txn_offsets.stage(producer.producer_id, base_offset, [r for _, change, _ in decided for r in change.records])
                for pending, _, result in decided:
                    if not pending.future.done():
                        pending.future.set_result(result)
            del queue[:round_size]

    def group(self, group_id: str) -> Group | None:
        """The group as it is now (reads need no lock: every swap is atomic on the event loop)."""
        return self._shard_for(group_id).groups.get(group_id)

    def loaded_groups(self) -> list[Group]:
        return [g for shard in self._led.loaded() for g in shard.groups.values()]

    async def _write(self, shard: GroupShard, group_id: str, encoded: list[tuple[bytes, bytes | None]],
                     producer: TxnProducer | None) -> int:
        """Append one batch (with ``producer``: transactional, of that producer) and wait until
        the HW covers it; its base offset. Raises `Refused` when it is not durable."""
        values, keys = [v for _, v in encoded], [k for k, _ in encoded]
        if producer is None:
            batch = encode_batch(values, keys, now_ms=self.clock_ms())
        else:  # the sequence is not checked for coordinator writes (ProduceItem.from_coordinator); the epoch is
            batch = encode_batch(values, keys, now_ms=self.clock_ms(), producer_id=producer.producer_id,
                                 producer_epoch=producer.producer_epoch, base_sequence=0, transactional=True)
        item = ProduceItem(OFFSETS_TOPIC, shard.partition, batch, shard.leader_epoch, from_coordinator=True)
        [result] = await self.replicas.produce(ACKS_ALL, WRITE_TIMEOUT_MS, [item], producer.transactional_id if producer else "")
        if not result.failed:
            return result.base_offset
        if producer is not None and result.error.code in TXN_REFUSALS:
            raise txn_refusal(group_id, f"{OFFSETS_TOPIC}-{shard.partition}", producer, result.error.code, result.error.message)
        if result.error.code in OUTCOME_UNKNOWN and shard.active:
            self._led.unload(shard, f"a write's outcome is unknown ({result.error.code.name}): reload from the log")
            self.sync_leadership()
        code = ErrorCode.NOT_COORDINATOR if result.error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) \
            else ErrorCode.COORDINATOR_NOT_AVAILABLE
        raise Refused(code, f"group {group_id}: the write to {OFFSETS_TOPIC}-{shard.partition} failed "
                      f"({result.error.code.name}: {result.error.message}); nothing changed: call FindCoordinator and retry")

    def _apply(self, shard: GroupShard, group_id: str, group: Group | None, changes: list[GroupChange], log_offset: int) -> None:
        if not shard.active:
            return  # durable, but this broker no longer coordinates: the next leader replays it
        shard.txn_offsets.on_logged(group, [r for change in changes for r in change.records], log_offset)
        if group is None:
            shard.groups.pop(group_id, None)
        else:
            shard.groups[group_id] = group
        for change in changes:
            for member_id, current in change.assignment_changes():
                self._log.info(
                    "group assignment", group=group_id, member=member_id, topic=OFFSETS_TOPIC, partition=shard.partition,
                    leader_epoch=shard.leader_epoch, group_epoch=change.group.epoch,
                    member_epoch=current.member_epoch if current is not None else -1,
                    assigned=_wire(current.assigned) if current is not None else {},
                    pending_revocation=_wire(current.pending_revocation) if current is not None else {},
                )

    # ------------------------------------------------------------------ the requests

    async def heartbeat(self, request: membership.Heartbeat) -> membership.HeartbeatAnswer:
        def decide(group: Group | None, now: int):
            outcome = membership.heartbeat(group, request, self.topics(), self.settings, now, self.visible)
            return outcome.change, outcome.answer
        return await self.run(request.group_id, decide)

    async def commit(self, group_id: str, member_id: str, member_epoch: int, items: list[offsets.OffsetToCommit]) -> offsets.PartitionErrors:
        return await self.run(group_id, lambda group, now: offsets.commit(group, group_id, member_id, member_epoch, items, now))

    async def txn_commit(self, group_id: str, producer: TxnProducer, member_id: str, member_epoch: int,
                         items: list[offsets.OffsetToCommit]) -> offsets.PartitionErrors:
        """TxnOffsetCommit: answered once the producer's transactional batch is durable and staged.
        An admin commit to a group that does not exist (never did, or a DeleteGroups queued
        ahead just deleted it) first creates the group with its epoch record, in a plain round
        queued right before the transactional one so that nothing comes between them."""
        created = self._queue(group_id, lambda group, now: (offsets.create_for_txn_commit(group, group_id, member_id, member_epoch), None))
        staged = self._queue(group_id, lambda group, now: offsets.txn_commit(group, group_id, member_id, member_epoch, items, now),
                             producer)
        answers = await asyncio.gather(created, staged, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return answers[1]

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> offsets.PartitionErrors:
        def decide(group: Group | None, now: int):
            subscribed = dict(group.metadata.subscribed_topics) if group is not None and group.members else {}
            return offsets.delete_offsets(group, group_id, partitions, subscribed)
        return await self.run(group_id, decide)

    async def delete_group(self, group_id: str) -> None:
        await self.run(group_id, lambda group, now: (offsets.delete_group(group, group_id), None))

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with an offset in an open transaction (OffsetFetch require_stable)."""
        return self._shard_for(group_id).txn_offsets.unstable(group_id)

    # ------------------------------------------------------------------ transaction markers

    def on_marker(self, topic: str, index: int, producer_id: int, commit: bool, offset: int) -> asyncio.Task | None:
        """A marker this broker appended as leader (a ``ReplicaManager.marker_listeners`` entry):
        the task that applies it, when it is on an offsets partition coordinated here."""
        shard = self.shards.get(index) if topic == OFFSETS_TOPIC else None
        if shard is None:
            return None
        return asyncio.ensure_future(self._complete_transaction(shard, producer_id, commit, offset))

    async def _complete_transaction(self, shard: GroupShard, producer_id: int, commit: bool, marker_offset: int) -> None:
        """Apply a marker to the groups it concerns once the shard is loaded and the HW covers
        the marker: memory never holds what a leader change could take from the log. A marker
        the load replayed, or one whose shard is gone, is left alone (a later load replays it)."""
        partition = self.replicas.partitions[(OFFSETS_TOPIC, shard.partition)]
        if shard.task is not None:
            await asyncio.wait([shard.task])  # the load ends (or is cancelled) first
        if not shard.active or marker_offset < (shard.load_end or 0):
            return
        await wait_until_committed(partition, marker_offset + 1, lambda: shard.active)
        writing = {gid for gid, queue in shard.queues.items() if any(p.producer and p.producer.producer_id == producer_id for p in queue)}
        for group_id in sorted(shard.txn_offsets.groups_of(producer_id, marker_offset) | writing):
            def decide(group: Group | None, now: int, group_id: str = group_id):
                if not shard.active:  # queued on a newer shard, which replays the marker itself
                    raise Refused(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{shard.partition} was reloaded")
                change = GroupChange.of(group, group_id)
                if commit:
                    applied = shard.txn_offsets.committed(producer_id, marker_offset, group_id, change.group)
                    change.apply_logged([s.record for s in applied])
                    note_logged(change.group, applied)
                return change, None
            try:
                await self.run(group_id, decide)
            except Refused as refusal:
                self._log.info("transaction marker left to the next load", group=group_id, producer_id=producer_id,
                               offset=marker_offset, reason=refusal.message)
                return
            shard.txn_offsets.forget(producer_id, marker_offset, group_id)

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Follow leadership, expire members whose deadlines passed and, every retention check
        interval, offsets past the retention."""
        self.sync_leadership()
        now = self.clock_ms()
        check_retention = now >= self._next_retention_check_ms
        if check_retention:
            self._next_retention_check_ms = now + self.settings.offsets_retention_check_interval_ms
        topics = None
        for shard in list(self.shards.values()):
            if not shard.loaded:
                continue
            for group in list(shard.groups.values()):
                if group.group_id in shard.expiring:
                    continue
                if _overdue(group, now):
                    topics = topics if topics is not None else self.topics()
                    shard.expiring.add(group.group_id)
                    asyncio.ensure_future(self._expire(shard, group.group_id, topics))
                elif check_retention and self._expire_offsets(shard, group, now) is not None:
                    shard.expiring.add(group.group_id)
                    asyncio.ensure_future(self._expire_offsets_of(shard, group.group_id))

    async def _expire(self, shard: GroupShard, group_id: str, topics: dict[str, int]) -> None:
        def decide(group: Group | None, now: int):
            change = membership.expire(group, topics, now, self.visible) if group is not None else None
            expired = sorted(set(group.members) - set(change.group.members)) if change is not None else []
            return (change or GroupChange.of(group, group_id)), {"members": expired} if expired else {}
        await self._timer_run(shard, group_id, decide, "members expired", "member expiry deferred")

    def _expire_offsets(self, shard: GroupShard, group: Group, now: int) -> GroupChange | None:
        return offsets_expiry.expire(group, now, self.settings.offsets_retention_ms, shard.txn_offsets.unstable(group.group_id))

    async def _expire_offsets_of(self, shard: GroupShard, group_id: str) -> None:
        def decide(group: Group | None, now: int):
            change = self._expire_offsets(shard, group, now) if group is not None else None
            if change is None:
                return GroupChange.of(group, group_id), {}
            expired = [f"{r.key.topic}-{r.key.partition}" for r in change.records if r.key.topic]
            return change, {"offsets": expired, "group_deleted": change.group.deleted}
        await self._timer_run(shard, group_id, decide, "offsets expired", "offsets expiry deferred")

    async def _timer_run(self, shard: GroupShard, group_id: str, decide: Callable[[Group | None, int], tuple[GroupChange, dict]],
                         done: str, deferred: str) -> None:
        """Run a timer's decision on the group; log what it removed (``done``, with the fields
        the decision returns, if any) or why not now."""
        try:
            removed = await self.run(group_id, decide)
            if removed:
                self._log.info(done, group=group_id, **removed, topic=OFFSETS_TOPIC, partition=shard.partition)
        except Refused as refusal:
            self._log.info(deferred, group=group_id, reason=refusal.message)
        finally:
            shard.expiring.discard(group_id)


def txn_refusal(group_id: str, partition: str, producer: TxnProducer, code: ErrorCode, detail: str) -> Refused:
    """A TxnOffsetCommit the offsets partition refused for its producer: fenced (a newer epoch
    exists), or the partition not in the producer's ongoing transaction, as its coordinator
    answered the leader's verification (KIP-890)."""
    who = f"group {group_id}: producer {producer.producer_id} (epoch {producer.producer_epoch}) of {producer.transactional_id!r}"
    if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
        return Refused(ErrorCode.PRODUCER_FENCED, f"{who} is fenced ({detail}): a newer incarnation or the transaction's end "
                       "bumped its epoch: this producer must stop; nothing was written")
    if code is ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        return Refused(code, f"{who}: the producer id does not hold the transactional id ({detail}): call InitProducerId "
                       "again; nothing was written")
    return Refused(ErrorCode.INVALID_TXN_STATE, f"{who}: {partition}, where the group's offsets go, is not in an ongoing "
                   f"transaction of the producer ({detail}): add it to the transaction first (AddPartitionsToTxn of {partition}, "
                   "Kafka's AddOffsetsToTxn; Producer.send_offsets_to_transaction does it), or begin a new transaction if "
                   "that one ended; nothing was written")


def _settle(pending: list[Pending], refusal: Refused) -> None:
    for p in pending:
        if not p.future.done():
            p.future.set_exception(refusal)


def _overdue(group: Group, now: int) -> bool:
    return any(d < now for d in group.session_deadlines_ms.values()) or any(d < now for d in group.revocation_deadlines_ms.values())


def _wire(partitions) -> dict[str, list[int]]:
    return dict(partitions_by_topic(partitions))

