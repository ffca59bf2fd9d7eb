"""The metadata image: an immutable view of cluster metadata at one metadata offset.

An image is made of sub-images (topics with their partitions, brokers, topic configs) in
persistent maps (``immutables.Map``, a hash array mapped trie: CPython's contextvars use the
same structure). It never changes: replaying records onto it (``delta.MetadataDelta``,
Kafka's MetadataDelta) builds the next image, which shares every sub-image the records did
not touch with this one, and most of each map too: setting one key of a persistent map
copies only the O(log n) path to it, so a change of one partition costs the same on a
cluster of ten partitions as on one of ten thousand, whether the topic has one partition or
all of them. Readers hold an image and never see half a change.

The maps iterate in no particular order (as before, readers sort where order matters).

``image_to_records`` turns an image into snapshot records; ``delta.image_from_snapshot``
rebuilds it from them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from immutables import Map

from server_common.authorizer import AclBinding
from server_common.scram import ScramCredential
from server_common.errors import ErrorCode

from metadata_quorum.records import AccessControlEntryRecord, BrokerIds, ClientQuotaRecord, UserScramCredentialRecord, ConfigRecord, PartitionRecord, ProducerIdsRecord, Record, RegisterBrokerRecord, TopicRecord

NO_LEADER = -1
# Who a client quota applies to: (user, client id), None where the entity does not name that
# dimension, "" for its default (docs/quotas.md).
QuotaEntity = tuple["str | None", "str | None"]


class RecordRejected(Exception):
    """A record's precondition does not hold on the image it is replayed onto; ``code`` says which."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
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
    # KIP-966, see election.py: replicas out of the ISR known to hold everything up to the
    # HW, and those that lost that standing through an unclean shutdown.
    eligible_leader_replicas: BrokerIds = ()
    last_known_elr: BrokerIds = ()

    @property
    def reassignment_in_progress(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> BrokerIds:
        """The replicas once a reassignment in progress completes (all of them otherwise)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Map[int, PartitionImage]


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    epoch: int
    host: str
    port: int
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    incarnation_id: str = ""
    max_replicas: int = 0  # replicas it can host (placement.capacity_problem); 0: no limit stated
    kafka_endpoint: str = ""  # host:port of its Kafka listener (docs/kafka.md); empty: none

    @property
    def usable(self) -> bool:
        """May lead partitions and join ISRs: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


EMPTY: Map = Map()


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int
    cluster_id: str
    topics: Map[str, TopicImage] = EMPTY
    topics_by_id: Map[str, TopicImage] = EMPTY
    brokers: Map[int, BrokerImage] = EMPTY
    configs: Map[str, Map[str, str]] = EMPTY  # topic name -> its overrides (topics with none are absent)
    next_producer_id: int = 0
    # Partitions committed for a topic whose TopicRecord has not committed yet (a large topic
    # is created in several entries): by topic id, invisible to every reader until then.
    pending_partitions: Map[str, Map[int, PartitionImage]] = EMPTY
    client_quotas: Map[QuotaEntity, Map[str, float]] = EMPTY  # entity -> its quota values (entities with none are absent)
    scram_users: Map[str, ScramCredential] = EMPTY  # user name -> its SCRAM credential
    acls: Map[AclBinding, bool] = EMPTY  # a set: every ACL maps to True

    @staticmethod
    def empty(cluster_id: str) -> "MetadataImage":
        return MetadataImage(offset=0, cluster_id=cluster_id)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        topic_image = self.topics.get(topic)
        return None if topic_image is None else topic_image.partitions.get(partition)

    def usable_broker_ids(self) -> list[int]:
        """Brokers that may take new replicas and leaderships, sorted."""
        return sorted(b.broker_id for b in self.brokers.values() if b.usable)


def image_to_records(image: MetadataImage) -> list[Record]:
    """Snapshot records: applied to an empty image they rebuild ``image`` (see ``image_from_snapshot``)."""
    out = broker_records(image)
    for name in sorted(image.topics):
        out.extend(topic_records(image, name))
    out.extend(rest_records(image))
    return out


def broker_records(image: MetadataImage) -> list[Record]:
    """The snapshot's first part: every registered broker."""
    return [
        RegisterBrokerRecord(b.broker_id, b.epoch, b.host, b.port, b.rack, b.incarnation_id, b.fenced, b.in_controlled_shutdown,
                             b.max_replicas, b.kafka_endpoint)
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
    ]


def topic_records(image: MetadataImage, name: str) -> list[Record]:
    """One topic's part of the snapshot (its record, its partitions, its configs), which
    depends on ``image.topics[name]`` and ``image.configs.get(name)`` alone."""
    topic = image.topics[name]
    return [TopicRecord(topic.name, topic.topic_id), *(partition_record(topic.topic_id, p) for p in sorted_partitions(topic)),
            *config_records(image, name)]


def sorted_partitions(topic: TopicImage) -> list[PartitionImage]:
    """A topic's partitions in snapshot order (by number)."""
    return [p for _, p in sorted(topic.partitions.items())]


def config_records(image: MetadataImage, name: str) -> list[ConfigRecord]:
    """The configs part of a topic's snapshot records, in snapshot order."""
    return [ConfigRecord(name, key, value) for key, value in sorted(image.configs.get(name, {}).items())]


def rest_records(image: MetadataImage) -> list[Record]:
    """The snapshot's last part: partitions of topics not created yet, quotas, users, ACLs, producer ids."""
    out: list[Record] = []
    for topic_id in sorted(image.pending_partitions):
        out.extend(partition_record(topic_id, p) for _, p in sorted(image.pending_partitions[topic_id].items()))
    for (user, client_id), values in sorted(image.client_quotas.items(), key=lambda item: repr(item[0])):
        out.extend(ClientQuotaRecord(user, client_id, key, value) for key, value in sorted(values.items()))
    out.extend(UserScramCredentialRecord(name, c.salt, c.stored_key, c.server_key, c.iterations, c.stored_key_sha512, c.server_key_sha512) for name, c in sorted(image.scram_users.items()))
    out.extend(AccessControlEntryRecord(*(getattr(acl, f.name) for f in fields(AclBinding))) for acl in sorted(image.acls, key=repr))
    if image.next_producer_id > 0:
        out.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    return out


def partition_record(topic_id: str, p: PartitionImage) -> PartitionRecord:
    return PartitionRecord(
        topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.adding_replicas, p.removing_replicas, p.unclean_leader_elections,
        p.eligible_leader_replicas, p.last_known_elr,
    )
