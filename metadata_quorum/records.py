"""Metadata records: the vocabulary of the metadata log.

Every change to cluster metadata is one of these frozen dataclasses. Records that belong
together are committed as one Raft entry, and the same protobuf encoding (``MetadataRecord``
in ``proto/controller.proto``) is used in Raft entries, in the controller's snapshots and in
the metadata stream to brokers, so controllers and brokers replay identical bytes.

Field names match the protobuf fields one to one; the conversion is generic over the
dataclass fields so a new field cannot be forgotten on one side.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Union

from kraftlog_proto import controller_pb2
from server_common.authorizer import AclBinding

BrokerIds = tuple[int, ...]


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: str


@dataclass(frozen=True)
class PartitionRecord:
    topic_id: str
    partition: int
    replicas: BrokerIds
    isr: BrokerIds
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: BrokerIds = ()
    removing_replicas: BrokerIds = ()
    unclean_leader_elections: int = 0
    eligible_leader_replicas: BrokerIds = ()
    last_known_elr: BrokerIds = ()


@dataclass(frozen=True)
class PartitionChangeRecord:
    """Changes the fields that are not None. Applying it bumps the partition epoch, and the
    leader epoch when it names a leader (a new one, or the same one after replicas were
    removed, as in Kafka); ``base_partition_epoch`` is the compare-and-set
    precondition (the epoch the change was computed from). ``unclean_leader_election`` marks
    a leader elected outside the ISR, so that every node counts it the same way. The ELR
    fields (KIP-966) change without a new leader epoch."""

    topic_id: str
    partition: int
    base_partition_epoch: int
    leader: int | None = None
    isr: BrokerIds | None = None
    replicas: BrokerIds | None = None
    adding_replicas: BrokerIds | None = None
    removing_replicas: BrokerIds | None = None
    unclean_leader_election: bool = False
    eligible_leader_replicas: BrokerIds | None = None
    last_known_elr: BrokerIds | None = None


NEW_BROKER_EPOCH = -1  # in a proposal: the broker epoch is the record's own metadata offset


@dataclass(frozen=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str
    incarnation_id: str
    fenced: bool = True
    in_controlled_shutdown: bool = False
    max_replicas: int = 0  # replicas the broker can host; 0: no limit stated
    kafka_endpoint: str = ""  # host:port of its Kafka listener; empty: none


@dataclass(frozen=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class FenceBrokerRecord:
    broker_id: int
    epoch: int


@dataclass(frozen=True)
class UnfenceBrokerRecord:
    broker_id: int
    epoch: int


@dataclass(frozen=True)
class BrokerRegistrationChangeRecord:
    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: bool


@dataclass(frozen=True)
class ConfigRecord:
    topic: str
    key: str
    value: str | None  # None removes the override


@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: str


@dataclass(frozen=True)
class ProducerIdsRecord:
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class ClientQuotaRecord:
    """One quota value of one entity (docs/quotas.md): ``user`` / ``client_id`` None when the
    entity does not name that dimension, "" for its default; ``value`` None removes the quota."""

    user: str | None
    client_id: str | None
    key: str
    value: float | None


@dataclass(frozen=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential, created or replaced (server_common/scram.py)."""

    name: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    stored_key_sha512: bytes = b""
    server_key_sha512: bytes = b""


@dataclass(frozen=True)
class RemoveUserScramCredentialRecord:
    name: str


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord(AclBinding):
    """Adds one ACL (docs/security.md)."""


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord(AclBinding):
    """Removes the ACL with exactly these fields."""


Record = Union[
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    RemoveTopicRecord,
    ProducerIdsRecord,
    ClientQuotaRecord,
    UserScramCredentialRecord,
    RemoveUserScramCredentialRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
]

