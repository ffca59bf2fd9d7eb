"""Partitions built with one replication rule broken on purpose: the chaos harness's negative
controls (``--unsafe-testing``, `UnsafeBehaviour`). Each is a bug Kafka once had; a run
with one of them must make the history checker report the anomaly it causes.

The broker picks the partition class once, at start (`partition_class`); every broken rule
lives here as an override, so the safe `Partition` and the replica manager read as if these
modes did not exist. (``stall-fetcher`` breaks the follower's fetcher, not the partition:
`replica_fetcher.py` carries it.)
"""

from __future__ import annotations

from dataclasses import replace

from data_plane.broker.config import UnsafeBehaviour
from data_plane.broker.partition import LeadershipState, Partition, Ready
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import (
    AlterPartitionCommitted,
    BrokerStatus,
    FollowerFetch,
    LeaderDecisions,
    ProduceOutcome,
)
from data_plane.replication.transaction_index import AbortedTxn


class TruncateToHwPartition(Partition):
    """Pre-KIP-101: a replica that becomes follower cuts its log back to its HW, losing
    records the new leader may not have and the old ISR acknowledged."""

    def _become_follower(self, state: LeadershipState) -> Ready:
        ready = super()._become_follower(state)
        self.truncate(self.high_watermark, "unsafe: truncate to the high watermark")
        return ready


class AckBeforeReplicationPartition(Partition):
    """acks=all is answered right after the leader's append, as if the ISR were the leader."""

    def add_delayed_produce(self, token: int, wait_until: int, deadline_ms: int, now_ms: int) -> Ready:
        return Ready(completed=(ProduceOutcome(token, ErrorCode.NONE),))


class SkipEpochFencingPartition(Partition):
    """Requests naming another leader epoch are served, and the leader adopts its own ISR
    proposals at once, as a leader with no epoch-checked controller would (a deposed leader
    shrinks the ISR to itself and goes on acknowledging writes)."""

    def require_leader(self, requested_epoch: int) -> None:
        super().require_leader(-1)

    def on_follower_fetch(self, fetch: FollowerFetch, broker: BrokerStatus | None, now_ms: int):
        return super().on_follower_fetch(replace(fetch, current_leader_epoch=-1), broker, now_ms)

    def _decided(self, decisions: LeaderDecisions, now_ms: int, appended: bool = False) -> Ready:
        ready = super()._decided(decisions, now_ms, appended)
        proposal = ready.isr_proposal
        if proposal is None or self._core is None:
            return ready
        committed = AlterPartitionCommitted(proposal.leader_epoch, proposal.partition_epoch + 1, proposal.new_isr)
        follow_up = self._core.on_alter_partition_result(committed, now_ms)
        return replace(ready, isr_proposal=None).then(self._decided(follow_up, now_ms))


class ReadCommittedPastLsoPartition(Partition):
    """read_committed reads are bounded by the HW instead of the LSO and list no aborted
    transaction: open and aborted transactions' records reach read_committed consumers (as
    if the broker ignored the isolation level)."""

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    def aborted_transactions(self, from_offset: int, to_offset: int) -> list[AbortedTxn]:
        return []


_CLASSES: dict[UnsafeBehaviour | None, type[Partition]] = {
    UnsafeBehaviour.TRUNCATE_TO_HW: TruncateToHwPartition,
    UnsafeBehaviour.ACK_BEFORE_REPLICATION: AckBeforeReplicationPartition,
    UnsafeBehaviour.SKIP_EPOCH_FENCING: SkipEpochFencingPartition,
    UnsafeBehaviour.READ_COMMITTED_PAST_LSO: ReadCommittedPastLsoPartition,
}


def partition_class(unsafe: UnsafeBehaviour | None) -> type[Partition]:
    """The partition this broker builds: the safe one unless a negative control is asked for."""
    return _CLASSES.get(unsafe, Partition)
