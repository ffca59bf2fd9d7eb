from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GroupRecordType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP_EPOCH: _ClassVar[GroupRecordType]
    MEMBER: _ClassVar[GroupRecordType]
    TARGET_ASSIGNMENT: _ClassVar[GroupRecordType]
    TARGET_EPOCH: _ClassVar[GroupRecordType]
    CURRENT_ASSIGNMENT: _ClassVar[GroupRecordType]
    OFFSET: _ClassVar[GroupRecordType]
GROUP_EPOCH: GroupRecordType
MEMBER: GroupRecordType
TARGET_ASSIGNMENT: GroupRecordType
TARGET_EPOCH: GroupRecordType
CURRENT_ASSIGNMENT: GroupRecordType
OFFSET: GroupRecordType

class GroupRecordKey(_message.Message):
    __slots__ = ("type", "group_id", "member_id", "topic", "partition")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    type: GroupRecordType
    group_id: str
    member_id: str
    topic: str
    partition: int
    def __init__(self, type: _Optional[_Union[GroupRecordType, str]] = ..., group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class TopicPartitionCount(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: int
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[int] = ...) -> None: ...

class GroupEpochValue(_message.Message):
    __slots__ = ("epoch", "assignor", "subscribed_topics", "empty_since_ms")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    EMPTY_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    assignor: str
    subscribed_topics: _containers.RepeatedCompositeFieldContainer[TopicPartitionCount]
    empty_since_ms: int
    def __init__(self, epoch: _Optional[int] = ..., assignor: _Optional[str] = ..., subscribed_topics: _Optional[_Iterable[_Union[TopicPartitionCount, _Mapping]]] = ..., empty_since_ms: _Optional[int] = ...) -> None: ...

class MemberValue(_message.Message):
    __slots__ = ("instance_id", "client_id", "client_host", "rack_id", "subscribed_topic_names", "subscribed_topic_regex", "rebalance_timeout_ms", "principal")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    client_id: str
    client_host: str
    rack_id: str
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    rebalance_timeout_ms: int
    principal: str
    def __init__(self, instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., rack_id: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class AssignedPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class AssignmentValue(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[AssignedPartitions]
    def __init__(self, partitions: _Optional[_Iterable[_Union[AssignedPartitions, _Mapping]]] = ...) -> None: ...

class TargetEpochValue(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class CurrentAssignmentValue(_message.Message):
    __slots__ = ("member_epoch", "previous_member_epoch", "assigned", "pending_revocation")
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    PENDING_REVOCATION_FIELD_NUMBER: _ClassVar[int]
    member_epoch: int
    previous_member_epoch: int
    assigned: _containers.RepeatedCompositeFieldContainer[AssignedPartitions]
    pending_revocation: _containers.RepeatedCompositeFieldContainer[AssignedPartitions]
    def __init__(self, member_epoch: _Optional[int] = ..., previous_member_epoch: _Optional[int] = ..., assigned: _Optional[_Iterable[_Union[AssignedPartitions, _Mapping]]] = ..., pending_revocation: _Optional[_Iterable[_Union[AssignedPartitions, _Mapping]]] = ...) -> None: ...

class OffsetValue(_message.Message):
    __slots__ = ("offset", "leader_epoch", "metadata", "commit_timestamp_ms")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    def __init__(self, offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., commit_timestamp_ms: _Optional[int] = ...) -> None: ...
