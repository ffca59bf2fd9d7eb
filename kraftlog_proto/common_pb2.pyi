from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ErrorCode]
    UNKNOWN_SERVER_ERROR: _ClassVar[ErrorCode]
    NOT_LEADER_OR_FOLLOWER: _ClassVar[ErrorCode]
    UNKNOWN_TOPIC_OR_PARTITION: _ClassVar[ErrorCode]
    OFFSET_OUT_OF_RANGE: _ClassVar[ErrorCode]
    CORRUPT_MESSAGE: _ClassVar[ErrorCode]
    MESSAGE_TOO_LARGE: _ClassVar[ErrorCode]
    FENCED_LEADER_EPOCH: _ClassVar[ErrorCode]
    UNKNOWN_LEADER_EPOCH: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: _ClassVar[ErrorCode]
    REQUEST_TIMED_OUT: _ClassVar[ErrorCode]
    STORAGE_ERROR: _ClassVar[ErrorCode]
    NOT_CONTROLLER: _ClassVar[ErrorCode]
    TOPIC_ALREADY_EXISTS: _ClassVar[ErrorCode]
    INVALID_TOPIC: _ClassVar[ErrorCode]
    INVALID_PARTITIONS: _ClassVar[ErrorCode]
    INVALID_REPLICATION_FACTOR: _ClassVar[ErrorCode]
    INVALID_CONFIG: _ClassVar[ErrorCode]
    STALE_BROKER_EPOCH: _ClassVar[ErrorCode]
    BROKER_NOT_REGISTERED: _ClassVar[ErrorCode]
    INVALID_REQUEST: _ClassVar[ErrorCode]
    OUT_OF_ORDER_SEQUENCE: _ClassVar[ErrorCode]
    DUPLICATE_SEQUENCE: _ClassVar[ErrorCode]
    INVALID_PRODUCER_EPOCH: _ClassVar[ErrorCode]
    UNKNOWN_PRODUCER_ID: _ClassVar[ErrorCode]
    INELIGIBLE_REPLICA: _ClassVar[ErrorCode]
    INVALID_UPDATE_VERSION: _ClassVar[ErrorCode]
    LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    REASSIGNMENT_IN_PROGRESS: _ClassVar[ErrorCode]
    NO_REASSIGNMENT_IN_PROGRESS: _ClassVar[ErrorCode]
    ELECTION_NOT_NEEDED: _ClassVar[ErrorCode]
    PREFERRED_LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    DUPLICATE_BROKER_REGISTRATION: _ClassVar[ErrorCode]
    INVALID_TIMESTAMP: _ClassVar[ErrorCode]
    REPLICA_NOT_AVAILABLE: _ClassVar[ErrorCode]
    BROKER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    INVALID_REQUIRED_ACKS: _ClassVar[ErrorCode]
    OFFSET_NOT_AVAILABLE: _ClassVar[ErrorCode]
    INVALID_RECORD: _ClassVar[ErrorCode]
    COORDINATOR_NOT_AVAILABLE: _ClassVar[ErrorCode]
    NOT_COORDINATOR: _ClassVar[ErrorCode]
    COORDINATOR_LOAD_IN_PROGRESS: _ClassVar[ErrorCode]
    UNKNOWN_MEMBER_ID: _ClassVar[ErrorCode]
    FENCED_MEMBER_EPOCH: _ClassVar[ErrorCode]
    STALE_MEMBER_EPOCH: _ClassVar[ErrorCode]
    GROUP_ID_NOT_FOUND: _ClassVar[ErrorCode]
    NON_EMPTY_GROUP: _ClassVar[ErrorCode]
    INVALID_GROUP_ID: _ClassVar[ErrorCode]
    UNRELEASED_INSTANCE_ID: _ClassVar[ErrorCode]
    GROUP_MAX_SIZE_REACHED: _ClassVar[ErrorCode]
    UNSUPPORTED_ASSIGNOR: _ClassVar[ErrorCode]
    OFFSET_METADATA_TOO_LARGE: _ClassVar[ErrorCode]
    INVALID_COMMIT_OFFSET: _ClassVar[ErrorCode]
    GROUP_SUBSCRIBED_TO_TOPIC: _ClassVar[ErrorCode]
    ILLEGAL_GENERATION: _ClassVar[ErrorCode]
    REBALANCE_IN_PROGRESS: _ClassVar[ErrorCode]
    INCONSISTENT_GROUP_PROTOCOL: _ClassVar[ErrorCode]
    MEMBER_ID_REQUIRED: _ClassVar[ErrorCode]
    TOPIC_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    GROUP_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    CLUSTER_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    AUTHENTICATION_FAILED: _ClassVar[ErrorCode]
    INVALID_TXN_STATE: _ClassVar[ErrorCode]
    PRODUCER_FENCED: _ClassVar[ErrorCode]
    CONCURRENT_TRANSACTIONS: _ClassVar[ErrorCode]
    INVALID_PRODUCER_ID_MAPPING: _ClassVar[ErrorCode]
    INVALID_TRANSACTION_TIMEOUT: _ClassVar[ErrorCode]
    TRANSACTIONAL_ID_NOT_FOUND: _ClassVar[ErrorCode]
    UNSTABLE_OFFSET_COMMIT: _ClassVar[ErrorCode]
    BROKER_CAPACITY_EXCEEDED: _ClassVar[ErrorCode]
