"""One partition replica hosted by this broker: its log, its idempotent-producer state, the
leadership state the metadata quorum assigned to it and, while this broker leads it, the
replication core (`data_plane.replication.partition_state`).

Only this class touches the log, the producer state and the core. It offers one entry point
per event, and each returns a `Ready`: what the broker must do about it (answer completed
acks=all produces, send an ISR proposal, wake waiting fetches). `ReplicaManager.carry_out`
is the one place that does it, as etcd's raft hands its `Ready` to one loop.

- As leader: HW = min LEO over the (maximal) ISR; the core computes it and owns it.
- As follower: HW = the leader's HW from fetch answers, capped by the local LEO; this class
  owns it. Exactly one of the two exists at a time: becoming leader seeds the core with the
  follower's HW, resigning takes the core's HW back.
- Becoming leader assigns (leader epoch, LEO) in the log's epoch cache first, as Kafka's
  `makeLeader` does, so a follower that fetches with an older epoch learns where it ends.

Errors are `PartitionError`s (a code and what to do next); a `StorageError` passes through
unchanged: the caller takes the replica offline (`mark_offline`) and answers STORAGE_ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import structlog

from data_plane.partition_errors import PartitionError, check_leader_epoch, not_leader
from data_plane.wakeups import Wakeups
from data_plane.control_batch import decode_marker, validate_marker
from data_plane.record_batch import BatchHeader, decode_batch, iter_headers
from data_plane.replication.divergence import FetchCheck
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import (
    ACKS_ALL,
    AlterPartitionCommitted,
    AlterPartitionRefused,
    BrokerStatus,
    FollowerFetch,
    IsrProposal,
    LeaderDecisions,
    LeaderPartitionState,
    ProduceOutcome,
)
from data_plane.replication.producer_state import NO_PRODUCER_ID, Duplicate, ProducerState, Rejected, SequenceCheck
from data_plane.replication.transaction_index import AbortedTxn, TransactionIndex
from data_plane.storage import (
    CorruptBatchError,
    DamagedRange,
    DamagedRangeError,
    InvalidRecordError,
    LogSettings,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)

log = structlog.get_logger("broker.partition")


@dataclass(frozen=True)
class LeadershipState:
    """What the metadata image says about this partition."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


NO_LEADERSHIP = LeadershipState(-1, -1, -1, (), ())  # a new replica's state until metadata gives it one


@dataclass(frozen=True)
class Ready:
    """What the broker must do after one partition event (etcd's ``Ready``)."""

    completed: tuple[ProduceOutcome, ...] = ()  # acks=all produces to answer
    isr_proposal: IsrProposal | None = None  # AlterPartition to send to the controller
    high_watermark_moved: bool = False  # wake every fetch waiting on this partition
    appended: bool = False  # the log end moved: wake followers' fetches

    def then(self, later: Ready) -> Ready:
        """Both events' actions; the later proposal wins (the core holds one at a time)."""
        return Ready(
            self.completed + later.completed,
            later.isr_proposal or self.isr_proposal,
            self.high_watermark_moved or later.high_watermark_moved,
            self.appended or later.appended,
        )


@dataclass(frozen=True)
class Appended:
    """A leader append's answer; ``wait_until`` is the HW an acks=all produce waits for
    (None: the batches were already committed, or acks is not all)."""

    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    wait_until: int | None


@dataclass(frozen=True)
class DelayedWait:
    """Where an acks=all produce waits: the token its outcome is reported under, the
    request's deadline and the time it arrived."""

    token: int
    deadline_ms: int
    now_ms: int


