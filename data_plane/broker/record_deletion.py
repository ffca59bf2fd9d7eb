"""DeleteRecords on the leader (Kafka's ``DeleteRecordsRequest``): move each partition's log
start offset up. Followers follow the leader's log start from their fetch answers
(``Partition.follow_log_start``), so every replica stops serving the deleted records.

The answer is the leader's new log start (its low watermark) at once; Kafka waits until
every replica has moved, but nothing here depends on that, and a follower that is behind
moves on its next fetch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from data_plane.partition_errors import PartitionError
from data_plane.requests import DeleteRecordsItem, DeleteRecordsResult
from data_plane.storage import StorageError

if TYPE_CHECKING:
    from data_plane.broker.replica_manager import ReplicaManager


def delete_records(replicas: ReplicaManager, items: list[DeleteRecordsItem]) -> list[DeleteRecordsResult]:
    """One answer per item: the new log start, or the error saying what to do next."""
    results: list[DeleteRecordsResult] = []
    for item in items:
        result = DeleteRecordsResult(item.topic, item.partition)
        results.append(result)
        try:
            partition = replicas.lookup(item.topic, item.partition)
            partition.require_leader(item.leader_epoch)
            try:
                result.low_watermark = partition.delete_records_before(item.offset)
            except StorageError as exc:
                raise replicas.take_offline(partition, exc) from None
        except PartitionError as exc:
            replicas.fail(result, exc)
    return results
