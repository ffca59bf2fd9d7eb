"""The data-plane requests and answers the broker's service hands to ``ReplicaManager``:
plain Python in, plain Python out, one entry per partition. ``service.py`` builds the items
from protobuf and turns the results back into protobuf; nothing here knows gRPC."""

from __future__ import annotations

from dataclasses import dataclass, field

from data_plane.partition_errors import NO_ERROR, PartitionError
from data_plane.replication.divergence import DivergingEpoch
from data_plane.replication.transaction_index import AbortedTxn
from server_common.errors import ErrorCode


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
    # The group coordinator's own write (KIP-447's transactional offsets): its producer's
    # epoch is checked, not its sequence, as Kafka does for coordinator appends.
    from_coordinator: bool = False


@dataclass
class FetchItem:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


@dataclass
class ReplicaFetchItem:
    topic: str
    partition: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    durable_offset: int = -1  # --durability fsync: the follower's log is fsynced below it; -1: not said


@dataclass
class PartitionAnswer:
    """What every per-partition answer carries: the partition, an error (NONE when it
    succeeded) with a message saying what to do next, and where the leader is."""

    topic: str
    partition: int
    error: PartitionError = NO_ERROR
    leader: LeaderHint = field(default_factory=LeaderHint)

    @property
    def failed(self) -> bool:
        return self.error.code != ErrorCode.NONE


@dataclass
class ProduceResult(PartitionAnswer):
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


@dataclass
class FetchResult(PartitionAnswer):
    high_watermark: int = -1
    log_start_offset: int = -1
    data: bytes = b""
    next_offset: int = -1  # past the batches in data (markers and aborted batches included)
    last_leader_epoch: int = -1  # the leader epoch of the last batch in data
    last_stable_offset: int = -1
    aborted: list[AbortedTxn] = field(default_factory=list)  # read_committed: aborted transactions in the answer


@dataclass
class ReplicaFetchResult(FetchResult):
    log_end_offset: int = -1
    diverging: DivergingEpoch | None = None


@dataclass
class OffsetResult(PartitionAnswer):
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass
class EpochEndResult(PartitionAnswer):
    """Where a leader epoch ends in the leader's log (-1, -1: the log holds no such epoch)."""

    leader_epoch: int = -1
    end_offset: int = -1


@dataclass
class DeleteRecordsItem:
    topic: str
    partition: int
    offset: int  # records below it go; -1: the high watermark
    leader_epoch: int = -1


@dataclass
class DeleteRecordsResult(PartitionAnswer):
    low_watermark: int = -1