# dataclass -> name of its field in the MetadataRecord oneof
_ONEOF_FIELD: dict[type, str] = {
    TopicRecord: "topic",
    PartitionRecord: "partition",
    PartitionChangeRecord: "partition_change",
    RegisterBrokerRecord: "register_broker",
    UnregisterBrokerRecord: "unregister_broker",
    FenceBrokerRecord: "fence_broker",
    UnfenceBrokerRecord: "unfence_broker",
    BrokerRegistrationChangeRecord: "broker_registration_change",
    ConfigRecord: "config",
    RemoveTopicRecord: "remove_topic",
    ProducerIdsRecord: "producer_ids",
    ClientQuotaRecord: "client_quota",
    UserScramCredentialRecord: "user_scram_credential",
    RemoveUserScramCredentialRecord: "remove_user_scram_credential",
    AccessControlEntryRecord: "access_control_entry",
    RemoveAccessControlEntryRecord: "remove_access_control_entry",
}
_CLASS_BY_FIELD: dict[str, type] = {name: cls for cls, name in _ONEOF_FIELD.items()}
assert set(_ONEOF_FIELD.values()) == {f.name for f in controller_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"].fields}


def to_proto(record: Record) -> controller_pb2.MetadataRecord:
    """The protobuf form of ``record``."""
    message = controller_pb2.MetadataRecord()
    body = getattr(message, _ONEOF_FIELD[type(record)])
    body.SetInParent()
    for f in fields(record):
        value = getattr(record, f.name)
        if value is None:
            continue
        descriptor = body.DESCRIPTOR.fields_by_name[f.name]
        if descriptor.message_type is not None:  # BrokerIdList: a list with presence
            getattr(body, f.name).SetInParent()
            getattr(body, f.name).ids.extend(value)
        elif isinstance(value, tuple):
            getattr(body, f.name).extend(value)
        else:
            setattr(body, f.name, value)
    return message


# How from_proto reads a field of a record's body, decided once per record class: the
# generic walk (dataclass fields, then the descriptor of each) cost more than the protobuf
# parse itself, and a controller decodes every record of a snapshot when it loads one.
_PLAIN, _REPEATED, _OPTIONAL, _ID_LIST = range(4)


def _read_plan(cls: type) -> tuple[tuple[str, int], ...]:
    """(field name, how to read it) for each field of ``cls``, from its body's descriptor."""
    descriptor = getattr(controller_pb2.MetadataRecord(), _ONEOF_FIELD[cls]).DESCRIPTOR
    plan = []
    for f in fields(cls):
        field = descriptor.fields_by_name[f.name]
        if field.message_type is not None:
            plan.append((f.name, _ID_LIST))
        elif field.is_repeated:
            plan.append((f.name, _REPEATED))
        elif field.has_presence:
            plan.append((f.name, _OPTIONAL))
        else:
            plan.append((f.name, _PLAIN))
    return tuple(plan)


_READ_PLANS: dict[str, tuple[type, tuple[tuple[str, int], ...]]] = {name: (cls, _read_plan(cls)) for cls, name in _ONEOF_FIELD.items()}


def from_proto(message: controller_pb2.MetadataRecord) -> Record:
    """The dataclass form of ``message``; raises ValueError for an empty oneof."""
    kind = message.WhichOneof("record")
    if kind is None:
        raise ValueError("metadata record has no body; the sender and this node disagree on controller.proto")
    cls, plan = _READ_PLANS[kind]
    body = getattr(message, kind)
    values: dict[str, object] = {}
    for name, how in plan:
        if how == _PLAIN:
            values[name] = getattr(body, name)
        elif how == _REPEATED:
            values[name] = tuple(getattr(body, name))
        elif how == _ID_LIST:
            values[name] = tuple(getattr(body, name).ids) if body.HasField(name) else None
        else:
            values[name] = getattr(body, name) if body.HasField(name) else None
    return cls(**values)


def encode(record: Record) -> bytes:
    """The bytes stored in Raft entries."""
    return to_proto(record).SerializeToString()


def decode(data: bytes) -> Record:
    """Inverse of :func:`encode`."""
    return from_proto(controller_pb2.MetadataRecord.FromString(data))
