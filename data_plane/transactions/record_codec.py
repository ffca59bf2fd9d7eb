"""Transaction metadata to and from the key and value bytes stored in `__transaction_state`
(proto/transaction_records.proto), and `replay`, which rebuilds a partition's transactional
ids from its records. Pure. Keys are serialized deterministically, so equal keys are equal
bytes and log compaction keeps the latest value of each; a Dead id is a tombstone."""

from __future__ import annotations

from collections.abc import Iterable

from data_plane.transactions.state_machine import MarkerPlan, TopicPartition, TxnMetadata, TxnState
from kraftlog_proto import transaction_records_pb2 as pb


def encode_key(transactional_id: str) -> bytes:
    return pb.TransactionRecordKey(transactional_id=transactional_id).SerializeToString(deterministic=True)


def encode(meta: TxnMetadata) -> tuple[bytes, bytes | None]:
    """The record that makes ``meta`` durable: a tombstone for a Dead id."""
    key = encode_key(meta.transactional_id)
    if meta.state is TxnState.DEAD:
        return key, None
    value = pb.TransactionRecordValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, timeout_ms=meta.timeout_ms, state=meta.state.value,
        partitions=_by_topic(meta.partitions),
        last_update_ms=meta.last_update_ms, txn_start_ms=meta.txn_start_ms, last_producer_epoch=meta.last_producer_epoch)
    if meta.owed is not None:
        value.owed.CopyFrom(pb.OwedMarkers(producer_id=meta.owed.producer_id, producer_epoch=meta.owed.producer_epoch,
                                           commit=meta.owed.commit, partitions=_by_topic(meta.owed.partitions)))
    return key, value.SerializeToString(deterministic=True)


def _by_topic(partitions: frozenset[TopicPartition]) -> list[pb.TransactionPartitions]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [pb.TransactionPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]


def _partitions(topics: Iterable[pb.TransactionPartitions]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t.topic, p) for t in topics for p in t.partitions)


def decode(key: bytes, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    """The transactional id and its metadata (None for a tombstone)."""
    transactional_id = pb.TransactionRecordKey.FromString(key).transactional_id
    if value is None:
        return transactional_id, None
    v = pb.TransactionRecordValue.FromString(value)
    owed = MarkerPlan(v.owed.producer_id, v.owed.producer_epoch, v.owed.commit, _partitions(v.owed.partitions)) \
        if v.HasField("owed") else None
    return transactional_id, TxnMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, TxnState(v.state), _partitions(v.partitions),
        v.last_update_ms, v.txn_start_ms, v.last_producer_epoch, owed)


def replay(records: Iterable[tuple[bytes, bytes | None]], ids: dict[str, TxnMetadata]) -> None:
    """Apply records in log order to ``ids`` (transactional id -> metadata): each sets its id's
    metadata, a tombstone forgets it. Replaying only the latest record of each key (what
    compaction keeps) gives the same map as the whole log."""
    for key, value in records:
        transactional_id, meta = decode(key, value)
        if meta is None:
            ids.pop(transactional_id, None)
        else:
            ids[transactional_id] = meta
