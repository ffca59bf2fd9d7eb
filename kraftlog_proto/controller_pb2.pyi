from kraftlog_proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BrokerIdList(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicRecord(_message.Message):
    __slots__ = ("name", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...

class PartitionRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding_replicas", "removing_replicas", "unclean_leader_elections", "eligible_leader_replicas", "last_known_elr")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_LEADER_ELECTIONS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    unclean_leader_elections: int
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., unclean_leader_elections: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionChangeRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "base_partition_epoch", "leader", "isr", "replicas", "adding_replicas", "removing_replicas", "unclean_leader_election", "eligible_leader_replicas", "last_known_elr")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BASE_PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_LEADER_ELECTION_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    base_partition_epoch: int
    leader: int
    isr: BrokerIdList
    replicas: BrokerIdList
    adding_replicas: BrokerIdList
    removing_replicas: BrokerIdList
    unclean_leader_election: bool
    eligible_leader_replicas: BrokerIdList
    last_known_elr: BrokerIdList
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., base_partition_epoch: _Optional[int] = ..., leader: _Optional[int] = ..., isr: _Optional[_Union[BrokerIdList, _Mapping]] = ..., replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., adding_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., removing_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., unclean_leader_election: _Optional[bool] = ..., eligible_leader_replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ..., last_known_elr: _Optional[_Union[BrokerIdList, _Mapping]] = ...) -> None: ...

class RegisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "host", "port", "rack", "incarnation_id", "fenced", "in_controlled_shutdown", "max_replicas", "kafka_endpoint")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    KAFKA_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str
    incarnation_id: str
    fenced: bool
    in_controlled_shutdown: bool
    max_replicas: int
    kafka_endpoint: str
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., max_replicas: _Optional[int] = ..., kafka_endpoint: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class FenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class UnfenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class BrokerRegistrationChangeRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "in_controlled_shutdown")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...

class ConfigRecord(_message.Message):
    __slots__ = ("topic", "key", "value")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    value: str
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class RemoveTopicRecord(_message.Message):
    __slots__ = ("topic_id",)
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    def __init__(self, topic_id: _Optional[str] = ...) -> None: ...

class ProducerIdsRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "next_producer_id")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    next_producer_id: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., next_producer_id: _Optional[int] = ...) -> None: ...

class UserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "salt", "stored_key", "server_key", "iterations", "stored_key_sha512", "server_key_sha512")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_SHA512_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_SHA512_FIELD_NUMBER: _ClassVar[int]
    name: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    stored_key_sha512: bytes
    server_key_sha512: bytes
    def __init__(self, name: _Optional[str] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ..., iterations: _Optional[int] = ..., stored_key_sha512: _Optional[bytes] = ..., server_key_sha512: _Optional[bytes] = ...) -> None: ...

