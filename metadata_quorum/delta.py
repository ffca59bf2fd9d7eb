"""The metadata delta: records replayed onto an image, applied once per batch.

Every change to a :class:`MetadataImage` goes through a :class:`MetadataDelta` (Kafka's
MetadataDelta): records are replayed one by one onto a base image, and the delta keeps only
what they changed, as small maps of changed sub-images (created and deleted topics, changed
partitions, brokers, topic configs, pending partitions). ``apply()`` then builds the next
image once, setting each changed key into the base image's persistent maps (image.py): a
set copies only the O(log n) path to the key, never the map, and every untouched sub-image
is shared with the base. Replaying and applying a record costs the same on an image of ten
partitions as on one of ten thousand, in a batch of one record as in a batch of thousands.

The controller replays each Raft entry into one delta (an entry is all or nothing: a
rejected record discards the delta and the image stays as it was); a broker replays each
batch of the metadata stream into one delta and reacts to what it says changed
(``local_changes``), never to the whole image.

Replaying is pure (no clock, randomness or I/O) and deterministic, so every controller
replaying the Raft log and every broker replaying the metadata stream reaches the same image
at the same offset. A record whose precondition does not hold (a stale partition epoch, a
broker epoch that has moved on, a topic that already exists) raises :class:`RecordRejected`.

A topic too large for one entry is created in several: its PartitionRecords first (held in
``pending_partitions``, which no reader looks at), then one entry with its TopicRecord and
configs, which makes the whole topic appear at once. A creation abandoned half way (the
active controller changed) is dropped with a RemoveTopicRecord for its id.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable, Iterable, Mapping, Sequence

from immutables import Map

from metadata_quorum.image import EMPTY, NO_LEADER, BrokerImage, MetadataImage, PartitionImage, QuotaEntity, RecordRejected, TopicImage
from metadata_quorum.records import (
    NEW_BROKER_EPOCH,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from server_common.authorizer import AclBinding
from server_common.scram import ScramCredential
from server_common.errors import ErrorCode

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LocalChanges:
    """What a delta asks of one broker's replicas (Kafka's LocalReplicaChanges): only the
    partitions of this broker that the delta touched, never the rest of the cluster."""

    deleted_topics: tuple[TopicImage, ...]  # topics deleted (or recreated under a new id), as they were: every local replica goes
    stopped: tuple[TopicPartition, ...]  # reassigned away from this broker: the local replica goes
    replicas: Mapping[str, Mapping[int, PartitionImage]]  # by topic: partitions of this broker created or changed (leader, epochs, ISR, replicas)
    configs: tuple[str, ...]  # topics whose configuration changed (the local replicas take the new settings)
    brokers_changed: bool  # a broker registered, moved or was fenced: the fetchers may have to follow


class MetadataDelta:
    """Records replayed onto ``base``; ``apply()`` returns the image they lead to.

    Reads during replay (``topic_by_id``, ``partition``, ``broker``, ...) see the base image
    as changed by the records replayed so far. A delta is used for one batch: replay, apply,
    hand it to whoever reacts to the change, drop it."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self.offset = base.offset
        self.next_producer_id = base.next_producer_id
        self._created: dict[str, TopicImage] = {}  # topic id -> topic this delta creates (its partitions are in _partitions)
        self._created_ids: dict[str, str] = {}  # name -> id of the topics in _created
        self._deleted: dict[str, TopicImage] = {}  # topic id -> topic of the base image this delta deletes
        self._partitions: dict[str, dict[int, PartitionImage]] = {}  # topic id -> partitions created or changed
        self._brokers: dict[int, BrokerImage | None] = {}  # None: unregistered
        self._configs: dict[str, Map[str, str]] = {}  # topic name -> its overrides now (empty: none left)
        self._pending: dict[str, Map[int, PartitionImage]] = {}  # topic id -> pending partitions now (empty: none left)
        self._quotas: dict[QuotaEntity, Map[str, float]] = {}  # entity -> its quota values now (empty: none left)
        self._users: dict[str, ScramCredential | None] = {}  # user -> its credential now (None: deleted)
        self._acls: dict[AclBinding, bool] = {}  # ACL -> present now
        self._snapshot: MetadataImage | None = None
        self._applied = False  # the image shares this delta's maps from then on: no more replays

    @classmethod
    def from_snapshot(cls, base: MetadataImage, image: MetadataImage) -> "MetadataDelta":
        """The change a snapshot brings to a node that held ``base``: ``apply()`` returns
        ``image``, every topic, partition, config and broker of ``image`` counts as changed
        (a snapshot says nothing of what moved), and every topic of ``base`` that ``image``
        lacks, or holds under another id, as deleted."""
        delta = cls(base)
        delta.offset, delta.next_producer_id, delta._snapshot = image.offset, image.next_producer_id, image
        delta._deleted = {topic_id: topic for topic_id, topic in base.topics_by_id.items() if topic_id not in image.topics_by_id}
        delta._created = {topic_id: topic for topic_id, topic in image.topics_by_id.items() if topic_id not in base.topics_by_id}
        delta._partitions = {topic_id: dict(topic.partitions) for topic_id, topic in image.topics_by_id.items()}
        delta._brokers = {b: image.brokers.get(b) for b in {*base.brokers, *image.brokers}}
        delta._configs = {name: image.configs.get(name, EMPTY) for name in {*base.configs, *image.configs}}
        return delta

    # ---- reads: the base image as changed so far

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        if topic_id in self._created:
            return self._created[topic_id]
        return None if topic_id in self._deleted else self.base.topics_by_id.get(topic_id)

    def topic_exists(self, name: str) -> bool:
        if name in self._created_ids:
            return True
        topic = self.base.topics.get(name)
        return topic is not None and topic.topic_id not in self._deleted

    def partition(self, topic: TopicImage, index: int) -> PartitionImage | None:
        changed = self._partitions.get(topic.topic_id)
        if changed is not None and index in changed:
            return changed[index]
        return topic.partitions.get(index)

    def broker(self, broker_id: int) -> BrokerImage | None:
        return self._brokers[broker_id] if broker_id in self._brokers else self.base.brokers.get(broker_id)

    def configs(self, name: str) -> Map[str, str]:
        return self._configs[name] if name in self._configs else self.base.configs.get(name, EMPTY)

    def client_quotas(self, entity: QuotaEntity) -> Map[str, float]:
        return self._quotas[entity] if entity in self._quotas else self.base.client_quotas.get(entity, EMPTY)

    def pending(self, topic_id: str) -> Map[int, PartitionImage]:
        return self._pending[topic_id] if topic_id in self._pending else self.base.pending_partitions.get(topic_id, EMPTY)

    # ---- writes (the record appliers below)

    def put_partition(self, topic_id: str, partition: PartitionImage) -> None:
        changed = self._partitions.get(topic_id)
        if changed is None:
            changed = self._partitions[topic_id] = {}
        changed[partition.partition] = partition

    def put_pending(self, topic_id: str, partition: PartitionImage) -> None:
        """A partition of a topic being created."""
        self._pending[topic_id] = self.pending(topic_id).set(partition.partition, partition)

    def create_topic(self, topic: TopicImage, partitions: Mapping[int, PartitionImage]) -> None:
        assert not self.topic_exists(topic.name) and self.topic_by_id(topic.topic_id) is None
        self._created[topic.topic_id] = topic
        self._created_ids[topic.name] = topic.topic_id
        self._partitions[topic.topic_id] = dict(partitions)
        if topic.topic_id in self.base.pending_partitions or topic.topic_id in self._pending:
            self._pending[topic.topic_id] = EMPTY

    def delete_topic(self, topic: TopicImage) -> None:
        if topic.topic_id in self._created:
            del self._created[topic.topic_id]
            del self._created_ids[topic.name]
        else:
            self._deleted[topic.topic_id] = topic
        self._partitions.pop(topic.topic_id, None)
        self._configs[topic.name] = EMPTY

    def abandon_pending(self, topic_id: str) -> None:
        self._pending[topic_id] = EMPTY

    def put_broker(self, broker_id: int, broker: BrokerImage | None) -> None:
        self._brokers[broker_id] = broker

    def put_configs(self, name: str, overrides: Map[str, str]) -> None:
        self._configs[name] = overrides

    def put_client_quotas(self, entity: QuotaEntity, values: Map[str, float]) -> None:
        self._quotas[entity] = values

    def put_user(self, name: str, credential: ScramCredential | None) -> None:
        self._users[name] = credential

    def put_acl(self, acl: AclBinding, present: bool) -> None:
        self._acls[acl] = present

    # ---- replay and apply

    def replay(self, record: Record) -> None:
        """Replay one record at offset ``self.offset + 1``; raises RecordRejected (the delta is
        then half changed: drop it)."""
        assert self._snapshot is None and not self._applied, "this delta is complete; replay onto a new one"
        self.offset += 1
        _APPLIERS[type(record)](self, record)

    def replay_all(self, records: Iterable[Record]) -> None:
        for record in records:
            self.replay(record)

    def apply(self) -> MetadataImage:
        """The image after every record replayed: the changed keys set into the base image's
        maps (each set costs O(log n) and shares the rest of the map), every sub-image nothing
        changed shared as it is."""
        if self._snapshot is not None:
            return self._snapshot
        self._applied = True
        base = self.base
        topics, by_id = base.topics, base.topics_by_id
        if self._created or self._deleted or self._partitions:
            with topics.mutate() as topics_m, by_id.mutate() as by_id_m:
                for topic in self._deleted.values():  # first: a name may be reused by a topic created after
                    del topics_m[topic.name]
                    del by_id_m[topic.topic_id]
                for topic_id, topic in self._created.items():
                    topics_m[topic.name] = by_id_m[topic_id] = topic
                for topic_id, partitions in self._partitions.items():
                    topic = by_id_m[topic_id]
                    topics_m[topic.name] = by_id_m[topic_id] = TopicImage(topic.name, topic_id, topic.partitions.update(partitions))
                topics, by_id = topics_m.finish(), by_id_m.finish()
            assert len(topics) == len(by_id), "topic maps by name and by id disagree"
        image = MetadataImage(  # not dataclasses.replace: this runs once per Raft entry and metadata batch
            self.offset,
            base.cluster_id,
            topics,
            by_id,
            _merged(base.brokers, self._brokers),
            _merged(base.configs, self._configs),
            self.next_producer_id,
            _merged(base.pending_partitions, self._pending),
            client_quotas=_merged(base.client_quotas, self._quotas),
            scram_users=_merged(base.scram_users, self._users),
            acls=_merged(base.acls, self._acls),
        )
        assert image.offset >= base.offset and image.next_producer_id >= base.next_producer_id, "an image never moves backwards"
        return image

    # ---- what changed

    @property
    def deleted_topics(self) -> Mapping[str, TopicImage]:
        """Topics of the base image this delta deletes, by id (as the base image had them)."""
        return self._deleted

    @property
    def changed_partitions(self) -> Mapping[str, Mapping[int, PartitionImage]]:
        """Partitions created or changed, by topic id, as they are after the delta."""
        return self._partitions

    @property
    def changed_configs(self) -> frozenset[str]:
        """Topics whose configuration overrides were set or removed (including deleted topics)."""
        return frozenset(self._configs)

    @property
    def changed_brokers(self) -> frozenset[int]:
        """Brokers registered, unregistered, fenced, unfenced or moved into controlled shutdown."""
        return frozenset(self._brokers)

    def local_changes(self, broker_id: int, image: MetadataImage) -> LocalChanges:
        """What broker ``broker_id`` must do to its replicas; ``image`` is ``self.apply()``.
        Costs in proportion to the partitions the delta changed."""
        assert image.offset == self.offset, "local changes are read against the image this delta applied to"
        replicas: dict[str, dict[int, PartitionImage]] = {}
        stopped: list[TopicPartition] = []
        for topic_id, partitions in self._partitions.items():
            name = image.topics_by_id[topic_id].name
            before = None if topic_id in self._created else self.base.topics_by_id.get(topic_id)
            for index, partition in partitions.items():
                if broker_id in partition.replicas:
                    replicas.setdefault(name, {})[index] = partition
                elif before is not None and index in before.partitions and broker_id in before.partitions[index].replicas:
                    stopped.append((name, index))
        return LocalChanges(
            deleted_topics=tuple(self._deleted.values()),
            stopped=tuple(stopped),
            replicas=replicas,
            configs=tuple(name for name in self._configs if name in image.topics),
            brokers_changed=bool(self._brokers),
        )


