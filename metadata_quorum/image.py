"""The metadata image: an immutable view of cluster metadata at one metadata offset.

``apply(image, record)`` is the only way an image changes. It is pure (no clock, randomness
or I/O) and deterministic, so every controller replaying the Raft log and every broker
replaying the metadata stream reaches the same image at the same offset. Unchanged
sub-images (topics, brokers) are reused, as in Kafka's MetadataImage/MetadataDelta; readers
hold an image and never see half a change.

A record whose precondition does not hold (a stale partition epoch, a broker epoch that has
moved on, a topic that already exists) raises :class:`RecordRejected`: the controller's Raft
state machine rejects the whole entry (see ``apply_all``) and tells the proposer why.

A topic too large for one entry is created in several: its PartitionRecords first (held in
``pending_partitions``, which no reader looks at), then one entry with its TopicRecord and
configs, which makes the whole topic appear at once. A creation abandoned half way (the
active controller changed) is dropped with a RemoveTopicRecord for its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    # Partitions committed for a topic whose TopicRecord has not committed yet (a large topic
    # is created in several entries): by topic id, invisible to every reader until then.
    pending_partitions: Mapping[str, Mapping[int, PartitionImage]] = field(default_factory=lambda: _EMPTY)

    @staticmethod
    def empty(cluster_id: str) -> "MetadataImage":
        return MetadataImage(offset=0, cluster_id=cluster_id)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        topic_image = self.topics.get(topic)
        return None if topic_image is None else topic_image.partitions.get(partition)

    def usable_broker_ids(self) -> list[int]:
        """Brokers that may take new replicas and leaderships, sorted."""
        return sorted(b.broker_id for b in self.brokers.values() if b.usable)


class _Draft:
    """The image being built by one entry. Each map of the image (and each topic's
    partitions) is copied on its first change in the entry, so an entry of n records costs
    O(n) plus one copy of each map it changes, never a copy per record, and ``freeze``
    returns an image that shares every untouched map and sub-image with the one before."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.offset = image.offset
        self.next_producer_id = image.next_producer_id
        self._edited: dict[str, dict] = {}
        self._touched: dict[str, dict[int, PartitionImage]] = {}  # topic id -> partitions being changed

    def read(self, name: str) -> Mapping:
        """One of the image's maps as this entry has changed it so far."""
        return self._edited[name] if name in self._edited else getattr(self.image, name)

    def edit(self, name: str) -> dict:
        """One of the image's maps, writable."""
        if name not in self._edited:
            self._edited[name] = dict(getattr(self.image, name))
        return self._edited[name]

    def partitions(self, topic: TopicImage) -> dict[int, PartitionImage]:
        """``topic``'s partitions, writable (copied on the first change in this entry)."""
        if topic.topic_id not in self._touched:
            self._touched[topic.topic_id] = dict(topic.partitions)
        return self._touched[topic.topic_id]

    def put_topic(self, topic: TopicImage) -> None:
        self.edit("topics")[topic.name] = topic
        self.edit("topics_by_id")[topic.topic_id] = topic

    def drop_topic(self, topic: TopicImage) -> None:
        del self.edit("topics")[topic.name]
        del self.edit("topics_by_id")[topic.topic_id]
        if topic.name in self.read("configs"):
            del self.edit("configs")[topic.name]
        self._touched.pop(topic.topic_id, None)

    def freeze(self) -> MetadataImage:
        for topic_id, partitions in self._touched.items():
            self.put_topic(replace(self.read("topics_by_id")[topic_id], partitions=MappingProxyType(partitions)))
        changed = {name: MappingProxyType(mapping) for name, mapping in self._edited.items()}
        return replace(self.image, offset=self.offset, next_producer_id=self.next_producer_id, **changed)


def _reject(code: int, message: str) -> RecordRejected:
    return RecordRejected(code, message)


def _topic_by_id(draft: _Draft, topic_id: str) -> TopicImage:
    topic = draft.read("topics_by_id").get(topic_id)
    if topic is None:
        raise _reject(common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"topic id {topic_id} does not exist (deleted meanwhile?); refresh metadata and retry")
    return topic


