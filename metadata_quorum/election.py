"""Leader election and the partition changes that follow a broker's state.

Clean election picks, in replica order (preferred leader first), from ISR ∩ usable brokers
(registered, unfenced, not in controlled shutdown). Unclean election, only where the topic
allows it or an operator asks, picks any usable replica and resets the ISR to it: committed
data may be lost, so callers log it. When a broker is fenced or shuts down it leaves every ISR
(except where it is the last member, as in Kafka: the partition then has no leader until
that broker comes back) and loses its leaderships.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from metadata_quorum import topic_config
from metadata_quorum.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata_quorum.records import PartitionChangeRecord


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool


def elect_leader(partition: PartitionImage, usable: set[int], isr: tuple[int, ...], unclean_allowed: bool) -> Election:
    """The leader for ``partition`` given its (possibly new) ISR; leader -1 when none is eligible."""
    for replica in partition.replicas:
        if replica in isr and replica in usable:
            return Election(replica, isr, unclean=False)
    if unclean_allowed:
        for replica in partition.replicas:
            if replica in usable:
                return Election(replica, (replica,), unclean=True)
    return Election(NO_LEADER, isr, unclean=False)


def unclean_allowed(image: MetadataImage, topic: str) -> bool:
    return bool(topic_config.effective(image.configs.get(topic, {}))["unclean.leader.election.enable"])


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, PartitionImage]]:
    for name in sorted(image.topics):
        topic = image.topics[name]
        for number in sorted(topic.partitions):
            yield topic, topic.partitions[number]


def change_record(topic: TopicImage, p: PartitionImage, election: Election) -> PartitionChangeRecord | None:
    """The record moving ``p`` to ``election``, or None if nothing changes."""
    if election.leader == p.leader and election.isr == p.isr:
        return None
    return PartitionChangeRecord(
        topic.topic_id,
        p.partition,
        p.partition_epoch,
        leader=None if election.leader == p.leader else election.leader,
        isr=None if election.isr == p.isr else election.isr,
    )


def changes_removing_broker(image: MetadataImage, broker_id: int) -> list[tuple[PartitionChangeRecord, Election]]:
    """Partition changes for a broker that is being fenced or shut down (or replaced by a new
    incarnation): out of every ISR where others remain, leaderships moved to another usable
    in-sync replica."""
    usable = set(image.usable_broker_ids()) - {broker_id}
    out = []
    for topic, p in _partitions(image):
        if broker_id not in p.isr and p.leader != broker_id:
            continue
        isr = tuple(b for b in p.isr if b != broker_id) or p.isr
        leader_ok = p.leader != broker_id and (p.leader in usable)
        election = Election(p.leader, isr, False) if leader_ok else elect_leader(p, usable, isr, unclean_allowed(image, topic.name))
        record = change_record(topic, p, election)
        if record is not None:
            out.append((record, election))
    return out


def changes_electing_offline(image: MetadataImage, unclean_override: bool = False) -> list[tuple[PartitionChangeRecord, Election]]:
    """Elections for partitions with no leader, e.g. after a broker is unfenced."""
    usable = set(image.usable_broker_ids())
    out = []
    for topic, p in _partitions(image):
        if p.leader != NO_LEADER:
            continue
        election = elect_leader(p, usable, p.isr, unclean_override or unclean_allowed(image, topic.name))
        record = change_record(topic, p, election)
        if record is not None:
            out.append((record, election))
    return out
