"""Leader election and the partition changes that follow a broker's state.

Clean election picks, in replica order (preferred leader first), from ISR ∩ usable brokers
(registered, unfenced, not in controlled shutdown). When the ISR is empty it picks from the
eligible leader replicas (ELR, KIP-966, below). Unclean election, only where the topic
allows it (``unclean.leader.election.enable``) or an operator asks, picks any usable replica
(last-known ELR members first) and resets the ISR to it: committed data may be lost, so it
is logged at warning level and counted in the partition's metadata
(``unclean_leader_elections``, kept by every node and in snapshots). When a broker is fenced
or shuts down it leaves every ISR, even as the last member (the ISR may then be empty and
the partition leaderless), and loses its leaderships. Preferred election moves leadership
back to the first replica once it is a usable in-sync replica.

**Eligible leader replicas (KIP-966).** A leader's HW does not move while its ISR is below
``min.insync.replicas`` (``partition_state.LeaderPartitionState``), so a replica that leaves
the ISR while the ISR is (or becomes) smaller than that holds every record up to the HW,
every acknowledged acks=all write included. Such replicas make up the ELR:

- a change whose new ISR is below min ISR puts every replica that was in the ISR or the ELR,
  and is not in the new ISR, into the ELR; one whose new ISR reaches min ISR clears ELR and
  last-known ELR (``eligible_after``);
- a replica that rejoins the ISR leaves the ELR; a removed replica leaves both;
- a broker that registers after an unclean shutdown (or whose log for the partition went
  offline) leaves ISR and ELR for the last-known ELR: its unflushed tail may be gone;
- election order: the ISR; when the ISR is empty, the ELR (the new leader alone in the ISR,
  the rest stay eligible); when both are empty, a last-known ELR member (logged and counted
  as unclean: no replica is known to hold everything, and it is the replica most likely to,
  as Kafka 4's default does); then, where allowed, any usable replica.

ELR changes need no new leader epoch. Every function here is pure: image in,
``PartitionChange`` values out. A change knows its record and the log line it makes
(returned in the decision's ``happened``, logged by the shell), so every path that moves a
leader logs the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Iterator

from metadata_quorum import topic_config
from metadata_quorum.decision import Decision, Happened
from metadata_quorum.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata_quorum.records import BrokerIds, PartitionChangeRecord

_CHANGED_FIELDS = ("leader", "isr", "replicas", "adding_replicas", "removing_replicas", "eligible_leader_replicas", "last_known_elr")
# Partition changes one decision puts in one Raft entry (preferred elections, a controlled
# shutdown's moves), as Kafka's controller bounds its batches: an entry must replicate and
# apply well within the Raft election timeout on a busy machine.
PARTITION_CHANGES_PER_ENTRY_MAX = 1000


@dataclass(frozen=True)
class Election:
    leader: int
    isr: BrokerIds
    unclean: bool
    eligible_leader_replicas: BrokerIds = ()
    last_known_elr: BrokerIds = ()


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
        after = replace(
            p, leader=election.leader, isr=election.isr, eligible_leader_replicas=election.eligible_leader_replicas, last_known_elr=election.last_known_elr
        )
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

    def happened(self, reason: str) -> Happened:
        """The log line of this change, with the epochs it will commit; a warning for an
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
        if after.eligible_leader_replicas != before.eligible_leader_replicas or after.last_known_elr != before.last_known_elr:
            fields |= {"eligible_leader_replicas": list(after.eligible_leader_replicas), "last_known_elr": list(after.last_known_elr)}
        if leader_moved and after.leader in before.eligible_leader_replicas:
            fields["elected_from"] = "eligible leader replicas"
        if after.replicas != before.replicas or after.adding_replicas != before.adding_replicas or after.removing_replicas != before.removing_replicas:
            fields |= {"replicas": list(after.replicas), "adding_replicas": list(after.adding_replicas), "removing_replicas": list(after.removing_replicas)}
        if self.unclean:
            return Happened("warning", "unclean leader election: committed data may be lost", {
                "previous_isr": list(before.isr),
                "previous_eligible_leader_replicas": list(before.eligible_leader_replicas),
                "previous_last_known_elr": list(before.last_known_elr),
                "unclean_leader_elections": before.unclean_leader_elections + 1,
                **fields,
            })
        if after.leader == NO_LEADER and leader_moved:
            return Happened("warning", "partition has no leader: no usable in-sync replica", {"replicas": list(after.replicas), **fields})
        return Happened("info", "partition change", fields)