def _merged(base: Map, updates: Mapping) -> Map:
    """``base`` with ``updates`` laid over it; an empty or None update removes the key."""
    if not updates:
        return base
    with base.mutate() as merged:
        for key, value in updates.items():
            if value:
                merged[key] = value
            else:
                merged.pop(key, None)
        return merged.finish()


# ---- record appliers: check the record's precondition against the delta, then change it


def _topic_by_id(delta: MetadataDelta, topic_id: str) -> TopicImage:
    topic = delta.topic_by_id(topic_id)
    if topic is None:
        raise RecordRejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic id {topic_id} does not exist (deleted meanwhile?); refresh metadata and retry")
    return topic


def _broker(delta: MetadataDelta, broker_id: int, epoch: int) -> BrokerImage:
    broker = delta.broker(broker_id)
    if broker is None:
        raise RecordRejected(ErrorCode.BROKER_NOT_REGISTERED, f"broker {broker_id} is not registered; it must register again")
    if broker.epoch != epoch:
        raise RecordRejected(ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {epoch} is stale (current {broker.epoch}); it must use its current registration")
    return broker


def _apply_topic(delta: MetadataDelta, r: TopicRecord) -> None:
    """The topic appears with every partition committed for its id before (see
    ``pending_partitions``), all at once; they must be partitions 0..n-1. (Partitions may
    also follow the TopicRecord, as in logs written before creations were split.)"""
    if delta.topic_exists(r.name) or delta.topic_by_id(r.topic_id) is not None:
        raise RecordRejected(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{r.name}' already exists; choose another name or delete it first")
    pending = delta.pending(r.topic_id)
    if sorted(pending) != list(range(len(pending))):  # an entry of the creation was lost or abandoned
        raise RecordRejected(ErrorCode.INVALID_PARTITIONS, f"topic '{r.name}' would miss partitions (it has {len(pending)}, not numbered from 0 on); create it again")
    delta.create_topic(TopicImage(r.name, r.topic_id, EMPTY), {n: replace(p, topic=r.name) for n, p in pending.items()})


def _apply_partition(delta: MetadataDelta, r: PartitionRecord) -> None:
    topic = delta.topic_by_id(r.topic_id)
    exists = r.partition in delta.pending(r.topic_id) if topic is None else delta.partition(topic, r.partition) is not None
    if exists:
        raise RecordRejected(ErrorCode.INVALID_PARTITIONS, f"partition {r.topic_id if topic is None else topic.name}-{r.partition} already exists")
    partition = PartitionImage(
        "" if topic is None else topic.name, r.partition, r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch,
        r.adding_replicas, r.removing_replicas, r.unclean_leader_elections, r.eligible_leader_replicas, r.last_known_elr,
    )
    if topic is None:  # a topic being created: kept aside until its TopicRecord commits
        delta.put_pending(r.topic_id, partition)
    else:
        delta.put_partition(r.topic_id, partition)


def _check_usable(delta: MetadataDelta, broker_ids: Iterable[int], topic: TopicImage, index: int, role: str) -> None:
    for broker_id in broker_ids:
        broker = delta.broker(broker_id)
        if broker is None or not broker.usable:
            state = "not registered" if broker is None else ("fenced" if broker.fenced else "in controlled shutdown")
            raise RecordRejected(
                ErrorCode.INELIGIBLE_REPLICA,
                f"broker {broker_id} cannot become {role} of {topic.name}-{index}: it is {state}; retry once it has registered and caught up",
            )


def _apply_partition_change(delta: MetadataDelta, r: PartitionChangeRecord) -> None:
    topic = _topic_by_id(delta, r.topic_id)
    p = delta.partition(topic, r.partition)
    if p is None:
        raise RecordRejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic.name}-{r.partition} does not exist; refresh metadata")
    if p.partition_epoch != r.base_partition_epoch:
        raise RecordRejected(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition {topic.name}-{r.partition} is at partition epoch {p.partition_epoch}, the change was based on {r.base_partition_epoch}; refresh metadata and retry",
        )
    leader = p.leader if r.leader is None else r.leader
    isr = p.isr if r.isr is None else r.isr
    if leader != p.leader and leader != NO_LEADER:
        _check_usable(delta, (leader,), topic, r.partition, "leader")
    if r.isr is not None:
        joining = [b for b in isr if b not in p.isr and b != leader]
        if joining:  # a shrink (the common change) asks no broker
            _check_usable(delta, joining, topic, r.partition, "in-sync replica")
    replicas = p.replicas if r.replicas is None else r.replicas
    adding = p.adding_replicas if r.adding_replicas is None else r.adding_replicas
    removing = p.removing_replicas if r.removing_replicas is None else r.removing_replicas
    elr = p.eligible_leader_replicas if r.eligible_leader_replicas is None else r.eligible_leader_replicas
    last_known_elr = p.last_known_elr if r.last_known_elr is None else r.last_known_elr
    replica_set = set(replicas)
    consistent = (
        (leader == NO_LEADER or leader in isr)
        and replica_set.issuperset(isr)
        and replica_set.issuperset(adding)
        and replica_set.issuperset(removing)
        and (not adding or not removing or set(adding).isdisjoint(removing))
        and (not r.unclean_leader_election or (leader != NO_LEADER and leader not in p.isr))
        and replica_set.issuperset(elr)
        and replica_set.issuperset(last_known_elr)
        and set(elr).isdisjoint(isr)
        and set(last_known_elr).isdisjoint(isr)
        and set(last_known_elr).isdisjoint(elr)
    )
    if not consistent:
        raise RecordRejected(
            ErrorCode.INVALID_REQUEST,
            f"change to {topic.name}-{r.partition} is inconsistent: leader {leader}, isr {list(isr)}, replicas {list(replicas)}, "
            f"adding {list(adding)}, removing {list(removing)}, elr {list(elr)}, last known elr {list(last_known_elr)}, unclean {r.unclean_leader_election} "
            f"(previous isr {list(p.isr)})",
        )
    changed = PartitionImage(  # not dataclasses.replace: this is the hot path of every ISR change
        p.topic,
        p.partition,
        replicas,
        isr,
        leader,
        p.leader_epoch + (0 if r.leader is None else 1),
        p.partition_epoch + 1,
        adding,
        removing,
        p.unclean_leader_elections + (1 if r.unclean_leader_election else 0),
        elr,
        last_known_elr,
    )
    delta.put_partition(r.topic_id, changed)


def _apply_register_broker(delta: MetadataDelta, r: RegisterBrokerRecord) -> None:
    epoch = delta.offset if r.broker_epoch == NEW_BROKER_EPOCH else r.broker_epoch
    delta.put_broker(r.broker_id, BrokerImage(r.broker_id, epoch, r.host, r.port, r.rack, r.fenced, r.in_controlled_shutdown, r.incarnation_id,
                                              r.max_replicas, r.kafka_endpoint))


def _apply_unregister_broker(delta: MetadataDelta, r: UnregisterBrokerRecord) -> None:
    _broker(delta, r.broker_id, r.broker_epoch)
    delta.put_broker(r.broker_id, None)


def _apply_fence(delta: MetadataDelta, r: FenceBrokerRecord) -> None:
    delta.put_broker(r.broker_id, replace(_broker(delta, r.broker_id, r.epoch), fenced=True))


def _apply_unfence(delta: MetadataDelta, r: UnfenceBrokerRecord) -> None:
    delta.put_broker(r.broker_id, replace(_broker(delta, r.broker_id, r.epoch), fenced=False))


def _apply_registration_change(delta: MetadataDelta, r: BrokerRegistrationChangeRecord) -> None:
    broker = _broker(delta, r.broker_id, r.broker_epoch)
    delta.put_broker(r.broker_id, replace(broker, in_controlled_shutdown=r.in_controlled_shutdown))


def _apply_config(delta: MetadataDelta, r: ConfigRecord) -> None:
    if not delta.topic_exists(r.topic):
        raise RecordRejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{r.topic}' does not exist; create it first")
    overrides = delta.configs(r.topic)
    if r.value is None:
        overrides = overrides.delete(r.key) if r.key in overrides else overrides
    else:
        overrides = overrides.set(r.key, r.value)
    delta.put_configs(r.topic, overrides)


def _apply_remove_topic(delta: MetadataDelta, r: RemoveTopicRecord) -> None:
    """Deletes a topic, or abandons a creation whose TopicRecord never committed."""
    if delta.topic_by_id(r.topic_id) is None and delta.pending(r.topic_id):
        delta.abandon_pending(r.topic_id)
        return
    delta.delete_topic(_topic_by_id(delta, r.topic_id))


def _apply_producer_ids(delta: MetadataDelta, r: ProducerIdsRecord) -> None:
    if r.next_producer_id <= delta.next_producer_id:
        raise RecordRejected(ErrorCode.INVALID_UPDATE_VERSION, f"producer id block already handed out (next id is {delta.next_producer_id}); retry the allocation")
    delta.next_producer_id = r.next_producer_id


def _apply_client_quota(delta: MetadataDelta, r: ClientQuotaRecord) -> None:
    """Sets or removes one quota value (validated by the controller before it is proposed)."""
    entity = (r.user, r.client_id)
    values = delta.client_quotas(entity)
    if r.value is None:
        values = values.delete(r.key) if r.key in values else values
    else:
        values = values.set(r.key, r.value)
    delta.put_client_quotas(entity, values)


def _apply_user(delta: MetadataDelta, r: UserScramCredentialRecord) -> None:
    delta.put_user(r.name, ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations, r.stored_key_sha512, r.server_key_sha512))


