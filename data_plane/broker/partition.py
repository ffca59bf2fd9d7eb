"""One partition replica hosted by this broker: its log plus the leadership state the
metadata quorum assigned to it (leader, leader epoch, partition epoch, replicas, ISR).

The high watermark is min LEO over the ISR. Followers' LEOs come from replication; until a
follower has been heard from it counts as 0, so a replicated partition's HW only moves when
its in-sync followers fetch. A leader's HW never goes down.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from data_plane.broker.errors import PartitionError, check_leader_epoch, not_leader
from data_plane.storage import PartitionLog, StorageError


@dataclass
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
    follower_leo: dict[int, int] = field(default_factory=dict)
    offline_reason: str | None = None
    _hw_waiters: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    def require_leader(self, requested_epoch: int) -> None:
        """Raise the error a client should see when this broker cannot serve it as leader."""
        if self.offline_reason is not None:
            raise PartitionError(
                "STORAGE_ERROR",
                f"{self.name} is offline on broker {self.broker_id}: {self.offline_reason}",
            )
        if not self.is_leader:
            raise not_leader(self.topic, self.partition, self.state.leader)
        check_leader_epoch(self.topic, self.partition, requested_epoch, self.state.leader_epoch)

    def apply_leadership(self, state: LeadershipState) -> None:
        """Take a new leadership state from metadata; the HW is kept (never moves back on a leader)."""
        assert state.leader_epoch >= self.state.leader_epoch, "leader epochs never go backwards"
        self.state = state
        self.follower_leo = {r: leo for r, leo in self.follower_leo.items() if r in state.replicas}
        if self.is_leader:
            self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        """Recompute HW = min LEO over the ISR; returns True when it moved forward."""
        leos = [
            self.log.log_end_offset if r == self.broker_id else self.follower_leo.get(r, 0)
            for r in self.state.isr
        ] or [self.log.log_end_offset]
        candidate = min(leos)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        self.notify_waiters()
        return True

    def notify_waiters(self) -> None:
        """Wake every fetch or produce waiting on this partition (they re-check their own condition)."""
        self._hw_waiters.set()
        self._hw_waiters = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        return self._hw_waiters

    def mark_offline(self, error: StorageError) -> None:
        self.offline_reason = str(error)
        self.notify_waiters()
