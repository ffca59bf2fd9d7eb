"""One partition replica hosted by this broker: its log, the leadership state the metadata
quorum assigned to it, and, while this broker leads it, the replication core.

This is the thin asyncio shell around `data_plane.replication.partition_state`: the core
decides (HW, ISR proposals, which acks=all produces complete), this class carries the
decisions out (publishes the HW, wakes waiting requests, resolves produce futures) and hands
ISR proposals back to the replica manager, which sends them to the controller.

- As leader: HW = min LEO over the (maximal) ISR, computed by the core; it never goes down.
- As follower: HW = the leader's HW from fetch responses, capped by the local LEO.
- Becoming leader assigns (leader epoch, LEO) in the log's epoch cache first, as Kafka's
  `makeLeader` does, so a follower that fetches with an older epoch learns where it ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from data_plane.broker.errors import PartitionError, check_leader_epoch, not_leader
from data_plane.replication.partition_state import (
    AlterPartitionCommitted,
    AlterPartitionRefused,
    IsrProposal,
    LeaderDecisions,
    LeaderPartitionState,
    ProduceOutcome,
)
from data_plane.replication.producer_state import ProducerState
from data_plane.storage import PartitionLog, StorageError


@dataclass(frozen=True)
class LeadershipState:
    """What the metadata image says about this partition."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Partition:
    topic: str
    partition: int
    broker_id: int
    log: PartitionLog
    state: LeadershipState
    high_watermark: int = 0
    producers: ProducerState = field(default_factory=ProducerState)
    leader_core: LeaderPartitionState | None = None
    offline_reason: str | None = None
    skip_epoch_fencing: bool = False
    _produce_waiters: dict[int, asyncio.Future] = field(default_factory=dict)
    _next_token: int = 0
    _hw_waiters: asyncio.Event = field(default_factory=asyncio.Event)
    _append_waiters: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id and self.leader_core is not None

    def require_leader(self, requested_epoch: int) -> None:
        """Raise the error a client should see when this broker cannot serve it as leader."""
        if self.offline_reason is not None:
            raise PartitionError(
                "STORAGE_ERROR",
                f"{self.name} is offline on broker {self.broker_id}: {self.offline_reason}",
            )
        if not self.skip_epoch_fencing:
            check_leader_epoch(self.topic, self.partition, requested_epoch, self.state.leader_epoch)
        if not self.is_leader:
            raise not_leader(self.topic, self.partition, self.state.leader)

    # ------------------------------------------------------------------ leadership changes

    def become_leader(self, state: LeadershipState, min_insync_replicas: int, now_ms: int) -> None:
        """Start a new leader epoch: a fresh core seeded with the log's epoch history."""
        self.resign()
        self.state = state
        self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self.leader_core = LeaderPartitionState(
            leader_id=self.broker_id,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            replicas=state.replicas,
            isr=frozenset(state.isr),
            leader_history=self.log.leader_epoch_cache.entries,
            log_end_offset=self.log.log_end_offset,
            high_watermark=min(self.high_watermark, self.log.log_end_offset),
            min_insync_replicas=min_insync_replicas,
            now_ms=now_ms,
        )
        self.apply(self.leader_core.on_leader_append(self.log.log_end_offset, now_ms))

    def become_follower(self, state: LeadershipState) -> None:
        """Follow another leader (or none): waiting produces fail, the log is kept as it is
        (truncation happens through the leader's diverging-epoch answers, never to the HW)."""
        self.resign()
        self.state = state
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def update_within_epoch(self, state: LeadershipState, now_ms: int) -> IsrProposal | None:
        """A partition change in the same leader epoch (ISR or replicas changed)."""
        self.state = state
        if self.leader_core is None:
            return None
        return self.apply(
            self.leader_core.on_partition_change(
                leader_epoch=state.leader_epoch,
                partition_epoch=state.partition_epoch,
                replicas=state.replicas,
                isr=frozenset(state.isr),
                now_ms=now_ms,
            )
        )

    def resign(self) -> None:
        """Drop the leader core, failing every produce that waited on it."""
        if self.leader_core is not None:
            self._complete(self.leader_core.resign())
            self.leader_core = None
        self.notify_waiters()

    # ------------------------------------------------------------------ leader events

    def apply(self, decisions: LeaderDecisions) -> IsrProposal | None:
        """Carry out what the core decided; return an ISR proposal for the controller."""
        if decisions.high_watermark is not None:
            self.high_watermark = decisions.high_watermark
            self.notify_waiters()
        self._complete(decisions.completed)
        return decisions.isr_proposal

    def on_alter_partition_result(self, result: AlterPartitionCommitted | AlterPartitionRefused, now_ms: int) -> IsrProposal | None:
        if self.leader_core is None:
            return None
        return self.apply(self.leader_core.on_alter_partition_result(result, now_ms))

    def delayed_produce(self, required_offset: int, deadline_ms: int, now_ms: int) -> asyncio.Future:
        """A future resolved with the ErrorCode once the HW reaches ``required_offset`` (or the
        wait fails: timeout, lost leadership, ISR below min.insync.replicas)."""
        assert self.leader_core is not None
        token = self._next_token
        self._next_token += 1
        future = asyncio.get_running_loop().create_future()
        self._produce_waiters[token] = future
        self.apply(self.leader_core.add_delayed_produce(token, required_offset, deadline_ms, now_ms))
        return future

    @property
    def has_delayed_produces(self) -> bool:
        """acks=all produces are waiting here (the timer must expire them)."""
        return bool(self._produce_waiters)

    def _complete(self, outcomes: tuple[ProduceOutcome, ...]) -> None:
        for outcome in outcomes:
            future = self._produce_waiters.pop(outcome.token, None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(outcome.error)

    def check_high_watermark_settled(self) -> None:
        """A new leader's HW starts at what it knew as a follower (or, after a restart, at its
        checkpoint), which may lag what was published before; until it reaches the log end
        this leadership started at, answering with it would show consumers the HW going
        backwards (Kafka answers OFFSET_NOT_AVAILABLE)."""
        core = self.leader_core
        if core is not None and core.high_watermark < core.leadership_start_offset:
            raise PartitionError(
                "OFFSET_NOT_AVAILABLE",
                f"{self.name}: the leader (epoch {core.leader_epoch}) is still establishing its high watermark "
                f"({core.high_watermark} < {core.leadership_start_offset}, its log end when it took the leadership): retry shortly",
            )

    def replica_log_end_offsets(self) -> dict[int, int]:
        """Each replica's LEO as the leader knows it (-1: not heard from in this epoch)."""
        leos = {self.broker_id: self.log.log_end_offset}
        if self.leader_core is not None:
            leos.update({r: p.log_end_offset for r, p in self.leader_core.progress.items()})
        return leos

    def in_sync(self) -> frozenset[int]:
        """The ISR the leader acts on (committed ∪ proposed while a change is pending)."""
        return self.leader_core.maximal_isr if self.leader_core is not None else frozenset(self.state.isr)

    # ------------------------------------------------------------------ waiting

    def notify_waiters(self) -> None:
        """The HW moved or the partition's state changed: wake every waiting fetch (each
        re-checks its own condition)."""
        self._hw_waiters.set()
        self._hw_waiters = asyncio.Event()
        self.notify_appended()

    def notify_appended(self) -> None:
        """The log end moved: wake followers' fetches only. Consumers read below the HW, so
        an append alone gives them nothing new; waking them would only cost CPU."""
        self._append_waiters.set()
        self._append_waiters = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        """Set when the HW moves or the partition's state changes (consumer fetches)."""
        return self._hw_waiters

    def append_waiter(self) -> asyncio.Event:
        """Set when the log end moves too (followers' fetches)."""
        return self._append_waiters

    def mark_offline(self, error: StorageError) -> None:
        self.offline_reason = str(error)
        self.resign()