def elect_leader(partition: PartitionImage, usable: Collection[int], isr: BrokerIds, unclean_allowed: bool) -> Election:
    """The leader for ``partition`` given its (possibly new) ISR, and the ELR fields after it;
    ``partition``'s ELR fields must already be those of the new ISR (``eligible_after``).
    Leader -1 when no replica is eligible. See the module docstring for the order."""
    elr, last_known = partition.eligible_leader_replicas, partition.last_known_elr
    if _unsafe_outside_isr_elr:
        outside = [r for r in partition.replicas if r in usable and r not in isr and r not in elr]
        if outside:  # the negative control: a replica that may lack acknowledged writes, not counted as unclean
            return Election(outside[-1], (outside[-1],), False)
    for replica in partition.replicas:
        if replica in isr and replica in usable:
            return Election(replica, isr, False, elr, last_known)
    if not isr:
        for replica in partition.replicas:
            if replica in elr and replica in usable:
                return Election(replica, (replica,), False, tuple(r for r in elr if r != replica), last_known)
        if not elr:
            for replica in partition.replicas:
                if replica in last_known and replica in usable:
                    return Election(replica, (replica,), True)
    if unclean_allowed:
        for replica in sorted(partition.replicas, key=lambda r: r not in last_known):  # stable: last-known ELR first
            if replica in usable:
                return Election(replica, (replica,), True)
    return Election(NO_LEADER, isr, False, elr, last_known)


def eligible_after(before: PartitionImage, isr: BrokerIds, replicas: BrokerIds, min_isr: int, unclean_shutdown: Collection[int] = ()) -> tuple[BrokerIds, BrokerIds]:
    """(ELR, last-known ELR) once ``before``'s ISR becomes ``isr`` (Kafka's
    ``PartitionChangeBuilder.maybePopulateTargetElr``): empty when ``isr`` reaches
    ``min_isr``; else every replica of ``before``'s ISR or ELR outside ``isr`` is eligible,
    except those in ``unclean_shutdown``, which join the last-known ELR. In replica order."""
    if len(isr) >= min_isr:
        return (), ()
    candidates = set(before.isr) | set(before.eligible_leader_replicas)
    elr = tuple(r for r in replicas if r in candidates and r not in isr and r not in unclean_shutdown)
    known = candidates | set(before.last_known_elr)
    return elr, tuple(r for r in replicas if r in known and r not in isr and r not in elr)


def settle_leadership(
    before: PartitionImage, target: PartitionImage, usable: Collection[int], min_isr: int, unclean_allowed: bool, unclean_shutdown: Collection[int] = ()
) -> tuple[PartitionImage, bool]:
    """``target`` (``before`` with a new ISR or replica set) with its ELR fields, and a new
    leader when the current one is out of the ISR or not usable; and whether that election
    was unclean. Every ISR change goes through here."""
    elr, last_known = eligible_after(before, target.isr, target.replicas, min_isr, unclean_shutdown)
    target = replace(target, eligible_leader_replicas=elr, last_known_elr=last_known)
    if target.leader in target.isr and target.leader in usable:
        return target, False
    election = elect_leader(target, usable, target.isr, unclean_allowed)
    after = replace(
        target, leader=election.leader, isr=election.isr, eligible_leader_replicas=election.eligible_leader_replicas, last_known_elr=election.last_known_elr
    )
    return after, election.unclean


def preferred_election(p: PartitionImage, usable: Collection[int]) -> Election | None:
    """Leadership back to the first replica, or None while it is not a usable in-sync replica."""
    preferred = p.replicas[0]
    if preferred in usable and preferred in p.isr:
        return Election(preferred, p.isr, False, p.eligible_leader_replicas, p.last_known_elr)
    return None


