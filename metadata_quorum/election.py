"""Leader election and the partition changes that follow a broker's state.

Clean election picks, in replica order (preferred leader first), from ISR ∩ usable brokers
(registered, unfenced, not in controlled shutdown). Unclean election, only where the topic
allows it (``unclean.leader.election.enable``) or an operator asks, picks any usable replica
and resets the ISR to it: committed data may be lost, so it is logged at warning level and
counted in the partition's metadata (``unclean_leader_elections``, kept by every node and in
snapshots). When a broker is fenced or shuts down it leaves every ISR (except where it is
the last member, as in Kafka: the partition then has no leader until that broker comes back,
or until an unclean election is allowed) and loses its leaderships. Preferred election moves
leadership back to the first replica once it is a usable in-sync replica.

Every function here is pure: image in, ``PartitionChange`` values out. A change knows its
record and how to log itself, so every path that moves a leader logs the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Iterator

import structlog

from metadata_quorum import topic_config
from metadata_quorum.decision import Decision
from metadata_quorum.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata_quorum.records import BrokerIds, PartitionChangeRecord

log = structlog.get_logger("controller")

_CHANGED_FIELDS = ("leader", "isr", "replicas", "adding_replicas", "removing_replicas")
# Partition changes one decision puts in one Raft entry (preferred elections, a controlled
# shutdown's moves), as Kafka's controller bounds its batches: an entry must replicate and
# apply well within the Raft election timeout on a busy machine.
PARTITION_CHANGES_PER_ENTRY_MAX = 1000


@dataclass(frozen=True)
class Election:
    leader: int
    isr: BrokerIds
    unclean: bool


@dataclass(frozen=True)
class PartitionChange:
    """One partition moving from ``before`` to ``after`` (leader, ISR, replica sets); one
    PartitionChangeRecord based on ``before``'s partition epoch."""

    topic: TopicImage
    before: PartitionImage
    after: PartitionImage
    unclean: bool = False

    @staticmethod
    def electing(topic: TopicImage, p: PartitionImage, election: Election) -> "PartitionChange | None":
        """The change putting ``election`` into effect, or None if it changes nothing."""
        after = replace(p, leader=election.leader, isr=election.isr)
        return None if after == p else PartitionChange(topic, p, after, election.unclean)

    def record(self) -> PartitionChangeRecord:
        changed = {name: getattr(self.after, name) for name in _CHANGED_FIELDS if getattr(self.after, name) != getattr(self.before, name)}
        assert changed, f"no-op change of {self.topic.name}-{self.before.partition}"
        if self.replicas_removed and self.after.leader != NO_LEADER:
            # naming the leader starts a new leader epoch even when it stays (as Kafka does):
            # requests from replicas that were just removed then carry a fenced epoch
            changed["leader"] = self.after.leader
        return PartitionChangeRecord(self.topic.topic_id, self.before.partition, self.before.partition_epoch, unclean_leader_election=self.unclean, **changed)

    @property
    def replicas_removed(self) -> bool:
        return not set(self.before.replicas) <= set(self.after.replicas)

    def log(self, reason: str) -> None:
        """One line per change, with the epochs the change will commit; warnings for an
        unclean election and for a partition left without a leader."""
        before, after = self.before, self.after
        leader_moved = after.leader != before.leader
        fields = {
            "topic": self.topic.name,
            "partition": before.partition,
            "leader": after.leader,
            "previous_leader": before.leader,
            "isr": list(after.isr),
            "leader_epoch": before.leader_epoch + (0 if self.record().leader is None else 1),
            "partition_epoch": before.partition_epoch + 1,
            "reason": reason,
        }
        if after.replicas != before.replicas or after.adding_replicas != before.adding_replicas or after.removing_replicas != before.removing_replicas:
            fields |= {"replicas": list(after.replicas), "adding_replicas": list(after.adding_replicas), "removing_replicas": list(after.removing_replicas)}
        if self.unclean:
            log.warning(
                "unclean leader election: committed data may be lost",
                previous_isr=list(before.isr),
                unclean_leader_elections=before.unclean_leader_elections + 1,
                **fields,
            )
        elif after.leader == NO_LEADER and leader_moved:
            log.warning("partition has no leader: no usable in-sync replica", replicas=list(after.replicas), **fields)
        else:
            log.info("partition change", **fields)


