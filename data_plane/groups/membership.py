"""The consumer-group heartbeat (KIP-848) as a pure decision: a group, a request, the topics
that exist and the time in; the records to write and the answer out.

Epochs. The *group epoch* goes up on every change of membership, subscriptions, assignor or
subscribed topics' partition counts; with each bump the target assignment is recomputed at
once (so *target epoch* = group epoch between requests). A member's *member epoch* is the
target epoch it has reconciled to.

Reconciliation (Kafka's CurrentAssignmentBuilder, simplified). A member's partitions are
``assigned`` (it may fetch them) plus ``pending_revocation`` (it was told to stop and has
not reported so yet). Both count as its own. When its target changes:
  1. if it owns partitions outside its target, it keeps only assigned ∩ target and the rest
     go to pending_revocation; its epoch stays;
  2. once its heartbeat reports ``owned_partitions`` without them, pending_revocation is
     cleared, the member moves to the target epoch and receives every target partition that
     no other member owns; the others arrive on later heartbeats, as their owners release them.
So no partition is ever owned by two members. A member that leaves, is fenced or times out
is removed with its partitions, which are then free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from data_plane.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from data_plane.groups.changes import GroupChange
from data_plane.groups.state import NO_PARTITIONS, CurrentAssignment, Group, GroupEpoch, MemberSubscription, Partitions
from data_plane.coordination import Refused
from server_common.errors import ErrorCode

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
INTERNAL_TOPIC_PREFIX = "__"  # internal topics are never matched by a subscription regex

# Whether a member may have a topic in its subscription: the coordinator's shell asks the
# authorizer whether the member's principal may DESCRIBE it; with authorization off, every topic.
Visibility = Callable[[MemberSubscription, str], bool]


def every_topic(sub: MemberSubscription, topic: str) -> bool:
    return True


@dataclass(frozen=True)
class GroupSettings:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    rebalance_timeout_ms: int = 300000  # when the member sends 0
    max_size: int = 1000
    assign_before_revoke: bool = False  # UNSAFE negative control: see unsafe-assign-before-revoke
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # Kafka's offsets.retention.minutes (offsets_expiry)
    offsets_retention_check_interval_ms: int = 600_000  # Kafka's offsets.retention.check.interval.ms


@dataclass(frozen=True)
class Heartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str = ""
    rack_id: str = ""
    rebalance_timeout_ms: int = 0
    subscription_changed: bool = False
    topic_names: tuple[str, ...] = ()
    topic_regex: str = ""
    server_assignor: str = ""
    owned: Partitions | None = None  # None: not reported in this request
    client_id: str = ""
    client_host: str = ""
    principal: str = ""  # who sent it (User:<name>): its topics are resolved as this principal sees them


@dataclass
class HeartbeatAnswer:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    assignment: Partitions | None = None  # None: unchanged since the last answer


@dataclass
class Outcome:
    change: GroupChange
    answer: HeartbeatAnswer


def heartbeat(group: Group | None, request: Heartbeat, topics: Mapping[str, int], settings: GroupSettings, now_ms: int,
              visible: Visibility = every_topic) -> Outcome:
    """Decide one heartbeat. A refusal leaves the group untouched (no records)."""
    change = GroupChange.of(group, request.group_id)
    try:
        answer = _heartbeat(change, request, topics, settings, now_ms, visible)
    except Refused as refusal:
        return Outcome(GroupChange.of(group, request.group_id), HeartbeatAnswer(refusal.code, refusal.message, request.member_id, request.member_epoch))
    return Outcome(change, answer)


def _heartbeat(change: GroupChange, request: Heartbeat, topics: Mapping[str, int], settings: GroupSettings, now_ms: int,
               visible: Visibility) -> HeartbeatAnswer:
    g = change.group
    if not request.group_id:
        raise Refused(ErrorCode.INVALID_GROUP_ID, "group_id is empty: name the group")
    if not request.member_id:
        raise Refused(ErrorCode.INVALID_REQUEST, "member_id is empty: generate a UUID once per consumer and send it in every heartbeat")
    if request.rebalance_timeout_ms < 0:
        raise Refused(ErrorCode.INVALID_REQUEST, f"rebalance_timeout_ms {request.rebalance_timeout_ms} is negative: send 0 for the default")
    if request.server_assignor and request.server_assignor not in ASSIGNORS:
        raise Refused(ErrorCode.UNSUPPORTED_ASSIGNOR, f"assignor '{request.server_assignor}' is unknown: use one of {', '.join(sorted(ASSIGNORS))}")
    epoch = request.member_epoch
    if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(change, request, topics, settings, now_ms, visible)
    changed = False
    if epoch == 0:
        _join(change, request, topics, settings, visible)
        before = None
    else:
        current = _existing(g, request)
        _check_epoch(request, current)
        before = current.assigned
        subscription = g.members[request.member_id]
        if request.subscription_changed:
            subscription = _subscription(request, subscription, settings)
        elif request.principal and request.principal != subscription.principal:  # resolve as whoever heartbeats now
            subscription = replace(subscription, principal=request.principal)
        if subscription != g.members[request.member_id]:
            change.set_member(request.member_id, subscription)
            changed = True
        changed |= bool(request.server_assignor) and request.server_assignor != g.metadata.assignor
    if changed or _resolved_topics(g, topics, visible) != g.metadata.subscribed_topics or g.target_epoch < g.epoch:
        _bump(change, topics, visible, request.server_assignor)
    g.session_deadlines_ms[request.member_id] = now_ms + settings.session_timeout_ms
    reconcile(change, request.member_id, request.owned, settings, now_ms)
    current = g.current[request.member_id]
    resend = before is None or current.assigned != before or (request.owned is not None and request.owned != current.assigned)
    return HeartbeatAnswer(member_id=request.member_id, member_epoch=current.member_epoch, assignment=current.assigned if resend else None)


def _existing(g: Group, request: Heartbeat) -> CurrentAssignment:
    current = g.current.get(request.member_id)
    if current is None or request.member_id not in g.members:
        raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"member {request.member_id} is not in group {g.group_id} (it left, timed out or was fenced): "
                      "drop its partitions and rejoin with member epoch 0")
    return current


def _check_epoch(request: Heartbeat, current: CurrentAssignment) -> None:
    """Kafka's rule: a newer epoch than the member's is fenced; an older one is accepted only
    if it is the epoch just before and the member reports owning nothing beyond its current
    assignment (it missed the answer that moved it on)."""
    epoch = request.member_epoch
    if epoch == current.member_epoch:
        return
    lost_answer = (epoch == current.previous_member_epoch and request.owned is not None and request.owned <= current.assigned
                   and current.member_epoch >= 0)
    if not lost_answer:
        raise Refused(ErrorCode.FENCED_MEMBER_EPOCH, f"member epoch {epoch} is stale (the member is at {current.member_epoch}): "
                      "drop its partitions and rejoin with member epoch 0")


def _join(change: GroupChange, request: Heartbeat, topics: Mapping[str, int], settings: GroupSettings, visible: Visibility) -> None:
    g = change.group
    if not request.topic_names and not request.topic_regex:
        raise Refused(ErrorCode.INVALID_REQUEST, "a joining member must subscribe: send subscribed_topic_names or subscribed_topic_regex")
    subscription = _subscription(request, None, settings)
    if request.instance_id:
        holder = g.member_of_instance(request.instance_id)
        if holder is not None and holder != request.member_id:
            held = g.current[holder]
            if held.member_epoch != STATIC_LEAVE_EPOCH:
                raise Refused(ErrorCode.UNRELEASED_INSTANCE_ID, f"instance id {request.instance_id} is held by live member {holder}: "
                              "stop the other consumer with that instance id, or wait for its session timeout")
            _replace_static(change, holder, request.member_id, subscription, held, topics, visible, request.server_assignor)
            return
    if request.member_id in g.members:  # the same member starting over: it lost its state
        change.remove_member(request.member_id)
    if len(g.members) >= settings.max_size:
        raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, f"group {g.group_id} already has {len(g.members)} members, its maximum: "
                      "stop a member or raise the brokers' --group-max-size")
    change.set_member(request.member_id, subscription)
    change.set_current(request.member_id, CurrentAssignment(0, -1))
    _bump(change, topics, visible, request.server_assignor or g.metadata.assignor)


def _replace_static(change: GroupChange, old: str, new: str, subscription: MemberSubscription, held: CurrentAssignment,
                    topics: Mapping[str, int], visible: Visibility, assignor: str) -> None:
    """A static member back under a new member id takes over its predecessor's assignment and
    epoch: no rebalance unless its subscription changed."""
    g = change.group
    target = g.targets.get(old, NO_PARTITIONS)
    same = g.members[old] == subscription
    change.remove_member(old)
    change.set_member(new, subscription)
    change.set_target(new, target)
    change.set_current(new, CurrentAssignment(held.previous_member_epoch, held.previous_member_epoch, held.assigned, held.pending_revocation))
    if not same or (assignor and assignor != g.metadata.assignor):
        _bump(change, topics, visible, assignor or g.metadata.assignor)


def _subscription(request: Heartbeat, previous: MemberSubscription | None, settings: GroupSettings) -> MemberSubscription:
    if request.topic_regex:
        try:
            re.compile(request.topic_regex)
        except re.error as exc:
            raise Refused(ErrorCode.INVALID_REQUEST, f"subscribed_topic_regex '{request.topic_regex}' is not a valid regex ({exc}): fix it") from None
    base = previous or MemberSubscription()
    return MemberSubscription(
        instance_id=request.instance_id or base.instance_id,
        client_id=request.client_id or base.client_id,
        client_host=request.client_host or base.client_host,
        rack_id=request.rack_id or base.rack_id,
        topic_names=tuple(sorted(set(request.topic_names))),
        topic_regex=request.topic_regex,
        rebalance_timeout_ms=request.rebalance_timeout_ms or base.rebalance_timeout_ms or settings.rebalance_timeout_ms,
        principal=request.principal or base.principal,
    )


def _leave(change: GroupChange, request: Heartbeat, topics: Mapping[str, int], settings: GroupSettings, now_ms: int,
           visible: Visibility) -> HeartbeatAnswer:
    g = change.group
    current = _existing(g, request)
    static = request.member_epoch == STATIC_LEAVE_EPOCH and g.members[request.member_id].instance_id
    if static:
        if current.member_epoch != STATIC_LEAVE_EPOCH:
            change.set_current(request.member_id, CurrentAssignment(
                STATIC_LEAVE_EPOCH, current.member_epoch, current.assigned, current.pending_revocation))
        g.session_deadlines_ms[request.member_id] = now_ms + settings.session_timeout_ms
        g.revocation_deadlines_ms.pop(request.member_id, None)
    else:
        remove_members(change, [request.member_id], topics, now_ms, visible)
    return HeartbeatAnswer(member_id=request.member_id, member_epoch=request.member_epoch)


def remove_members(change: GroupChange, member_ids: list[str], topics: Mapping[str, int], now_ms: int,
                   visible: Visibility = every_topic) -> None:
    """Remove members (left, timed out, fenced) and recompute the target once. The group's
    epoch record notes when the last member left: the offsets retention counts from then."""
    for member_id in member_ids:
        change.remove_member(member_id)
    g = change.group
    _bump(change, topics, visible, empty_since_ms=0 if g.members else (g.metadata.empty_since_ms or now_ms))


def _resolved_topics(g: Group, topics: Mapping[str, int], visible: Visibility) -> tuple[tuple[str, int], ...]:
    subscribed: set[str] = set()
    for sub in g.members.values():
        subscribed.update(_member_topics(sub, topics, visible))
    return tuple((t, topics[t]) for t in sorted(subscribed))


def _member_topics(sub: MemberSubscription, topics, visible: Visibility) -> frozenset[str]:
    """The existing topics a member subscribes to, by name or pattern, that it may see: a topic
    it may not DESCRIBE is never assigned to it (nor does its existence show in the group)."""
    names = {t for t in sub.topic_names if t in topics}
    if sub.topic_regex:
        pattern = re.compile(sub.topic_regex)
        names.update(t for t in topics if not t.startswith(INTERNAL_TOPIC_PREFIX) and pattern.fullmatch(t))
    return frozenset(t for t in names if visible(sub, t))


def _bump(change: GroupChange, topics: Mapping[str, int], visible: Visibility, assignor: str = "", empty_since_ms: int = 0) -> None:
    """A new group epoch and, at once, the target assignment for it (``empty_since_ms``: when
    the group became empty, if it has no members now)."""
    g = change.group
    resolved = _resolved_topics(g, topics, visible)
    counts = dict(resolved)
    change.set_epoch(GroupEpoch(g.epoch + 1, assignor or g.metadata.assignor or DEFAULT_ASSIGNOR, resolved, empty_since_ms))
    subscriptions = {m: _member_topics(sub, counts, visible) for m, sub in g.members.items()}
    target = ASSIGNORS[g.metadata.assignor](subscriptions, counts, g.targets)
    for member_id in sorted(target):
        if g.targets.get(member_id) != target[member_id]:
            change.set_target(member_id, target[member_id])
    change.set_target_epoch(g.epoch)


def reconcile(change: GroupChange, member_id: str, owned: Partitions | None, settings: GroupSettings, now_ms: int) -> None:
    """Move one member one step toward its target (see the module docstring)."""
    g = change.group
    current = g.current[member_id]
    if current.member_epoch == STATIC_LEAVE_EPOCH:
        return
    pending = current.pending_revocation
    if pending and owned is not None and not owned & pending:
        pending = NO_PARTITIONS  # revoked, as the member reports
    target = g.targets.get(member_id, NO_PARTITIONS)
    if pending:
        new = current
    else:
        revoke = current.assigned - target
        if revoke:
            new = CurrentAssignment(current.member_epoch, current.previous_member_epoch, current.assigned & target, revoke)
        else:
            taken = _owned_by_others(g, member_id, settings)
            gained = (target - current.assigned) - taken
            epoch = g.target_epoch
            previous = current.member_epoch if epoch != current.member_epoch else current.previous_member_epoch
            new = CurrentAssignment(epoch, previous, (current.assigned & target) | gained, NO_PARTITIONS)
    if new.pending_revocation and not current.pending_revocation:
        timeout = g.members[member_id].rebalance_timeout_ms or settings.rebalance_timeout_ms
        g.revocation_deadlines_ms[member_id] = now_ms + timeout
    elif not new.pending_revocation:
        g.revocation_deadlines_ms.pop(member_id, None)
    if new != current:
        change.set_current(member_id, new)


def _owned_by_others(g: Group, member_id: str, settings: GroupSettings) -> Partitions:
    """The partitions another member owns. The unsafe negative control ignores pending
    revocations: a partition goes to its new owner before the old one let it go."""
    taken = set()
    for other, current in g.current.items():
        if other != member_id:
            taken |= current.assigned if settings.assign_before_revoke else current.owned
    return frozenset(taken)


def expire(group: Group, topics: Mapping[str, int], now_ms: int, visible: Visibility = every_topic) -> GroupChange | None:
    """Remove the members whose session (no heartbeat) or revocation (partitions not released
    within the rebalance timeout) deadline passed; None when nobody is due."""
    due = sorted(m for m in group.members if group.session_deadlines_ms.get(m, now_ms) < now_ms
                 or group.revocation_deadlines_ms.get(m, now_ms) < now_ms)
    if not due:
        return None
    change = GroupChange.of(group, group.group_id)
    remove_members(change, due, topics, now_ms, visible)
    return change


def start_sessions(group: Group, settings: GroupSettings, now_ms: int) -> None:
    """A coordinator that just loaded the group gives every member a full session."""
    for member_id in group.members:
        group.session_deadlines_ms[member_id] = now_ms + settings.session_timeout_ms
        if member_id in group.current and group.current[member_id].pending_revocation:
            timeout = group.members[member_id].rebalance_timeout_ms or settings.rebalance_timeout_ms
            group.revocation_deadlines_ms[member_id] = now_ms + timeout
