"""The metadata image: an immutable view of cluster metadata at one metadata offset.

``apply(image, record)`` is the only way an image changes. It is pure (no clock, randomness
or I/O) and deterministic, so every controller replaying the Raft log and every broker
replaying the metadata stream reaches the same image at the same offset. Unchanged
sub-images (topics, brokers) are reused, as in Kafka's MetadataImage/MetadataDelta; readers
hold an image and never see half a change.

A record whose precondition does not hold (a stale partition epoch, a broker epoch that has
moved on, a topic that already exists) raises :class:`RecordRejected`: the controller's Raft
state machine rejects the whole entry (see ``apply_all``) and tells the proposer why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import reduce
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from metadata_quorum.records import (
    NEW_BROKER_EPOCH,
    BrokerIds,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from proto import common_pb2

NO_LEADER = -1


class RecordRejected(Exception):
    """A record's precondition does not hold on this image; ``code`` is a common.proto ErrorCode."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PartitionImage:
    topic: str
    partition: int
    replicas: BrokerIds
    isr: BrokerIds
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: BrokerIds = ()
    removing_replicas: BrokerIds = ()
    unclean_leader_elections: int = 0

    @property
    def reassignment_in_progress(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> BrokerIds:
        """The replicas once a reassignment in progress completes (all of them otherwise)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionImage]


@dataclass(frozen=True)
class BrokerImage:
    broker_id: int
    epoch: int
    host: str
    port: int
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    incarnation_id: str = ""

    @property
    def usable(self) -> bool:
        """May lead partitions and join ISRs: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class MetadataImage:
    offset: int
    cluster_id: str
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0

    @staticmethod
    def empty(cluster_id: str) -> "MetadataImage":
        return MetadataImage(offset=0, cluster_id=cluster_id)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        topic_image = self.topics.get(topic)
        return None if topic_image is None else topic_image.partitions.get(partition)

    def usable_broker_ids(self) -> list[int]:
        """Brokers that may take new replicas and leaderships, sorted."""
        return sorted(b.broker_id for b in self.brokers.values() if b.usable)


def _with(mapping: Mapping, key: object, value: object) -> Mapping:
    """A copy of ``mapping`` with ``key`` set (or removed when ``value`` is None)."""
    copy = dict(mapping)
    if value is None:
        copy.pop(key, None)
    else:
        copy[key] = value
    return MappingProxyType(copy)


def _reject(code: int, message: str) -> RecordRejected:
    return RecordRejected(code, message)


def _topic_by_id(image: MetadataImage, topic_id: str) -> TopicImage:
    topic = image.topics_by_id.get(topic_id)
    if topic is None:
        raise _reject(common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"topic id {topic_id} does not exist (deleted meanwhile?); refresh metadata and retry")
    return topic


def _put_topic(image: MetadataImage, topic: TopicImage) -> dict:
    return {"topics": _with(image.topics, topic.name, topic), "topics_by_id": _with(image.topics_by_id, topic.topic_id, topic)}


def _broker(image: MetadataImage, broker_id: int, epoch: int) -> BrokerImage:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise _reject(common_pb2.BROKER_NOT_REGISTERED, f"broker {broker_id} is not registered; it must register again")
    if broker.epoch != epoch:
        raise _reject(common_pb2.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {epoch} is stale (current {broker.epoch}); it must use its current registration")
    return broker


def _apply_topic(image: MetadataImage, r: TopicRecord, offset: int) -> dict:
    if r.name in image.topics or r.topic_id in image.topics_by_id:
        raise _reject(common_pb2.TOPIC_ALREADY_EXISTS, f"topic '{r.name}' already exists; choose another name or delete it first")
    return _put_topic(image, TopicImage(r.name, r.topic_id, _EMPTY))


def _apply_partition(image: MetadataImage, r: PartitionRecord, offset: int) -> dict:
    topic = _topic_by_id(image, r.topic_id)
    if r.partition in topic.partitions:
        raise _reject(common_pb2.INVALID_PARTITIONS, f"partition {topic.name}-{r.partition} already exists")
    p = PartitionImage(
        topic.name, r.partition, r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch, r.adding_replicas, r.removing_replicas, r.unclean_leader_elections
    )
    return _put_topic(image, replace(topic, partitions=_with(topic.partitions, r.partition, p)))


def _check_usable(image: MetadataImage, broker_ids: Iterable[int], what: str) -> None:
    for broker_id in broker_ids:
        broker = image.brokers.get(broker_id)
        if broker is None or not broker.usable:
            state = "not registered" if broker is None else ("fenced" if broker.fenced else "in controlled shutdown")
            raise _reject(common_pb2.INELIGIBLE_REPLICA, f"broker {broker_id} cannot become {what}: it is {state}; retry once it has registered and caught up")


def _apply_partition_change(image: MetadataImage, r: PartitionChangeRecord, offset: int) -> dict:
    topic = _topic_by_id(image, r.topic_id)
    p = topic.partitions.get(r.partition)
    if p is None:
        raise _reject(common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic.name}-{r.partition} does not exist; refresh metadata")
    if p.partition_epoch != r.base_partition_epoch:
        raise _reject(
            common_pb2.INVALID_UPDATE_VERSION,
            f"partition {topic.name}-{r.partition} is at partition epoch {p.partition_epoch}, the change was based on {r.base_partition_epoch}; refresh metadata and retry",
        )
    leader = p.leader if r.leader is None else r.leader
    isr = p.isr if r.isr is None else r.isr
    if leader != p.leader and leader != NO_LEADER:
        _check_usable(image, [leader], f"leader of {topic.name}-{r.partition}")
    _check_usable(image, set(isr) - set(p.isr) - {leader}, f"in-sync replica of {topic.name}-{r.partition}")
    replicas = p.replicas if r.replicas is None else r.replicas
    adding = p.adding_replicas if r.adding_replicas is None else r.adding_replicas
    removing = p.removing_replicas if r.removing_replicas is None else r.removing_replicas
    consistent = (
        (leader == NO_LEADER or leader in isr)
        and set(isr) <= set(replicas)
        and set(adding) | set(removing) <= set(replicas)
        and not set(adding) & set(removing)
        and (not r.unclean_leader_election or (leader != NO_LEADER and leader not in p.isr))
    )
    if not consistent:
        raise _reject(
            common_pb2.INVALID_REQUEST,
            f"change to {topic.name}-{r.partition} is inconsistent: leader {leader}, isr {list(isr)}, replicas {list(replicas)}, "
            f"adding {list(adding)}, removing {list(removing)}, unclean {r.unclean_leader_election} (previous isr {list(p.isr)})",
        )
    changed = replace(
        p,
        leader=leader,
        isr=isr,
        replicas=replicas,
        adding_replicas=adding,
        removing_replicas=removing,
        leader_epoch=p.leader_epoch + (0 if r.leader is None else 1),
        partition_epoch=p.partition_epoch + 1,
        unclean_leader_elections=p.unclean_leader_elections + (1 if r.unclean_leader_election else 0),
    )
    return _put_topic(image, replace(topic, partitions=_with(topic.partitions, r.partition, changed)))


def _apply_register_broker(image: MetadataImage, r: RegisterBrokerRecord, offset: int) -> dict:
    epoch = offset if r.broker_epoch == NEW_BROKER_EPOCH else r.broker_epoch
    broker = BrokerImage(r.broker_id, epoch, r.host, r.port, r.rack, r.fenced, r.in_controlled_shutdown, r.incarnation_id)
    return {"brokers": _with(image.brokers, r.broker_id, broker)}


def _apply_unregister_broker(image: MetadataImage, r: UnregisterBrokerRecord, offset: int) -> dict:
    _broker(image, r.broker_id, r.broker_epoch)
    return {"brokers": _with(image.brokers, r.broker_id, None)}


def _apply_fence(image: MetadataImage, r: FenceBrokerRecord, offset: int) -> dict:
    broker = _broker(image, r.broker_id, r.epoch)
    return {"brokers": _with(image.brokers, r.broker_id, replace(broker, fenced=True))}


def _apply_unfence(image: MetadataImage, r: UnfenceBrokerRecord, offset: int) -> dict:
    broker = _broker(image, r.broker_id, r.epoch)
    return {"brokers": _with(image.brokers, r.broker_id, replace(broker, fenced=False))}


def _apply_registration_change(image: MetadataImage, r: BrokerRegistrationChangeRecord, offset: int) -> dict:
    broker = _broker(image, r.broker_id, r.broker_epoch)
    return {"brokers": _with(image.brokers, r.broker_id, replace(broker, in_controlled_shutdown=r.in_controlled_shutdown))}


def _apply_config(image: MetadataImage, r: ConfigRecord, offset: int) -> dict:
    if r.topic not in image.topics:
        raise _reject(common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{r.topic}' does not exist; create it first")
    overrides = _with(image.configs.get(r.topic, _EMPTY), r.key, r.value)
    return {"configs": _with(image.configs, r.topic, overrides or None)}


def _apply_remove_topic(image: MetadataImage, r: RemoveTopicRecord, offset: int) -> dict:
    topic = _topic_by_id(image, r.topic_id)
    return {
        "topics": _with(image.topics, topic.name, None),
        "topics_by_id": _with(image.topics_by_id, topic.topic_id, None),
        "configs": _with(image.configs, topic.name, None),
    }


def _apply_producer_ids(image: MetadataImage, r: ProducerIdsRecord, offset: int) -> dict:
    if r.next_producer_id <= image.next_producer_id:
        raise _reject(common_pb2.INVALID_UPDATE_VERSION, f"producer id block already handed out (next id is {image.next_producer_id}); retry the allocation")
    return {"next_producer_id": r.next_producer_id}


_APPLIERS: dict[type, Callable[[MetadataImage, object, int], dict]] = {
    TopicRecord: _apply_topic,
    PartitionRecord: _apply_partition,
    PartitionChangeRecord: _apply_partition_change,
    RegisterBrokerRecord: _apply_register_broker,
    UnregisterBrokerRecord: _apply_unregister_broker,
    FenceBrokerRecord: _apply_fence,
    UnfenceBrokerRecord: _apply_unfence,
    BrokerRegistrationChangeRecord: _apply_registration_change,
    ConfigRecord: _apply_config,
    RemoveTopicRecord: _apply_remove_topic,
    ProducerIdsRecord: _apply_producer_ids,
}


def apply(image: MetadataImage, record: Record) -> MetadataImage:
    """The image after ``record``, at offset ``image.offset + 1``; raises RecordRejected."""
    offset = image.offset + 1
    changes = _APPLIERS[type(record)](image, record, offset)
    return replace(image, offset=offset, **changes)


def apply_all(image: MetadataImage, records: Sequence[Record]) -> MetadataImage:
    """All records or none: raises RecordRejected (and the caller keeps ``image``) if one fails."""
    return reduce(apply, records, image)


def image_to_records(image: MetadataImage) -> list[Record]:
    """Snapshot records: applied to an empty image they rebuild ``image`` (see ``image_from_snapshot``)."""
    out: list[Record] = [
        RegisterBrokerRecord(b.broker_id, b.epoch, b.host, b.port, b.rack, b.incarnation_id, b.fenced, b.in_controlled_shutdown)
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
    ]
    for name in sorted(image.topics):
        topic = image.topics[name]
        out.append(TopicRecord(topic.name, topic.topic_id))
        out.extend(
            PartitionRecord(
                topic.topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.adding_replicas, p.removing_replicas, p.unclean_leader_elections
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        )
        out.extend(ConfigRecord(name, key, value) for key, value in sorted(image.configs.get(name, {}).items()))
    if image.next_producer_id > 0:
        out.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    return out


def image_from_snapshot(cluster_id: str, records: Sequence[Record], offset: int) -> MetadataImage:
    """The image a snapshot taken at ``offset`` describes."""
    return replace(apply_all(MetadataImage.empty(cluster_id), records), offset=offset)