# The controller's --unsafe-testing elect-outside-isr-elr negative control: set once at start
# (``enable_unsafe_election``), never by default. Elections then prefer a usable replica that
# is in neither ISR nor ELR, which may lack acknowledged writes: the chaos checker must catch it.
_unsafe_outside_isr_elr = False


def enable_unsafe_election() -> None:
    global _unsafe_outside_isr_elr
    _unsafe_outside_isr_elr = True


def min_insync_replicas(image: MetadataImage, topic: str) -> int:
    return int(topic_config.effective(image.configs.get(topic, {}))["min.insync.replicas"])


def unclean_allowed(image: MetadataImage, topic: str) -> bool:
    return bool(topic_config.effective(image.configs.get(topic, {}))["unclean.leader.election.enable"])


def partitions(image: MetadataImage, topics: Collection[str] | None = None) -> Iterator[tuple[TopicImage, PartitionImage]]:
    """Every partition (of ``topics`` when given), in topic and partition order."""
    for name in sorted(image.topics if topics is None else set(topics) & set(image.topics)):
        topic = image.topics[name]
        for number in sorted(topic.partitions):
            yield topic, topic.partitions[number]


def changes_removing_broker(
    image: MetadataImage, broker_id: int, unclean_shutdown: bool = False, only: Collection[tuple[str, int]] | None = None
) -> list[PartitionChange]:
    """Partition changes for a broker that is being fenced or shut down (or replaced by a new
    incarnation): out of every ISR (into the ELR where the ISR falls below min ISR),
    leaderships moved (see ``settle_leadership``). With ``unclean_shutdown`` (the broker
    restarted after a crash, or its log went offline) it also leaves every ELR, for the
    last-known ELR. ``only``: just these (topic, partition) pairs."""
    usable = set(image.usable_broker_ids()) - {broker_id}
    gone = (broker_id,) if unclean_shutdown else ()
    out = []
    for topic, p in partitions(image):
        if only is not None and (topic.name, p.partition) not in only:
            continue
        if broker_id not in p.isr and p.leader != broker_id and not (unclean_shutdown and broker_id in p.eligible_leader_replicas):
            continue
        target = replace(p, isr=tuple(b for b in p.isr if b != broker_id))
        after, unclean = settle_leadership(p, target, usable, min_insync_replicas(image, topic.name), unclean_allowed(image, topic.name), gone)
        if after != p:
            out.append(PartitionChange(topic, p, after, unclean))
    return out


def changes_electing_offline(image: MetadataImage, topics: Collection[str] | None = None) -> list[PartitionChange]:
    """Elections for partitions with no leader (of ``topics`` when given): after a broker is
    unfenced, or when a topic's config changed (unclean elections allowed). Partitions with
    an ELR are looked at too: one whose ISR has reached ``min.insync.replicas`` (it was
    lowered) has its ELR cleared, as KIP-966 asks, since the HW moves again from then on."""
    usable = set(image.usable_broker_ids())
    out = []
    for topic, p in partitions(image, topics):
        if p.leader != NO_LEADER and not p.eligible_leader_replicas and not p.last_known_elr:
            continue
        after, unclean = settle_leadership(p, p, usable, min_insync_replicas(image, topic.name), unclean_allowed(image, topic.name))
        if after != p:
            out.append(PartitionChange(topic, p, after, unclean))
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
        if p.leader == p.replicas[0]:
            # Already led by its preferred replica (nearly every partition): no election to
            # build. Building one per partition took the active controller's event loop 0.3
            # to 0.6 s every check at 100,000 partitions, and its Raft thread with it.
            continue
        election = preferred_election(p, usable)
        change = None if election is None else PartitionChange.electing(topic, p, election)
        if change is not None:
            changes.append(change)
    return Decision(tuple(change.record() for change in changes), len(changes),
                    happened=tuple(change.happened("automatic leader rebalance") for change in changes))
