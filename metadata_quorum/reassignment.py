"""Partition reassignment (KIP-455, as Kafka's KRaft controller runs it): the rules and the
admin decisions.

Reassigning a partition with replicas C to the target R writes one change: replicas = R
followed by C - R (so the target's first replica is the preferred leader), adding = R - C,
removing = C - R; leader and ISR stay. Brokers in ``adding`` see themselves in ``replicas``,
become followers and catch up; the leader's AlterPartition brings them into the ISR. Any
change after which the ISR holds every adding replica and at least one replica that stays
completes the reassignment in that same record: replicas = R, the removed replicas out of
the ISR, adding and removing cleared, a new leader from R when the current one was removed,
and a new leader epoch (the record names the leader). A reassignment that only removes or
reorders replicas therefore completes at once.

A new target while a reassignment runs replaces it, computed from the current replica list
as Kafka does, except that replicas still being added stay in ``adding`` when the new
target keeps them (Kafka would count them as present and could complete before they have
caught up). Cancelling reverts: the adding replicas leave replicas and ISR, the removing
ones stay; when no original replica is in sync that needs an unclean election, allowed only
where the topic allows unclean elections.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from metadata_quorum.broker_capacity import added_replicas, capacity_problem, replica_counts
from metadata_quorum.decision import Decision, Happened
from metadata_quorum.election import PartitionChange, min_insync_replicas, settle_leadership, unclean_allowed
from metadata_quorum.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from metadata_quorum.records import BrokerIds, Record
from metadata_quorum.topic_admin import Refusal, lookup_partition, partition_state, selected_partitions, states_after
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode


def start(p: PartitionImage, target: BrokerIds) -> PartitionImage:
    """``p`` with the replica sets of a reassignment to ``target`` (not yet completed)."""
    removing = tuple(r for r in p.replicas if r not in target)
    adding = tuple(r for r in target if r not in p.replicas or r in p.adding_replicas)
    return replace(p, replicas=tuple(target) + removing, adding_replicas=adding, removing_replicas=removing)


def revert(p: PartitionImage) -> PartitionImage:
    """``p`` with its reassignment cancelled: the adding replicas out of replicas and ISR."""
    adding = set(p.adding_replicas)
    return replace(
        p,
        replicas=tuple(r for r in p.replicas if r not in adding),
        isr=tuple(r for r in p.isr if r not in adding),
        adding_replicas=(),
        removing_replicas=(),
    )


def complete(p: PartitionImage) -> PartitionImage:
    """``p`` with its reassignment completed when its ISR allows it, else ``p`` itself."""
    if not p.reassignment_in_progress:
        return p
    isr = tuple(r for r in p.isr if r not in p.removing_replicas)
    if not isr or not set(p.adding_replicas) <= set(isr):
        return p
    return replace(p, replicas=p.target_replicas, isr=isr, adding_replicas=(), removing_replicas=())


def settle(image: MetadataImage, topic: TopicImage, before: PartitionImage, after: PartitionImage) -> PartitionChange | None:
    """The change from ``before`` to ``after`` once ``after``'s reassignment is completed if it
    can be and a leader is elected if the current one can no longer lead (out of the ISR,
    removed, fenced), with the ELR that follows (see election.py); None when nothing changes. Every ISR or replica-set change goes
    through here, so no path can leave a ready reassignment pending."""
    usable = set(image.usable_broker_ids())
    after, unclean = settle_leadership(before, complete(after), usable, min_insync_replicas(image, topic.name), unclean_allowed(image, topic.name))
    return None if after == before else PartitionChange(topic, before, after, unclean)


def _target_problem(image: MetadataImage, tp: str, target: BrokerIds) -> str | None:
    if not target:
        return f"the target replica list for {tp} is empty; give at least one broker id"
    if len(set(target)) != len(target):
        return f"the target replica list {list(target)} for {tp} names a broker twice; list each broker once"
    unknown = [b for b in target if b not in image.brokers]
    if unknown:
        return f"brokers {unknown} are not registered (registered: {sorted(image.brokers)}); start them first or choose registered brokers"
    return None


def _reassign(image: MetadataImage, held: Counter[int], topic: TopicImage, p: PartitionImage, target: BrokerIds) -> PartitionChange | Refusal | None:
    """Start moving ``p`` to ``target``; refused when a broker it adds to would go past its
    capacity (``held``: replicas per broker, with the moves earlier in the request)."""
    tp = f"{topic.name}-{p.partition}"
    problem = _target_problem(image, tp, target)
    if problem is not None:
        return Refusal(ErrorCode.INVALID_REQUEST, problem)
    moving = start(p, target)
    added = added_replicas([set(moving.replicas) - set(p.replicas)])
    problem = capacity_problem(image, held, added, f"moving {tp} to {list(target)}")
    if problem is not None:
        return Refusal(ErrorCode.BROKER_CAPACITY_EXCEEDED, problem)
    held.update(added)
    return settle(image, topic, p, moving)


def _cancel(image: MetadataImage, topic: TopicImage, p: PartitionImage) -> PartitionChange | Refusal | None:
    tp = f"{topic.name}-{p.partition}"
    if not p.reassignment_in_progress:
        return Refusal(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {tp} is in progress; nothing to cancel")
    reverted = revert(p)
    if not reverted.isr and not unclean_allowed(image, topic.name):
        return Refusal(
            ErrorCode.INVALID_REQUEST,
            f"cancelling the reassignment of {tp} needs an unclean leader election: every in-sync replica ({list(p.isr)}) is one being added; "
            f"let the reassignment finish, or allow it with unclean.leader.election.enable=true on topic {topic.name}",
        )
    change = settle(image, topic, p, reverted)
    if change is not None and change.after.leader == NO_LEADER and not change.after.isr:
        return Refusal(ErrorCode.LEADER_NOT_AVAILABLE, f"cancelling the reassignment of {tp} leaves no usable replica of {list(reverted.replicas)}; start one of them and retry")
    return change


def alter_partition_reassignments(image: MetadataImage, request: pb.AlterPartitionReassignmentsRequest) -> Decision[pb.AlterPartitionReassignmentsResponse]:
    """Start, replace or cancel (absent ``replicas``) reassignments; one entry for all of
    them, per-partition results showing the state after the entry commits."""
    records: list[Record] = []
    happened: list[Happened] = []
    results: list[pb.PartitionState] = []
    seen: set[tuple[str, int]] = set()
    held = replica_counts(image)
    for item in request.reassignments:
        name, number = item.topic, item.partition
        found = lookup_partition(image, name, number)
        if isinstance(found, pb.PartitionState):
            results.append(found)
            continue
        topic, p = found
        if (name, number) in seen:
            results.append(partition_state(topic, p, ErrorCode.INVALID_REQUEST, f"{name}-{number} appears twice in the request; list it once"))
            continue
        seen.add((name, number))
        cancel = not item.HasField("replicas")
        outcome = _cancel(image, topic, p) if cancel else _reassign(image, held, topic, p, tuple(item.replicas.ids))
        if isinstance(outcome, Refusal):
            results.append(partition_state(topic, p, outcome.code, outcome.message))
            continue
        if outcome is not None:
            happened.append(outcome.happened("reassignment cancelled" if cancel else ("reassignment started" if outcome.after.reassignment_in_progress else "reassignment completed")))
            records.append(outcome.record())
        results.append(partition_state(topic, p))
    return Decision(tuple(records), pb.AlterPartitionReassignmentsResponse(partitions=states_after(image, records, results)), happened=tuple(happened))


def list_partition_reassignments(image: MetadataImage, request: pb.ListPartitionReassignmentsRequest) -> pb.ListPartitionReassignmentsResponse:
    """Partitions (of the given ones, else all) with a reassignment in progress."""
    ongoing = []
    for name, number in selected_partitions(image, request.topics):
        p = image.partition(name, number)
        if p is not None and p.reassignment_in_progress:
            ongoing.append(partition_state(image.topics[name], p))
    return pb.ListPartitionReassignmentsResponse(partitions=ongoing, metadata_offset=image.offset)