class Partition:
    """One replica of one partition on this broker."""

    def __init__(self, topic: str, partition: int, broker_id: int, plog: PartitionLog, high_watermark: int,
                 durable_acks: bool = False) -> None:
        """``durable_acks``: ``--durability fsync``, the HW (as leader) counts fsynced offsets."""
        assert partition >= 0 and broker_id >= 0 and high_watermark >= 0, (partition, broker_id, high_watermark)
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.log = plog
        self.durable_acks = durable_acks
        self.state = NO_LEADERSHIP
        self.offline_reason: str | None = None
        self._follower_high_watermark = min(high_watermark, plog.log_end_offset)
        self._core: LeaderPartitionState | None = None
        self._producers = ProducerState()
        headers = list(plog.batch_headers(plog.log_start_offset))
        self._producers.rebuild_from_batches(headers)
        self._txns = TransactionIndex()
        self._follow_transactions(headers)
        self._txns.remove_before(plog.log_start_offset)  # a batch may straddle the log start
        self._hw_wakeups = Wakeups()
        self._append_wakeups = Wakeups()
        self._log = log.bind(broker_id=broker_id, topic=topic, partition=partition)

    # ------------------------------------------------------------------ queries

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id and self._core is not None

    @property
    def high_watermark(self) -> int:
        """Read once of ``_core``: the HW checkpoint reads it from a worker thread while the
        event loop may resign the leadership."""
        core = self._core
        return core.high_watermark if core is not None else self._follower_high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """A follower learns the leader's HW (already capped by its LEO) from fetch answers."""
        assert self._core is None, f"{self.name}: a leader's HW is its core's"
        assert value <= self.log.log_end_offset, (value, self.log.log_end_offset)
        self._follower_high_watermark = value

    @property
    def last_stable_offset(self) -> int:
        """The LSO (docs/transactions.md): read_committed readers are served only below it."""
        high_watermark = self.high_watermark
        self._txns.on_high_watermark(high_watermark)
        return self._txns.last_stable_offset(high_watermark)

    def aborted_transactions(self, from_offset: int, to_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [from_offset, to_offset)."""
        return self._txns.aborted_between(from_offset, to_offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def latest_epoch(self) -> int:
        return self.log.leader_epoch_cache.latest_epoch

    @property
    def epoch_entries(self) -> tuple[tuple[int, int], ...]:
        """The log's leader-epoch history, (epoch, start offset) oldest first."""
        return tuple(self.log.leader_epoch_cache.entries)

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def has_delayed_produces(self) -> bool:
        """acks=all produces are waiting here (the timer must expire them)."""
        return self._core is not None and self._core.has_delayed_produces

    @property
    def may_shrink_isr(self) -> bool:
        """Leader with an in-sync follower behind its log end: only such a leader can find a
        follower lagging on a timer tick (the ISR sweep visits no other)."""
        return self._core is not None and not self._core.followers_caught_up

    def fields(self) -> dict:
        """The log context every partition event carries."""
        return {"topic": self.topic, "partition": self.partition, "leader_epoch": self.state.leader_epoch,
                "partition_epoch": self.state.partition_epoch}

    def require_leader(self, requested_epoch: int) -> None:
        """Raise the error a client should see when this broker cannot serve it as leader."""
        if self.offline_reason is not None:
            raise PartitionError(ErrorCode.STORAGE_ERROR, f"{self.name} is offline on broker {self.broker_id}: {self.offline_reason}")
        check_leader_epoch(self.topic, self.partition, requested_epoch, self.state.leader_epoch)
        if not self.is_leader:
            raise not_leader(self.topic, self.partition, self.state.leader)

    def check_high_watermark_settled(self) -> None:
        """A new leader's HW starts at what it knew as a follower (or, after a restart, at its
        checkpoint), which may lag what was published before; until it reaches the log end
        this leadership started at, answering with it would show consumers the HW going
        backwards (Kafka answers OFFSET_NOT_AVAILABLE)."""
        core = self._core
        if core is not None and core.high_watermark < core.leadership_start_offset:
            raise PartitionError(
                ErrorCode.OFFSET_NOT_AVAILABLE,
                f"{self.name}: the leader (epoch {core.leader_epoch}) is still establishing its high watermark "
                f"({core.high_watermark} < {core.leadership_start_offset}, its log end when it took the leadership): retry shortly",
            )

    def replica_log_end_offsets(self) -> dict[int, int]:
        """Each replica's LEO as the leader knows it (-1: not heard from in this epoch)."""
        leos = {self.broker_id: self.log.log_end_offset}
        if self._core is not None:
            leos.update({r: p.log_end_offset for r, p in self._core.progress.items()})
        return leos

    def in_sync(self) -> frozenset[int]:
        """The ISR the leader acts on (committed ∪ proposed while a change is pending)."""
        return self._core.maximal_isr if self._core is not None else frozenset(self.state.isr)

    # ------------------------------------------------------------------ metadata events

    def on_leadership(self, state: LeadershipState, why: str, now_ms: int) -> Ready:
        """Metadata changed this partition: a change within the leader epoch goes to the core;
        a new epoch makes this replica leader or follower.

        Leader epochs only grow, so a state older than the newest epoch in the log is
        metadata from the past (a restarting broker streams the metadata log from its start
        and sees every old leadership go by). Leading in it would re-assign that old epoch at
        the log end and erase the epoch history after it, and followers would then truncate
        by that wrong history; so the replica only steps aside and waits for current metadata."""
        leading = state.leader == self.broker_id
        if state.leader_epoch == self.state.leader_epoch and self.is_leader == leading:
            self.state = state
            self._log.debug("partition changed", **self.fields(), isr=list(state.isr), replicas=list(state.replicas))
            if self._core is None:
                return Ready()
            return self._decided(self._core.on_partition_change(
                leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
                replicas=state.replicas, isr=frozenset(state.isr), now_ms=now_ms,
            ), now_ms)
        if self.offline_reason is not None:
            self.state = state
            return Ready()
        log_epoch = self.log.leader_epoch_cache.latest_epoch
        if state.leader_epoch < log_epoch:
            ready = self.resign()
            self.state = state
            self._log.info("metadata older than the log; waiting for newer metadata", **self.fields(), reason=why,
                           leader=state.leader, log_latest_epoch=log_epoch, log_end_offset=self.log.log_end_offset)
            return ready
        ready = self._become_leader(state, now_ms) if leading else self._become_follower(state)
        self._log.debug(  # the replica manager logs one line per metadata batch
            f"became {'leader' if leading else 'follower'}", **self.fields(), reason=why, leader=state.leader,
            isr=list(state.isr), log_end_offset=self.log.log_end_offset, high_watermark=self.high_watermark,
        )
        return ready

    def _become_leader(self, state: LeadershipState, now_ms: int) -> Ready:
        """Start a new leader epoch: a fresh core seeded with the log's epoch history."""
        ready = self.resign()
        self.state = state
        self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self._core = LeaderPartitionState(
            leader_id=self.broker_id,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            replicas=state.replicas,
            isr=frozenset(state.isr),
            leader_history=self.log.leader_epoch_cache.entries,
            log_end_offset=self.log.log_end_offset,
            high_watermark=min(self._follower_high_watermark, self.log.log_end_offset),
            min_insync_replicas=self.log.settings.min_insync_replicas,
            now_ms=now_ms,
            durable_offset=self.log.durable_offset if self.durable_acks else None,
        )
        return ready.then(self._decided(self._core.on_leader_append(self.log.log_end_offset, now_ms), now_ms))

    def _become_follower(self, state: LeadershipState) -> Ready:
        """Follow another leader (or none): waiting produces fail, the log is kept as it is
        (truncation happens through the leader's diverging-epoch answers, never to the HW)."""
        ready = self.resign()
        self.state = state
        return ready

    def update_settings(self, settings: LogSettings) -> None:
        """The topic's config changed: the log and, while leading, the core use it at once
        (min.insync.replicas applies to the next acks=all produce)."""
        self.log.update_settings(settings)
        if self._core is not None:
            self._core.on_config_change(settings.min_insync_replicas)

    def resign(self) -> Ready:
        """Drop the leader core, failing every produce that waited on it; its HW becomes the
        follower's."""
        core, self._core = self._core, None
        if core is None:
            return Ready(high_watermark_moved=True)
        self._follower_high_watermark = min(core.high_watermark, self.log.log_end_offset)
        return Ready(completed=core.resign(), high_watermark_moved=True)

    def mark_offline(self, error: StorageError) -> Ready:
        self.offline_reason = str(error)
        return self.resign()

    # ------------------------------------------------------------------ leader events

    def produce(self, batches: bytes, leader_epoch: int, acks: int, wait: DelayedWait, from_coordinator: bool = False,
                verified: frozenset[tuple[int, int]] | None = None) -> tuple[Appended, Ready]:
        """A client's produce as this replica's leader, in one call: the leadership and epoch
        check, the append (see `_append_as_leader`), and for acks=all the wait for the HW,
        parked under ``wait.token`` (its outcome comes in this or a later Ready's
        ``completed``; none is parked when ``Appended.wait_until`` is None). Raises
        PartitionError (nothing written) or StorageError (the log failed)."""
        self.require_leader(leader_epoch)
        appended, ready = self._append_as_leader(batches, acks, wait.now_ms, from_coordinator, verified)
        if appended.wait_until is not None:
            ready = ready.then(self.add_delayed_produce(wait.token, appended.wait_until, wait.deadline_ms, wait.now_ms))
        return appended, ready

    def _append_as_leader(self, batches: bytes, acks: int, now_ms: int, from_coordinator: bool,
                          verified: frozenset[tuple[int, int]] | None) -> tuple[Appended, Ready]:
        """Validate and append a producer's batches; a retried idempotent batch is answered
        from memory. ``from_coordinator``: the group coordinator's write, whose producer's
        epoch alone is checked (``ProducerState.check_epoch``). ``verified``: with KIP-890
        verification on, the (producer id, epoch) pairs whose transaction the coordinator
        confirmed includes this partition (see `unverified_transactions`); a transactional
        batch of any other producer not already in a transaction here is refused. None: not
        verified. Nothing is written when this raises."""
        core = self._core
        assert core is not None and self.offline_reason is None, self.name
        self._require_min_isr(core, acks)
        try:
            located = self.log.validate_append(batches)
            headers = [header for _, header in located]
            duplicate = self._check_sequence(headers, from_coordinator)
            if duplicate is not None:
                end = duplicate.last_offset + 1
                wait = end if acks == ACKS_ALL and end > core.high_watermark else None
                return Appended(duplicate.first_offset, -1, self.log.log_start_offset, wait), Ready()
            if verified is not None:
                self._require_verified(headers, verified)
            appended = self.log.append(batches, assign_offsets=True, leader_epoch=self.state.leader_epoch, now_ms=now_ms, validated=located)
        except InvalidRecordError as exc:
            raise PartitionError(
                exc.error_code, f"{self.name}: {exc}; nothing was written: the producer encoded this batch wrong, "
                "fix its encoder (data_plane.record_batch.encode_batch writes valid batches)",
            ) from None
        except CorruptBatchError as exc:
            raise PartitionError(
                ErrorCode.CORRUPT_MESSAGE, f"{self.name}: {exc}; nothing was written: the bytes changed after they were "
                "encoded (client memory or network): send the batch again",
            ) from None
        except RecordTooLargeError as exc:
            raise PartitionError(ErrorCode.MESSAGE_TOO_LARGE, str(exc)) from None
        self._producers.rebuild_from_batches(appended.headers)
        self._follow_transactions(appended.headers)
        assert appended.last_offset + 1 == self.log.log_end_offset, (appended.last_offset, self.log.log_end_offset)
        ready = self._decided(core.on_leader_append(self.log.log_end_offset, now_ms), now_ms, appended=True)
        wait = appended.last_offset + 1 if acks == ACKS_ALL else None
        return Appended(appended.first_offset, appended.log_append_time_ms, self.log.log_start_offset, wait), ready

    def _producer_check(self, headers: list[BatchHeader], from_coordinator: bool) -> SequenceCheck:
        """The producer state's verdict on a producer's batches: the group coordinator's write
        (``from_coordinator``) is checked by epoch alone, a client's by sequence too."""
        if from_coordinator:
            assert len({(h.producer_id, h.producer_epoch) for h in headers}) == 1, headers
            return self._producers.check_epoch(headers[0].producer_id, headers[0].producer_epoch)
        return self._producers.check_run(headers)

    def _check_sequence(self, headers: list[BatchHeader], from_coordinator: bool) -> Duplicate | None:
        """Idempotent producers: a retried request is answered from memory, a gap is refused."""
        if all(h.producer_id == NO_PRODUCER_ID for h in headers):
            return None
        verdict = self._producer_check(headers, from_coordinator)
        if isinstance(verdict, Rejected):
            h = headers[0]
            if verdict.error in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
                raise PartitionError(
                    verdict.error,
                    f"{self.name}: producer {h.producer_id} writes with epoch {h.producer_epoch}, older than epoch "
                    f"{self._producers.epoch_of(h.producer_id)} this partition has seen: a newer incarnation of the "
                    "producer (or the end of its transaction) fenced it; close this producer",
                )
            raise PartitionError(
                verdict.error,
                f"{self.name}: batch of producer {h.producer_id} (epoch {h.producer_epoch}) at sequence "
                f"{h.base_sequence}: {verdict.reason}",
            )
        return verdict if isinstance(verdict, Duplicate) else None

    def unverified_transactions(self, batches: bytes, from_coordinator: bool = False) -> frozenset[tuple[int, int]]:
        """KIP-890 part 1: the (producer id, epoch) of each transactional batch here whose
        producer has no transaction open on this partition, which the leader must confirm
        with the transaction coordinator before appending. Empty when the transaction is
        already open here (the cached answer: one verification per producer, partition and
        transaction), when the batches are a retry or a zombie's (the append answers from the
        producer state), or when they do not parse (the append refuses them). A batch that
        does not follow the producer's last one yet is asked about all the same: it may be
        the next of a pipelining producer whose first batch awaits the same answer (the two
        share it and append in order). ``from_coordinator``: the group coordinator's write of
        a producer's transactional offsets (TxnOffsetCommit), checked by epoch alone."""
        try:
            headers = [header for _, header in iter_headers(batches)]
        except CorruptBatchError:
            return frozenset()
        if not headers or not any(h.is_transactional for h in headers):
            return frozenset()
        verdict = self._producer_check(headers, from_coordinator)
        if isinstance(verdict, Duplicate) or (isinstance(verdict, Rejected) and verdict.error is not ErrorCode.OUT_OF_ORDER_SEQUENCE):
            return frozenset()
        return self._unverified(headers)

    def _unverified(self, headers: Iterable[BatchHeader]) -> frozenset[tuple[int, int]]:
        """A batch of a newer epoch than the producer's transaction open here is the first of
        its next transaction (every end bumps the epoch), come before the last one's marker (a
        producer whose leader adds its partitions sends at once): asked about too, so it waits
        for the coordinator, which answers once that marker is written, instead of joining
        the transaction the marker is about to close."""
        open_here, epoch_of = self._txns.open_first_offset, self._producers.epoch_of
        return frozenset((h.producer_id, h.producer_epoch) for h in headers if h.is_transactional
                         and (h.producer_id not in open_here or h.producer_epoch != epoch_of(h.producer_id)))

    def _require_verified(self, headers: list[BatchHeader], verified: frozenset[tuple[int, int]]) -> None:
        """Refuse a transactional batch that would open a transaction the coordinator did not
        confirm: no marker would ever close it, and the LSO would stay behind it."""
        for producer_id, epoch in sorted(self._unverified(headers) - verified):
            raise PartitionError(
                ErrorCode.INVALID_TXN_STATE,
                f"{self.name}: producer {producer_id} (epoch {epoch}) has no transaction open here that its coordinator "
                "confirmed: add the partition to the transaction (AddPartitionsToTxn) before writing to it",
            )

    def add_delayed_produce(self, token: int, wait_until: int, deadline_ms: int, now_ms: int) -> Ready:
        """Park an acks=all produce until the HW reaches ``wait_until``; its outcome comes
        back in a later (or this) Ready's ``completed``."""
        assert self._core is not None, self.name
        assert 0 < wait_until <= self.log.log_end_offset, (wait_until, self.log.log_end_offset)
        return self._decided(self._core.add_delayed_produce(token, wait_until, deadline_ms, now_ms), now_ms)

    def on_follower_fetch(self, fetch: FollowerFetch, broker: BrokerStatus | None, now_ms: int) -> tuple[FetchCheck, Ready]:
        """A follower fetched: how to serve it, and what its progress changed."""
        self.require_leader(fetch.current_leader_epoch)
        assert self._core is not None
        decided = self._core.on_follower_fetch(fetch, broker, self.log.log_start_offset, now_ms)
        assert self._core.high_watermark <= self.log.log_end_offset, (self._core.high_watermark, self.log.log_end_offset)
        return decided.fetch, self._decided(decided.decisions, now_ms)

    def on_synced(self, now_ms: int) -> Ready:
        """A group-commit round fsynced this replica's log (``--durability fsync``): as leader,
        the HW may move over it."""
        if self._core is None:
            return Ready()
        return self._decided(self._core.on_leader_synced(self.log.durable_offset, now_ms), now_ms)

    def on_tick(self, now_ms: int, replica_lag_time_max_ms: int) -> Ready:
        """Timer: expire delayed produces, propose removing lagging followers."""
        if self._core is None:
            return Ready()
        return self._decided(self._core.on_tick(now_ms, replica_lag_time_max_ms), now_ms)

    def on_alter_partition_answer(self, proposal: IsrProposal, result: AlterPartitionCommitted | AlterPartitionRefused, now_ms: int) -> Ready:
        """The controller answered ``proposal``: delivered only to the core that made it
        (leadership may have moved since)."""
        if self._core is None or self._core.pending_isr is not proposal:
            return Ready()
        return self._decided(self._core.on_alter_partition_result(result, now_ms), now_ms)

    def _decided(self, decisions: LeaderDecisions, now_ms: int, appended: bool = False) -> Ready:
        """The core's decisions as the broker's to-do list."""
        return Ready(decisions.completed, decisions.isr_proposal, decisions.high_watermark is not None, appended)

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int, upto: int) -> bytes:
        """Whole batches from ``offset``, stopping before ``upto`` (the HW for consumers, the
        LEO for followers and repairs)."""
        assert max_bytes > 0 and upto <= self.log.log_end_offset, (max_bytes, upto)
        if self.log.log_start_offset <= offset <= self.log.log_end_offset and offset >= upto:
            return b""
        try:
            return self.log.read(offset, max_bytes, max_offset=upto).data
        except OffsetOutOfRangeError:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside {self.name}'s range [{self.log.log_start_offset}, {upto}]: "
                "seek to the earliest or latest offset",
            ) from None
        except DamagedRangeError as exc:
            raise PartitionError(
                ErrorCode.STORAGE_ERROR,
                f"{self.name}: {exc} on broker {self.broker_id} (its copy from another replica is on the "
                "way): retry shortly; every record before the damage is readable",
            ) from None

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first committed record at or after ``timestamp_ms``."""
        found = self.log.offset_for_timestamp(timestamp_ms)
        return found if found is not None and found[0] < self.high_watermark else None

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords as leader: move the log start up to ``offset`` (-1: the HW) and answer
        the new log start. Only committed records can go: deleting above the HW would remove
        records that followers have not copied, which a new leader could then still serve."""
        target = self.high_watermark if offset == -1 else offset
        if not 0 <= target <= self.high_watermark:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.name}: cannot delete records before {offset}: only committed records can be deleted, so the "
                f"offset must be -1 or within [0, {self.high_watermark}] (the high watermark): use a smaller offset, "
                "or -1 to delete everything committed",
            )
        if target > self.log.log_start_offset:
            self.log.advance_log_start(target)
            self._log_start_moved()
            self._log.info("records deleted", **self.fields(), log_start_offset=target)
            self.notify_waiters()
        return self.log.log_start_offset

    # ------------------------------------------------------------------ follower events

    def follow_log_start(self, leader_log_start: int) -> None:
        """A follower follows the leader's log start (moved by DeleteRecords), up to its own HW:
        records below both were committed and deleted on the leader."""
        assert self._core is None, self.name
        target = min(leader_log_start, self.high_watermark)
        if target > self.log.log_start_offset:
            self.log.advance_log_start(target)
            self._log_start_moved()
            self._log.info("log start follows the leader", **self.fields(), log_start_offset=target)

    def _require_min_isr(self, core: LeaderPartitionState, acks: int) -> None:
        """Raises NOT_ENOUGH_REPLICAS, before anything is appended, for an acks=all write while
        the ISR is smaller than min.insync.replicas."""
        verdict = core.check_produce(acks)
        if verdict == ErrorCode.NOT_ENOUGH_REPLICAS:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.name} has {len(core.isr)} in-sync replicas, fewer than min.insync.replicas="
                f"{core.min_insync_replicas}; nothing was written: retry once replicas catch up",
            )
        assert verdict == ErrorCode.NONE, verdict

    def append_markers_as_leader(self, markers: bytes, now_ms: int) -> Ready:
        """Append transaction markers (control batches). Internal: for the transaction
        coordinator's marker writes (docs/transactions.md), never reachable from Produce,
        which refuses control batches. Raises InvalidRecordError for a malformed marker."""
        core = self._core
        assert core is not None and self.offline_reason is None, self.name
        self._require_min_isr(core, ACKS_ALL)  # as Kafka: a marker is an acks=all write, refused before it is appended
        located = [(pos, validate_marker(markers, pos)) for pos, _ in iter_headers(markers)]
        appended = self.log.append(markers, assign_offsets=True, leader_epoch=self.state.leader_epoch, now_ms=now_ms, validated=located)
        self._producers.rebuild_from_batches(appended.headers)
        self._follow_transactions(appended.headers)
        self._log.info("appended transaction markers", **self.fields(), first_offset=appended.first_offset,
                       last_offset=appended.last_offset)
        return self._decided(core.on_leader_append(self.log.log_end_offset, now_ms), now_ms, appended=True)

    def append_as_follower(self, data: bytes, now_ms: int) -> None:
        """Append replicated batches (offsets and epochs already set by the leader)."""
        assert self._core is None, self.name
        try:
            appended = self.log.append(data, assign_offsets=False, leader_epoch=-1, now_ms=now_ms)
        except (CorruptBatchError, UnexpectedAppendOffsetError) as exc:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, f"{self.name}: replicated batches refused: {exc}") from None
        self._producers.rebuild_from_batches(appended.headers)
        self._follow_transactions(appended.headers)

    def truncate(self, offset: int, why: str) -> None:
        """Cut the log back to ``offset`` (divergence, or a log ahead of the leader's end).
        At or past the log end no record goes, but the log still drops an epoch entry that
        starts there with no record in it (see PartitionLog.truncate_to)."""
        assert offset >= 0, offset
        before = self.log.log_end_offset
        last_epoch = self.log.leader_epoch_cache.latest_epoch
        self.log.truncate_to(offset)
        if offset >= before:
            if self.log.leader_epoch_cache.latest_epoch != last_epoch:
                self._log.info("dropped an epoch with no record at the log end", **self.fields(), reason=why,
                               dropped_epoch=last_epoch, last_epoch=self.log.leader_epoch_cache.latest_epoch, log_end_offset=before)
            return
        self._producers.truncate_to(self.log.log_end_offset)
        self._txns.truncate_to(self.log.log_end_offset)
        self._follower_high_watermark = min(self._follower_high_watermark, self.log.log_end_offset)
        self._log.warning("truncated log", **self.fields(), reason=why, from_offset=before, to_offset=self.log.log_end_offset)

    def restart_at(self, offset: int) -> None:
        """The leader's log starts after ours ends (retention): start over at its log start."""
        assert offset > self.log.log_end_offset, (offset, self.log.log_end_offset)
        self.log.truncate_fully_and_start_at(offset)
        self._producers = ProducerState()
        self._producers.next_offset = offset
        self._txns = TransactionIndex(next_offset=offset)
        self._follower_high_watermark = offset
        self._log.warning("follower log restarted at the leader's log start", **self.fields(), log_start_offset=offset)

    def _follow_transactions(self, headers: Iterable[BatchHeader]) -> None:
        """Feed appended batches to the transaction index; a marker's outcome is in its one
        record, read back from the log (markers are rare: one per transaction and partition)."""
        for header in headers:
            commit = None
            if header.is_control:
                data = self.log.read(header.base_offset, header.batch_length, max_offset=header.last_offset + 1).data
                commit = decode_marker(decode_batch(data)).commit
            self._txns.on_batch(header, commit)
        self._txns.on_high_watermark(self.high_watermark)  # bounded on followers too, which no read_committed read prunes

    # ------------------------------------------------------------------ housekeeping

    def damaged_ranges(self) -> list[DamagedRange]:
        return self.log.damaged_ranges()

    def checksum(self, upto_offset: int) -> int:
        """A checksum of the records below ``upto_offset`` (replicas compare theirs)."""
        return self.log.checksum(upto_offset)

    def repair(self, damage: DamagedRange, copy: bytes) -> None:
        """Write another replica's copy over ``damage`` (CorruptBatchError: it does not fit)."""
        self.log.repair(damage, copy)
        self.notify_waiters()

    def mark_lost(self, damage: DamagedRange) -> None:
        self.log.mark_lost(damage)
        self.notify_waiters()

    def scrub(self, budget_bytes: int) -> int:
        return self.log.scrub(budget_bytes)

    def apply_retention(self, now_ms: int) -> int:
        """Delete segments past retention (see `_log_start_moved` for what follows)."""
        deleted = self.log.apply_retention(now_ms)
        if deleted:
            self._log_start_moved()
        return deleted

    def _log_start_moved(self) -> None:
        """The log start moved up: the transaction index forgets what lay below it and the LSO
        moves up to it at least, and producers with nothing left in the log are forgotten. On
        open both are rebuilt from the log start, so the trim holds across restarts."""
        self._txns.remove_before(self.log.log_start_offset)
        self._producers.remove_before(self.log.log_start_offset)

    def expire_producer_ids(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle for ``expiration_ms`` (`ProducerState.expire`), logging how many."""
        expired = self._producers.expire(now_ms, expiration_ms, self._txns.open_first_offset)
        if expired:
            self._log.info("producer ids expired", **self.fields(), expired=len(expired), remembered=len(self._producers),
                           expiration_ms=expiration_ms)

    @property
    def producer_id_count(self) -> int:
        """Producer ids whose idempotence state this replica keeps."""
        return len(self._producers)

    def maybe_flush(self, now_ms: int) -> None:
        self.log.maybe_flush(now_ms)

    # ------------------------------------------------------------------ waiting

    def notify_waiters(self) -> None:
        """The HW moved or the partition's state changed: wake every waiting fetch (each
        re-checks its own condition)."""
        self._hw_wakeups.fire()
        self.notify_appended()

    def notify_appended(self) -> None:
        """The log end moved: wake followers' fetches only. Consumers read below the HW, so
        an append alone gives them nothing new; waking them would only cost CPU."""
        self._append_wakeups.fire()

    def waiter(self) -> Wakeups:
        """Fired when the HW moves or the partition's state changes (consumer fetches)."""
        return self._hw_wakeups

    def append_waiter(self) -> Wakeups:
        """Fired when the log end moves too (followers' fetches)."""
        return self._append_wakeups