NONE: ErrorCode
UNKNOWN_SERVER_ERROR: ErrorCode
NOT_LEADER_OR_FOLLOWER: ErrorCode
UNKNOWN_TOPIC_OR_PARTITION: ErrorCode
OFFSET_OUT_OF_RANGE: ErrorCode
CORRUPT_MESSAGE: ErrorCode
MESSAGE_TOO_LARGE: ErrorCode
FENCED_LEADER_EPOCH: ErrorCode
UNKNOWN_LEADER_EPOCH: ErrorCode
NOT_ENOUGH_REPLICAS: ErrorCode
NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode
REQUEST_TIMED_OUT: ErrorCode
STORAGE_ERROR: ErrorCode
NOT_CONTROLLER: ErrorCode
TOPIC_ALREADY_EXISTS: ErrorCode
INVALID_TOPIC: ErrorCode
INVALID_PARTITIONS: ErrorCode
INVALID_REPLICATION_FACTOR: ErrorCode
INVALID_CONFIG: ErrorCode
STALE_BROKER_EPOCH: ErrorCode
BROKER_NOT_REGISTERED: ErrorCode
INVALID_REQUEST: ErrorCode
OUT_OF_ORDER_SEQUENCE: ErrorCode
DUPLICATE_SEQUENCE: ErrorCode
INVALID_PRODUCER_EPOCH: ErrorCode
UNKNOWN_PRODUCER_ID: ErrorCode
INELIGIBLE_REPLICA: ErrorCode
INVALID_UPDATE_VERSION: ErrorCode
LEADER_NOT_AVAILABLE: ErrorCode
REASSIGNMENT_IN_PROGRESS: ErrorCode
NO_REASSIGNMENT_IN_PROGRESS: ErrorCode
ELECTION_NOT_NEEDED: ErrorCode
PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode
DUPLICATE_BROKER_REGISTRATION: ErrorCode
INVALID_TIMESTAMP: ErrorCode
REPLICA_NOT_AVAILABLE: ErrorCode
BROKER_NOT_AVAILABLE: ErrorCode
INVALID_REQUIRED_ACKS: ErrorCode
OFFSET_NOT_AVAILABLE: ErrorCode
INVALID_RECORD: ErrorCode
COORDINATOR_NOT_AVAILABLE: ErrorCode
NOT_COORDINATOR: ErrorCode
COORDINATOR_LOAD_IN_PROGRESS: ErrorCode
UNKNOWN_MEMBER_ID: ErrorCode
FENCED_MEMBER_EPOCH: ErrorCode
STALE_MEMBER_EPOCH: ErrorCode
GROUP_ID_NOT_FOUND: ErrorCode
NON_EMPTY_GROUP: ErrorCode
INVALID_GROUP_ID: ErrorCode
UNRELEASED_INSTANCE_ID: ErrorCode
GROUP_MAX_SIZE_REACHED: ErrorCode
UNSUPPORTED_ASSIGNOR: ErrorCode
OFFSET_METADATA_TOO_LARGE: ErrorCode
INVALID_COMMIT_OFFSET: ErrorCode
GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode
ILLEGAL_GENERATION: ErrorCode
REBALANCE_IN_PROGRESS: ErrorCode
INCONSISTENT_GROUP_PROTOCOL: ErrorCode
MEMBER_ID_REQUIRED: ErrorCode
TOPIC_AUTHORIZATION_FAILED: ErrorCode
GROUP_AUTHORIZATION_FAILED: ErrorCode
CLUSTER_AUTHORIZATION_FAILED: ErrorCode
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode
AUTHENTICATION_FAILED: ErrorCode
INVALID_TXN_STATE: ErrorCode
PRODUCER_FENCED: ErrorCode
CONCURRENT_TRANSACTIONS: ErrorCode
INVALID_PRODUCER_ID_MAPPING: ErrorCode
INVALID_TRANSACTION_TIMEOUT: ErrorCode
TRANSACTIONAL_ID_NOT_FOUND: ErrorCode
UNSTABLE_OFFSET_COMMIT: ErrorCode
BROKER_CAPACITY_EXCEEDED: ErrorCode

class Header(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("key", "value", "headers", "timestamp_ms", "offset", "timestamp_type", "leader_epoch")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    timestamp_ms: int
    offset: int
    timestamp_type: int
    leader_epoch: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., timestamp_ms: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_type: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class BrokerEndpoint(_message.Message):
    __slots__ = ("broker_id", "host", "port", "rack", "fenced")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    rack: str
    fenced: bool
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ...) -> None: ...

class LeaderHint(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
