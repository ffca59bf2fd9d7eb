"""Group records to and from the key and value bytes stored in `__consumer_offsets`
(proto/group_records.proto). Keys are serialized deterministically, so equal keys are equal
bytes and log compaction keeps the latest value of each."""

from __future__ import annotations

from data_plane.groups.state import (
    CommittedOffset,
    CurrentAssignment,
    GroupEpoch,
    GroupRecord,
    MemberSubscription,
    Partitions,
    RecordKey,
    RecordType,
    partitions_by_topic,
)
from kraftlog_proto import group_records_pb2 as pb


def encode_key(key: RecordKey) -> bytes:
    return pb.GroupRecordKey(
        type=int(key.type), group_id=key.group_id, member_id=key.member_id, topic=key.topic, partition=key.partition
    ).SerializeToString(deterministic=True)


def decode_key(data: bytes) -> RecordKey:
    k = pb.GroupRecordKey.FromString(data)
    return RecordKey(RecordType(k.type), k.group_id, k.member_id, k.topic, k.partition)


def encode(record: GroupRecord) -> tuple[bytes, bytes | None]:
    value = record.value
    if value is None:
        return encode_key(record.key), None
    kind = record.key.type
    if kind is RecordType.GROUP_EPOCH:
        message = pb.GroupEpochValue(epoch=value.epoch, assignor=value.assignor, subscribed_topics=[
            pb.TopicPartitionCount(topic=t, partitions=n) for t, n in value.subscribed_topics], empty_since_ms=value.empty_since_ms)
    elif kind is RecordType.MEMBER:
        message = pb.MemberValue(
            instance_id=value.instance_id, client_id=value.client_id, client_host=value.client_host, rack_id=value.rack_id,
            subscribed_topic_names=list(value.topic_names), subscribed_topic_regex=value.topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms, principal=value.principal)
    elif kind is RecordType.TARGET_ASSIGNMENT:
        message = pb.AssignmentValue(partitions=_to_wire(value))
    elif kind is RecordType.TARGET_EPOCH:
        message = pb.TargetEpochValue(epoch=value)
    elif kind is RecordType.CURRENT_ASSIGNMENT:
        message = pb.CurrentAssignmentValue(
            member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            assigned=_to_wire(value.assigned), pending_revocation=_to_wire(value.pending_revocation))
    else:
        message = pb.OffsetValue(offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                                 commit_timestamp_ms=value.commit_timestamp_ms)
    return encode_key(record.key), message.SerializeToString(deterministic=True)


def decode(key_bytes: bytes, value_bytes: bytes | None) -> GroupRecord:
    key = decode_key(key_bytes)
    if value_bytes is None:
        return GroupRecord(key, None)
    kind = key.type
    if kind is RecordType.GROUP_EPOCH:
        v = pb.GroupEpochValue.FromString(value_bytes)
        value = GroupEpoch(v.epoch, v.assignor, tuple((t.topic, t.partitions) for t in v.subscribed_topics), v.empty_since_ms)
    elif kind is RecordType.MEMBER:
        m = pb.MemberValue.FromString(value_bytes)
        value = MemberSubscription(m.instance_id, m.client_id, m.client_host, m.rack_id, tuple(m.subscribed_topic_names),
                                   m.subscribed_topic_regex, m.rebalance_timeout_ms, m.principal)
    elif kind is RecordType.TARGET_ASSIGNMENT:
        value = _from_wire(pb.AssignmentValue.FromString(value_bytes).partitions)
    elif kind is RecordType.TARGET_EPOCH:
        value = pb.TargetEpochValue.FromString(value_bytes).epoch
    elif kind is RecordType.CURRENT_ASSIGNMENT:
        c = pb.CurrentAssignmentValue.FromString(value_bytes)
        value = CurrentAssignment(c.member_epoch, c.previous_member_epoch, _from_wire(c.assigned), _from_wire(c.pending_revocation))
    else:
        o = pb.OffsetValue.FromString(value_bytes)
        value = CommittedOffset(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms)
    return GroupRecord(key, value)


def _to_wire(partitions: Partitions) -> list[pb.AssignedPartitions]:
    return [pb.AssignedPartitions(topic=t, partitions=ps) for t, ps in partitions_by_topic(partitions)]


def _from_wire(topics) -> Partitions:
    return frozenset((t.topic, p) for t in topics for p in t.partitions)