def elect_leader(partition: PartitionImage, usable: Collection[int], isr: BrokerIds, unclean_allowed: bool) -> Election:
    """The leader for ``partition`` given its (possibly new) ISR; leader -1 when none is eligible."""
    for replica in partition.replicas:
        if replica in isr and replica in usable:
            return Election(replica, isr, unclean=False)
    if unclean_allowed:
        for replica in partition.replicas:
            if replica in usable:
                return Election(replica, (replica,), unclean=True)
    return Election(NO_LEADER, isr, unclean=False)


def preferred_election(p: PartitionImage, usable: Collection[int]) -> Election | None:
    """Leadership back to the first replica, or None while it is not a usable in-sync replica."""
    preferred = p.replicas[0]
    if preferred in usable and preferred in p.isr:
        return Election(preferred, p.isr, unclean=False)
    return None


def unclean_allowed(image: MetadataImage, topic: str) -> bool:
    return bool(topic_config.effective(image.configs.get(topic, {}))["unclean.leader.election.enable"])


def partitions(image: MetadataImage, topics: Collection[str] | None = None) -> Iterator[tuple[TopicImage, PartitionImage]]:
    """Every partition (of ``topics`` when given), in topic and partition order."""
    for name in sorted(image.topics if topics is None else set(topics) & set(image.topics)):
        topic = image.topics[name]
        for number in sorted(topic.partitions):
            yield topic, topic.partitions[number]


def changes_removing_broker(image: MetadataImage, broker_id: int) -> list[PartitionChange]:
    """Partition changes for a broker that is being fenced or shut down (or replaced by a new
    incarnation): out of every ISR where others remain, leaderships moved to another usable
    in-sync replica (or, where the topic allows it and none is left, any usable replica)."""
    usable = set(image.usable_broker_ids()) - {broker_id}
    out = []
    for topic, p in partitions(image):
        if broker_id not in p.isr and p.leader != broker_id:
            continue
        isr = tuple(b for b in p.isr if b != broker_id) or p.isr
        leader_ok = p.leader != broker_id and p.leader in usable
        election = Election(p.leader, isr, False) if leader_ok else elect_leader(p, usable, isr, unclean_allowed(image, topic.name))
        change = PartitionChange.electing(topic, p, election)
        if change is not None:
            out.append(change)
    return out


def changes_electing_offline(image: MetadataImage, topics: Collection[str] | None = None) -> list[PartitionChange]:
    """Elections for partitions with no leader (of ``topics`` when given): after a broker is
    unfenced, or when a topic starts to allow unclean elections."""
    usable = set(image.usable_broker_ids())
    out = []
    for topic, p in partitions(image, topics):
        if p.leader != NO_LEADER:
            continue
        change = PartitionChange.electing(topic, p, elect_leader(p, usable, p.isr, unclean_allowed(image, topic.name)))
        if change is not None:
            out.append(change)
    return out


def rebalance_leaders(image: MetadataImage, changes_max: int = PARTITION_CHANGES_PER_ENTRY_MAX) -> Decision[int]:
    """Automatic leader rebalancing (``auto.leader.rebalance.enable``): one entry moving up to
    ``changes_max`` partitions back to their first replica where it is a usable in-sync
    replica but does not lead. The response is how many partitions it moves."""
    usable = set(image.usable_broker_ids())
    changes: list[PartitionChange] = []
    for topic, p in partitions(image):
        if len(changes) >= changes_max:
            break
        election = preferred_election(p, usable)
        change = None if election is None else PartitionChange.electing(topic, p, election)
        if change is not None:
            change.log("automatic leader rebalance")
            changes.append(change)
    return Decision(tuple(change.record() for change in changes), len(changes))