def _apply_remove_user(delta: MetadataDelta, r: RemoveUserScramCredentialRecord) -> None:
    delta.put_user(r.name, None)


def _apply_acl(delta: MetadataDelta, r: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
    """Adds or removes one ACL, keyed by its fields (validated by the controller before it is proposed)."""
    delta.put_acl(AclBinding(*(getattr(r, f.name) for f in fields(AclBinding))), isinstance(r, AccessControlEntryRecord))


_APPLIERS: dict[type, Callable[[MetadataDelta, object], None]] = {
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
    ClientQuotaRecord: _apply_client_quota,
    UserScramCredentialRecord: _apply_user,
    RemoveUserScramCredentialRecord: _apply_remove_user,
    AccessControlEntryRecord: _apply_acl,
    RemoveAccessControlEntryRecord: _apply_acl,
}


def apply(image: MetadataImage, record: Record) -> MetadataImage:
    """The image after ``record``, at offset ``image.offset + 1``; raises RecordRejected."""
    return apply_all(image, (record,))


def apply_all(image: MetadataImage, records: Sequence[Record]) -> MetadataImage:
    """All records or none, through one delta: raises RecordRejected (and the caller keeps
    ``image``) if one fails. Record i is at offset ``image.offset + 1 + i``."""
    if not records:
        return image
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply()


def image_from_snapshot(cluster_id: str, records: Sequence[Record], offset: int) -> MetadataImage:
    """The image a snapshot taken at ``offset`` describes (records from ``image_to_records``)."""
    return replace(apply_all(MetadataImage.empty(cluster_id), records), offset=offset)
