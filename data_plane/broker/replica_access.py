"""What the replica manager's helpers may use of it: narrow views, so that fetch serving and
log maintenance do not import the replica manager that builds them (no file circle), and a
reader sees at a glance how little of it each one touches."""

from __future__ import annotations

from typing import Callable, Protocol

from data_plane.broker.config import BrokerConfig
from data_plane.partition_errors import PartitionError
from data_plane.broker.partition import Partition, Ready
from data_plane.requests import PartitionAnswer
from data_plane.storage import StorageError

TopicPartition = tuple[str, int]


class TakesOffline(Protocol):
    """The replicas on this broker, and the one way to take a failed log offline."""

    config: BrokerConfig
    partitions: dict[TopicPartition, Partition]

    def take_offline(self, partition: Partition, exc: StorageError) -> PartitionError: ...


class MaintainedReplicas(TakesOffline, Protocol):
    """What log maintenance uses: the replicas, the clock, taking a failed log offline."""

    clock_ms: Callable[[], int]


class ServedReplicas(TakesOffline, Protocol):
    """What fetch serving uses: finding a replica, answering a failure, acting on a `Ready`."""

    def lookup(self, topic: str, index: int) -> Partition: ...

    def fail(self, result: PartitionAnswer, exc: PartitionError) -> None: ...

    def carry_out(self, partition: Partition, ready: Ready) -> None: ...
