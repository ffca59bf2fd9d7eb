from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransactionRecordKey(_message.Message):
    __slots__ = ("transactional_id",)
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    def __init__(self, transactional_id: _Optional[str] = ...) -> None: ...

class TransactionPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class TransactionRecordValue(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "timeout_ms", "state", "partitions", "last_update_ms", "txn_start_ms", "last_producer_epoch", "owed")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    TXN_START_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OWED_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: _containers.RepeatedCompositeFieldContainer[TransactionPartitions]
    last_update_ms: int
    txn_start_ms: int
    last_producer_epoch: int
    owed: OwedMarkers
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., state: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TransactionPartitions, _Mapping]]] = ..., last_update_ms: _Optional[int] = ..., txn_start_ms: _Optional[int] = ..., last_producer_epoch: _Optional[int] = ..., owed: _Optional[_Union[OwedMarkers, _Mapping]] = ...) -> None: ...

class OwedMarkers(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "commit", "partitions")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: _containers.RepeatedCompositeFieldContainer[TransactionPartitions]
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., commit: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[TransactionPartitions, _Mapping]]] = ...) -> None: ...