def _broker(draft: _Draft, broker_id: int, epoch: int) -> BrokerImage:
    broker = draft.read("brokers").get(broker_id)
    if broker is None:
        raise _reject(common_pb2.BROKER_NOT_REGISTERED, f"broker {broker_id} is not registered; it must register again")
    if broker.epoch != epoch:
        raise _reject(common_pb2.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {epoch} is stale (current {broker.epoch}); it must use its current registration")
    return broker


def _apply_topic(draft: _Draft, r: TopicRecord) -> None:
    """The topic appears with every partition committed for its id before (see
    ``pending_partitions``), all at once; they must be partitions 0..n-1. (Partitions may
    also follow the TopicRecord, as in logs written before creations were split.)"""
    if r.name in draft.read("topics") or r.topic_id in draft.read("topics_by_id"):
        raise _reject(common_pb2.TOPIC_ALREADY_EXISTS, f"topic '{r.name}' already exists; choose another name or delete it first")
    pending = draft.edit("pending_partitions").pop(r.topic_id, _EMPTY)
    if sorted(pending) != list(range(len(pending))):  # an entry of the creation was lost or abandoned
        raise _reject(common_pb2.INVALID_PARTITIONS, f"topic '{r.name}' would miss partitions (it has {len(pending)}, not numbered from 0 on); create it again")
    topic = TopicImage(r.name, r.topic_id, _EMPTY)
    draft.put_topic(topic)
    if pending:
        draft.partitions(topic).update({n: replace(p, topic=r.name) for n, p in pending.items()})


def _apply_partition(draft: _Draft, r: PartitionRecord) -> None:
    topic = draft.read("topics_by_id").get(r.topic_id)
    if topic is None:  # a topic being created: kept aside until its TopicRecord commits
        partitions = dict(draft.read("pending_partitions").get(r.topic_id, _EMPTY))
        name = ""
    else:
        partitions = draft.partitions(topic)
        name = topic.name
    if r.partition in partitions:
        raise _reject(common_pb2.INVALID_PARTITIONS, f"partition {name or r.topic_id}-{r.partition} already exists")
    partitions[r.partition] = PartitionImage(
        name, r.partition, r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch, r.adding_replicas, r.removing_replicas, r.unclean_leader_elections
    )
    if topic is None:
        draft.edit("pending_partitions")[r.topic_id] = MappingProxyType(partitions)


def _check_usable(draft: _Draft, broker_ids: Iterable[int], what: str) -> None:
    for broker_id in broker_ids:
        broker = draft.read("brokers").get(broker_id)
        if broker is None or not broker.usable:
            state = "not registered" if broker is None else ("fenced" if broker.fenced else "in controlled shutdown")
            raise _reject(common_pb2.INELIGIBLE_REPLICA, f"broker {broker_id} cannot become {what}: it is {state}; retry once it has registered and caught up")


def _apply_partition_change(draft: _Draft, r: PartitionChangeRecord) -> None:
    topic = _topic_by_id(draft, r.topic_id)
    partitions = draft.partitions(topic)
    p = partitions.get(r.partition)
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
        _check_usable(draft, [leader], f"leader of {topic.name}-{r.partition}")
    _check_usable(draft, set(isr) - set(p.isr) - {leader}, f"in-sync replica of {topic.name}-{r.partition}")
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
    partitions[r.partition] = replace(
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


def _apply_register_broker(draft: _Draft, r: RegisterBrokerRecord) -> None:
    epoch = draft.offset if r.broker_epoch == NEW_BROKER_EPOCH else r.broker_epoch
    draft.edit("brokers")[r.broker_id] = BrokerImage(r.broker_id, epoch, r.host, r.port, r.rack, r.fenced, r.in_controlled_shutdown, r.incarnation_id)


def _apply_unregister_broker(draft: _Draft, r: UnregisterBrokerRecord) -> None:
    _broker(draft, r.broker_id, r.broker_epoch)
    del draft.edit("brokers")[r.broker_id]


def _apply_fence(draft: _Draft, r: FenceBrokerRecord) -> None:
    draft.edit("brokers")[r.broker_id] = replace(_broker(draft, r.broker_id, r.epoch), fenced=True)


def _apply_unfence(draft: _Draft, r: UnfenceBrokerRecord) -> None:
    draft.edit("brokers")[r.broker_id] = replace(_broker(draft, r.broker_id, r.epoch), fenced=False)


def _apply_registration_change(draft: _Draft, r: BrokerRegistrationChangeRecord) -> None:
    broker = _broker(draft, r.broker_id, r.broker_epoch)
    draft.edit("brokers")[r.broker_id] = replace(broker, in_controlled_shutdown=r.in_controlled_shutdown)


def _apply_config(draft: _Draft, r: ConfigRecord) -> None:
    if r.topic not in draft.read("topics"):
        raise _reject(common_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{r.topic}' does not exist; create it first")
    overrides = dict(draft.read("configs").get(r.topic, _EMPTY))
    if r.value is None:
        overrides.pop(r.key, None)
    else:
        overrides[r.key] = r.value
    if overrides:
        draft.edit("configs")[r.topic] = MappingProxyType(overrides)
    else:
        draft.edit("configs").pop(r.topic, None)


def _apply_remove_topic(draft: _Draft, r: RemoveTopicRecord) -> None:
    """Deletes a topic, or abandons a creation whose TopicRecord never committed."""
    if r.topic_id not in draft.read("topics_by_id") and r.topic_id in draft.read("pending_partitions"):
        del draft.edit("pending_partitions")[r.topic_id]
        return
    draft.drop_topic(_topic_by_id(draft, r.topic_id))


def _apply_producer_ids(draft: _Draft, r: ProducerIdsRecord) -> None:
    if r.next_producer_id <= draft.next_producer_id:
        raise _reject(common_pb2.INVALID_UPDATE_VERSION, f"producer id block already handed out (next id is {draft.next_producer_id}); retry the allocation")
    draft.next_producer_id = r.next_producer_id


_APPLIERS: dict[type, Callable[[_Draft, object], None]] = {
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
    return apply_all(image, (record,))


def apply_all(image: MetadataImage, records: Sequence[Record]) -> MetadataImage:
    """All records or none: raises RecordRejected (and the caller keeps ``image``) if one
    fails. Record i is at offset ``image.offset + 1 + i``."""
    if not records:
        return image
    draft = _Draft(image)
    for record in records:
        draft.offset += 1
        _APPLIERS[type(record)](draft, record)
    return draft.freeze()


def image_to_records(image: MetadataImage) -> list[Record]:
    """Snapshot records: applied to an empty image they rebuild ``image`` (see ``image_from_snapshot``)."""
    out: list[Record] = [
        RegisterBrokerRecord(b.broker_id, b.epoch, b.host, b.port, b.rack, b.incarnation_id, b.fenced, b.in_controlled_shutdown)
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
    ]
    for name in sorted(image.topics):
        topic = image.topics[name]
        out.append(TopicRecord(topic.name, topic.topic_id))
        out.extend(_partition_record(topic.topic_id, p) for _, p in sorted(topic.partitions.items()))
        out.extend(ConfigRecord(name, key, value) for key, value in sorted(image.configs.get(name, {}).items()))
    for topic_id in sorted(image.pending_partitions):
        out.extend(_partition_record(topic_id, p) for _, p in sorted(image.pending_partitions[topic_id].items()))
    if image.next_producer_id > 0:
        out.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    return out


def _partition_record(topic_id: str, p: PartitionImage) -> PartitionRecord:
    return PartitionRecord(
        topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.adding_replicas, p.removing_replicas, p.unclean_leader_elections
    )


def image_from_snapshot(cluster_id: str, records: Sequence[Record], offset: int) -> MetadataImage:
    """The image a snapshot taken at ``offset`` describes."""
    return replace(apply_all(MetadataImage.empty(cluster_id), records), offset=offset)