class RemoveUserScramCredentialRecord(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class AccessControlEntryRecord(_message.Message):
    __slots__ = ("principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    principal: str
    host: str
    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission: str
    def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class RemoveAccessControlEntryRecord(_message.Message):
    __slots__ = ("principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    principal: str
    host: str
    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission: str
    def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class MetadataRecord(_message.Message):
    __slots__ = ("topic", "partition", "partition_change", "register_broker", "unregister_broker", "fence_broker", "unfence_broker", "broker_registration_change", "config", "remove_topic", "producer_ids", "user_scram_credential", "remove_user_scram_credential", "access_control_entry", "remove_access_control_entry", "client_quota")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    REGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    FENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNFENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    BROKER_REGISTRATION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    REMOVE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_IDS_FIELD_NUMBER: _ClassVar[int]
    USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    REMOVE_USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    REMOVE_ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    CLIENT_QUOTA_FIELD_NUMBER: _ClassVar[int]
    topic: TopicRecord
    partition: PartitionRecord
    partition_change: PartitionChangeRecord
    register_broker: RegisterBrokerRecord
    unregister_broker: UnregisterBrokerRecord
    fence_broker: FenceBrokerRecord
    unfence_broker: UnfenceBrokerRecord
    broker_registration_change: BrokerRegistrationChangeRecord
    config: ConfigRecord
    remove_topic: RemoveTopicRecord
    producer_ids: ProducerIdsRecord
    user_scram_credential: UserScramCredentialRecord
    remove_user_scram_credential: RemoveUserScramCredentialRecord
    access_control_entry: AccessControlEntryRecord
    remove_access_control_entry: RemoveAccessControlEntryRecord
    client_quota: ClientQuotaRecord
    def __init__(self, topic: _Optional[_Union[TopicRecord, _Mapping]] = ..., partition: _Optional[_Union[PartitionRecord, _Mapping]] = ..., partition_change: _Optional[_Union[PartitionChangeRecord, _Mapping]] = ..., register_broker: _Optional[_Union[RegisterBrokerRecord, _Mapping]] = ..., unregister_broker: _Optional[_Union[UnregisterBrokerRecord, _Mapping]] = ..., fence_broker: _Optional[_Union[FenceBrokerRecord, _Mapping]] = ..., unfence_broker: _Optional[_Union[UnfenceBrokerRecord, _Mapping]] = ..., broker_registration_change: _Optional[_Union[BrokerRegistrationChangeRecord, _Mapping]] = ..., config: _Optional[_Union[ConfigRecord, _Mapping]] = ..., remove_topic: _Optional[_Union[RemoveTopicRecord, _Mapping]] = ..., producer_ids: _Optional[_Union[ProducerIdsRecord, _Mapping]] = ..., user_scram_credential: _Optional[_Union[UserScramCredentialRecord, _Mapping]] = ..., remove_user_scram_credential: _Optional[_Union[RemoveUserScramCredentialRecord, _Mapping]] = ..., access_control_entry: _Optional[_Union[AccessControlEntryRecord, _Mapping]] = ..., remove_access_control_entry: _Optional[_Union[RemoveAccessControlEntryRecord, _Mapping]] = ..., client_quota: _Optional[_Union[ClientQuotaRecord, _Mapping]] = ...) -> None: ...

class ActiveControllerHint(_message.Message):
    __slots__ = ("controller_id", "host", "port")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    host: str
    port: int
    def __init__(self, controller_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "host", "port", "rack", "incarnation_id", "max_replicas", "kafka_endpoint", "previous_broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    KAFKA_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    rack: str
    incarnation_id: str
    max_replicas: int
    kafka_endpoint: str
    previous_broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., max_replicas: _Optional[int] = ..., kafka_endpoint: _Optional[str] = ..., previous_broker_epoch: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "broker_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    broker_epoch: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shutdown", "offline_replicas")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool
    offline_replicas: _containers.RepeatedCompositeFieldContainer[TopicPartitionRef]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shutdown: _Optional[bool] = ..., offline_replicas: _Optional[_Iterable[_Union[TopicPartitionRef, _Mapping]]] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "is_fenced", "should_shutdown", "is_caught_up")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    is_fenced: bool
    should_shutdown: bool
    is_caught_up: bool
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., is_fenced: _Optional[bool] = ..., should_shutdown: _Optional[bool] = ..., is_caught_up: _Optional[bool] = ...) -> None: ...

class BrokerSessionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerSessionEvent(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ...) -> None: ...

class StreamMetadataRequest(_message.Message):
    __slots__ = ("from_offset",)
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    from_offset: int
    def __init__(self, from_offset: _Optional[int] = ...) -> None: ...

class MetadataBatch(_message.Message):
    __slots__ = ("snapshot", "base_offset", "last_offset", "records", "cluster_id", "controller_id")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    snapshot: bool
    base_offset: int
    last_offset: int
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    cluster_id: str
    controller_id: int
    def __init__(self, snapshot: _Optional[bool] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "partitions")
    class NewIsrReplica(_message.Message):
        __slots__ = ("broker_id", "broker_epoch")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        broker_epoch: int
        def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...
    class PartitionState(_message.Message):
        __slots__ = ("topic", "partition", "leader_epoch", "partition_epoch", "new_isr")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        leader_epoch: int
        partition_epoch: int
        new_isr: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.NewIsrReplica]
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[_Union[AlterPartitionRequest.NewIsrReplica, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.PartitionState]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.PartitionState, _Mapping]]] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ("topic", "topic_id", "partition", "error_code", "error_message", "leader", "leader_epoch", "partition_epoch", "isr", "replicas", "adding_replicas", "removing_replicas", "unclean_leader_elections", "eligible_leader_replicas", "last_known_elr")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNCLEAN_LEADER_ELECTIONS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    topic_id: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    unclean_leader_elections: int
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., unclean_leader_elections: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "producer_id_start", "producer_id_len")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    producer_id_start: int
    producer_id_len: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class TopicResult(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class Topic(_message.Message):
        __slots__ = ("name", "num_partitions", "replication_factor", "configs")
        class ConfigsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        num_partitions: int
        replication_factor: int
        configs: _containers.ScalarMap[str, str]
        def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class Topic(_message.Message):
        __slots__ = ("name", "total_count")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
        name: str
        total_count: int
        def __init__(self, name: _Optional[str] = ..., total_count: _Optional[int] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    class OpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SET: _ClassVar[AlterConfigsRequest.OpType]
        DELETE: _ClassVar[AlterConfigsRequest.OpType]
    SET: AlterConfigsRequest.OpType
    DELETE: AlterConfigsRequest.OpType
    class Op(_message.Message):
        __slots__ = ("key", "value", "op")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        OP_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        op: AlterConfigsRequest.OpType
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., op: _Optional[_Union[AlterConfigsRequest.OpType, str]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "ops")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        name: str
        ops: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Op]
        def __init__(self, name: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[AlterConfigsRequest.Op, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.Topic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[AlterConfigsRequest.Topic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("key", "value", "is_default", "doc")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    DOC_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    is_default: bool
    doc: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., is_default: _Optional[bool] = ..., doc: _Optional[str] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("topics", "metadata_offset")
    class Topic(_message.Message):
        __slots__ = ("name", "error_code", "error_message", "entries")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: _common_pb2.ErrorCode
        error_message: str
        entries: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Topic]
    metadata_offset: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeConfigsResponse.Topic, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerRegistration(_message.Message):
    __slots__ = ("endpoint", "broker_epoch", "in_controlled_shutdown", "max_replicas", "replicas")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    endpoint: _common_pb2.BrokerEndpoint
    broker_epoch: int
    in_controlled_shutdown: bool
    max_replicas: int
    replicas: int
    def __init__(self, endpoint: _Optional[_Union[_common_pb2.BrokerEndpoint, _Mapping]] = ..., broker_epoch: _Optional[int] = ..., in_controlled_shutdown: _Optional[bool] = ..., max_replicas: _Optional[int] = ..., replicas: _Optional[int] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("cluster_id", "brokers", "active_controller", "controllers", "metadata_offset", "answering_controller_id", "topics")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ANSWERING_CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerRegistration]
    active_controller: ActiveControllerHint
    controllers: _containers.RepeatedCompositeFieldContainer[_common_pb2.BrokerEndpoint]
    metadata_offset: int
    answering_controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    def __init__(self, cluster_id: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerRegistration, _Mapping]]] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., controllers: _Optional[_Iterable[_Union[_common_pb2.BrokerEndpoint, _Mapping]]] = ..., metadata_offset: _Optional[int] = ..., answering_controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QuorumMember(_message.Message):
    __slots__ = ("controller_id", "raft_address", "grpc_address", "state", "raft_term", "commit_index", "last_applied", "match_index", "lag", "connected", "caught_up", "role", "active")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RAFT_TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_APPLIED_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    raft_address: str
    grpc_address: str
    state: str
    raft_term: int
    commit_index: int
    last_applied: int
    match_index: int
    lag: int
    connected: bool
    caught_up: bool
    role: str
    active: bool
    def __init__(self, controller_id: _Optional[int] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., state: _Optional[str] = ..., raft_term: _Optional[int] = ..., commit_index: _Optional[int] = ..., last_applied: _Optional[int] = ..., match_index: _Optional[int] = ..., lag: _Optional[int] = ..., connected: _Optional[bool] = ..., caught_up: _Optional[bool] = ..., role: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("leader_id", "answering_controller_id", "members", "metadata_offset")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWERING_CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    answering_controller_id: int
    members: _containers.RepeatedCompositeFieldContainer[QuorumMember]
    metadata_offset: int
    def __init__(self, leader_id: _Optional[int] = ..., answering_controller_id: _Optional[int] = ..., members: _Optional[_Iterable[_Union[QuorumMember, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topics")
    class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PREFERRED: _ClassVar[ElectLeadersRequest.ElectionType]
        UNCLEAN: _ClassVar[ElectLeadersRequest.ElectionType]
    PREFERRED: ElectLeadersRequest.ElectionType
    UNCLEAN: ElectLeadersRequest.ElectionType
    class TopicPartitions(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectLeadersRequest.ElectionType
    topics: _containers.RepeatedCompositeFieldContainer[ElectLeadersRequest.TopicPartitions]
    def __init__(self, election_type: _Optional[_Union[ElectLeadersRequest.ElectionType, str]] = ..., topics: _Optional[_Iterable[_Union[ElectLeadersRequest.TopicPartitions, _Mapping]]] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("reassignments",)
    class Reassignment(_message.Message):
        __slots__ = ("topic", "partition", "replicas")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        replicas: BrokerIdList
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Union[BrokerIdList, _Mapping]] = ...) -> None: ...
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    reassignments: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.Reassignment]
    def __init__(self, reassignments: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.Reassignment, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ElectLeadersRequest.TopicPartitions]
    def __init__(self, topics: _Optional[_Iterable[_Union[ElectLeadersRequest.TopicPartitions, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("partitions", "metadata_offset")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    metadata_offset: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class AddControllerRequest(_message.Message):
    __slots__ = ("controller_id", "host", "raft_port", "grpc_port", "catch_up_timeout_ms")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RAFT_PORT_FIELD_NUMBER: _ClassVar[int]
    GRPC_PORT_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    host: str
    raft_port: int
    grpc_port: int
    catch_up_timeout_ms: int
    def __init__(self, controller_id: _Optional[int] = ..., host: _Optional[str] = ..., raft_port: _Optional[int] = ..., grpc_port: _Optional[int] = ..., catch_up_timeout_ms: _Optional[int] = ...) -> None: ...

class RemoveControllerRequest(_message.Message):
    __slots__ = ("controller_id",)
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    def __init__(self, controller_id: _Optional[int] = ...) -> None: ...

class QuorumChangeResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "voters", "observers")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    voters: _containers.RepeatedCompositeFieldContainer[QuorumMember]
    observers: _containers.RepeatedCompositeFieldContainer[QuorumMember]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., voters: _Optional[_Iterable[_Union[QuorumMember, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[QuorumMember, _Mapping]]] = ...) -> None: ...

class ClientQuotaRecord(_message.Message):
    __slots__ = ("user", "client_id", "key", "value")
    USER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    user: str
    client_id: str
    key: str
    value: float
    def __init__(self, user: _Optional[str] = ..., client_id: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class ClientQuotaEntity(_message.Message):
    __slots__ = ("user", "client_id")
    USER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    user: str
    client_id: str
    def __init__(self, user: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only")
    class Op(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: ClientQuotaEntity
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Op]
        def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Op, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Entry]
    validate_only: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Entry, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class ClientQuotaResult(_message.Message):
    __slots__ = ("entity", "error_code", "error_message")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    entity: ClientQuotaEntity
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "active_controller", "entries")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_controller: ActiveControllerHint
    entries: _containers.RepeatedCompositeFieldContainer[ClientQuotaResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_controller: _Optional[_Union[ActiveControllerHint, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[ClientQuotaResult, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("user", "client_id")
    USER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    user: str
    client_id: str
    def __init__(self, user: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("entries", "metadata_offset")
    class Entry(_message.Message):
        __slots__ = ("entity", "values")
        class ValuesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: float
            def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: ClientQuotaEntity
        values: _containers.ScalarMap[str, float]
        def __init__(self, entity: _Optional[_Union[ClientQuotaEntity, _Mapping]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.Entry]
    metadata_offset: int
    def __init__(self, entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.Entry, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class TopicPartitionRef(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...
