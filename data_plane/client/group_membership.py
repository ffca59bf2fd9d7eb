"""A consumer group member's side of the KIP-848 protocol, as a pure state machine.

The coordinator computes assignments; a member only says what it subscribes to and what
it owns, and reconciles what it owns with the target the coordinator names. This core holds
that state and decides, from each heartbeat answer, what the member must do. It performs
no I/O and reads no clock: the shell (``group_session.py``) builds requests from
``heartbeat_request``, feeds answers to ``on_heartbeat_answer``, and the consumer's poll
thread carries out ``Reconciliation``s and reports them back with ``reconciled``.

Rules it keeps (KIP-848, Kafka's ``ConsumerMembershipManager``):
- Owned partitions change only when the application has finished with them: revoked
  partitions are reported gone (``owned_partitions``) only after the consumer stopped
  fetching them, committed and ran the revocation callback. The coordinator hands a
  partition to a new owner only after its old owner reported it gone, so no partition is
  owned by two members at once.
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the member lost everything it owned (it may have
  been reassigned already). The consumer drops it without committing (``lost``), and the
  member rejoins with epoch 0 only once that is done.
- Coordinator errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) ask the shell to find the
  coordinator again; COORDINATOR_LOAD_IN_PROGRESS to retry later; other errors are fatal and
  surface from the next poll.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from data_plane.client.metadata_cache import TopicPartition
from kraftlog_proto import group_pb2
from server_common.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
HEARTBEAT_INTERVAL_MS_DEFAULT = 1000  # until the coordinator names its own
SESSION_TIMEOUT_MS_DEFAULT = 45000  # the brokers' --group-session-timeout-ms default

FENCING_CODES = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
REDISCOVER_CODES = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
RETRY_CODES = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class MemberState(enum.Enum):
    """Where the member stands. UNSUBSCRIBED: not in the group (before subscribe, after
    leaving). JOINING: heartbeats with epoch 0. STABLE: owns its target. RECONCILING: a target
    differs from what it owns and the poll thread has not finished moving to it. FENCED: it
    lost its partitions and waits for the poll thread to drop them before rejoining.
    LEAVING: the leave heartbeat is due. FATAL: an error no retry fixes."""

    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    STABLE = "stable"
    RECONCILING = "reconciling"
    FENCED = "fenced"
    LEAVING = "leaving"
    FATAL = "fatal"


class Action(enum.Enum):
    """What the shell does after a heartbeat answer."""

    CONTINUE = "continue"  # heartbeat again after the interval (or at once if due)
    FIND_COORDINATOR = "find_coordinator"
    RETRY_LATER = "retry_later"
    FATAL = "fatal"


@dataclass(frozen=True)
class Subscription:
    """Topic names or one regex (a Python ``re`` full match), never both."""

    topics: tuple[str, ...] = ()
    pattern: str = ""

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("subscribe to a list of topic names or to one pattern (not both, not neither)")


@dataclass(frozen=True)
class Reconciliation:
    """A change for the poll thread to carry out: stop and release ``revoke`` (committing
    first unless ``lost``), then start ``assign``. ``fence_count`` ties it to one membership:
    a reconciliation from before a fencing is void."""

    revoke: frozenset[TopicPartition]
    assign: frozenset[TopicPartition]
    lost: bool
    fence_count: int


def to_topic_partitions(tps: Iterable[TopicPartition]) -> list[group_pb2.TopicPartitions]:
    """Partitions grouped per topic, sorted, as the proto carries them."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    return [group_pb2.TopicPartitions(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]


def offset_commit_request(
    group_id: str, member_id: str, member_epoch: int, offsets: dict[TopicPartition, tuple[int, int]],
) -> group_pb2.OffsetCommitRequest:
    """One OffsetCommit of ``offsets`` ({(topic, partition): (next offset, leader epoch)}),
    grouped per topic. An admin commit has no member id and member epoch -1."""
    request = group_pb2.OffsetCommitRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch)
    by_topic: dict[str, group_pb2.OffsetCommitTopic] = {}
    for (topic, partition), (offset, leader_epoch) in sorted(offsets.items()):
        if topic not in by_topic:
            by_topic[topic] = request.topics.add(topic=topic)
        by_topic[topic].partitions.add(partition=partition, committed_offset=offset, committed_leader_epoch=leader_epoch)
    return request


def from_topic_partitions(entries: Iterable[group_pb2.TopicPartitions]) -> frozenset[TopicPartition]:
    return frozenset((e.topic, p) for e in entries for p in e.partitions)


class GroupMembership:
    """One member's membership state; not thread-safe (the shell holds a lock around it)."""

    def __init__(
        self, group_id: str, member_id: str, *, instance_id: str = "", client_id: str = "",
        rebalance_timeout_ms: int = 0, assignor: str = "", session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT,
    ) -> None:
        if not group_id:
            raise ValueError("group_id is empty: name the group the consumer joins")
        self.group_id = group_id
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self._last_success_ms: float | None = None
        self.assignor = assignor
        self.state = MemberState.UNSUBSCRIBED
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS_DEFAULT
        self.subscription: Subscription | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.target: frozenset[TopicPartition] | None = None  # the latest assignment not yet reconciled
        self.fatal_error: tuple[int, str] | None = None
        self._fence_count = 0
        self._subscription_dirty = False
        self._owned_dirty = False
        self._lost_pending = False
        self._in_progress: Reconciliation | None = None

    # ------------------------------------------------------------ application thread

    def subscribe(self, subscription: Subscription) -> None:
        """Joins (or changes what it subscribes to): the next heartbeat carries it."""
        self.subscription = subscription
        self._subscription_dirty = True
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEAVING):
            self.state = MemberState.JOINING
            self.member_epoch = JOIN_EPOCH
            self._owned_dirty = True

    def leave(self) -> None:
        """The next heartbeat leaves the group (epoch -1, or -2 for a static member)."""
        if self.state not in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            self.state = MemberState.LEAVING

    def reconciliation_due(self) -> bool:
        """Whether ``next_reconciliation`` has something to hand out."""
        return self._in_progress is None and (
            self._lost_pending or (self.target is not None and self.state == MemberState.RECONCILING)
        )

    def next_reconciliation(self) -> Reconciliation | None:
        """What the poll thread must do now, if anything; at most one at a time."""
        if self._in_progress is not None:
            return None
        if self._lost_pending:
            rec = Reconciliation(self.owned, frozenset(), True, self._fence_count)
        elif self.target is not None and self.state == MemberState.RECONCILING:
            rec = Reconciliation(self.owned - self.target, self.target - self.owned, False, self._fence_count)
        else:
            return None
        self._in_progress = rec
        return rec

    def reconciled(self, rec: Reconciliation) -> None:
        """The poll thread finished ``rec``: it owns the result, which the next heartbeat
        reports (the coordinator frees revoked partitions on seeing it)."""
        assert rec is self._in_progress, "reconciled() with a reconciliation that was not handed out"
        self._in_progress = None
        if rec.fence_count != self._fence_count:
            return  # fenced meanwhile: a newer lost reconciliation takes over
        self.owned = (self.owned - rec.revoke) | rec.assign
        self._owned_dirty = True
        if rec.lost:
            self._lost_pending = False
            self.target = None
            if self.state == MemberState.FENCED:
                self.state = MemberState.JOINING
                self._subscription_dirty = True
        elif self.target is not None and self.owned == self.target:
            self.target = None
            self.state = MemberState.STABLE

    def abandon(self, rec: Reconciliation) -> None:
        """The poll thread could not carry out ``rec`` (say, the committed offsets did not
        arrive) and changed nothing: it is handed out again by the next poll."""
        assert rec is self._in_progress, "abandon() with a reconciliation that was not handed out"
        self._in_progress = None

    def release_all(self) -> Reconciliation | None:
        """At close: the revocation of everything owned (committed first), whatever the target."""
        if self._in_progress is not None or not self.owned:
            return None
        self._in_progress = Reconciliation(self.owned, frozenset(), False, self._fence_count)
        self.target = frozenset()
        return self._in_progress

    # ------------------------------------------------------------ heartbeat thread

    def heartbeat_due_now(self) -> bool:
        """A heartbeat should go at once rather than at the interval: joining, leaving, or
        something the coordinator waits to hear changed."""
        if self.state in (MemberState.JOINING, MemberState.LEAVING):
            return True
        return self.state not in (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL) and (
            self._subscription_dirty or self._owned_dirty
        )

    def wants_heartbeat(self) -> bool:
        """Whether the member heartbeats at all (not while fenced, before joining, after leaving)."""
        return self.state not in (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL)

    def heartbeat_request(self) -> group_pb2.ConsumerGroupHeartbeatRequest:
        """The next heartbeat. Dirty flags stay set until an answer arrives, so a lost
        request's news goes again in the next one."""
        assert self.wants_heartbeat(), self.state
        request = group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, instance_id=self.instance_id, client_id=self.client_id,
        )
        if self.state == MemberState.LEAVING:
            request.member_epoch = STATIC_LEAVE_EPOCH if self.instance_id else LEAVE_EPOCH
            return request
        request.member_epoch = self.member_epoch
        joining = self.member_epoch == JOIN_EPOCH
        if joining:
            request.rebalance_timeout_ms = self.rebalance_timeout_ms
            request.server_assignor = self.assignor
        if self._subscription_dirty or joining:
            request.subscription_changed = True
            request.subscribed_topic_names.extend(self.subscription.topics)
            request.subscribed_topic_regex = self.subscription.pattern
        if self._owned_dirty or joining:
            request.owned_changed = True
            request.owned_partitions.extend(to_topic_partitions(self.owned))
        return request

    def on_heartbeat_answer(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, answer: group_pb2.ConsumerGroupHeartbeatResponse
    ) -> Action:
        """Takes the coordinator's answer to ``request``; says what the shell does next."""
        code = answer.error_code
        if code in REDISCOVER_CODES:
            return Action.FIND_COORDINATOR
        if code in RETRY_CODES:
            return Action.RETRY_LATER
        if request.member_epoch < 0:  # left: whatever the answer, the member is out
            self.state = MemberState.UNSUBSCRIBED
            self.member_epoch = JOIN_EPOCH
            return Action.CONTINUE
        if self.state == MemberState.LEAVING:
            return Action.CONTINUE  # an answer to a heartbeat sent before leave(): the leave goes next
        if code in FENCING_CODES:
            self.fence()
            return Action.CONTINUE
        if code != ErrorCode.NONE:
            self.fail(code, answer.error_message)
            return Action.FATAL
        if self.state == MemberState.FENCED:
            return Action.CONTINUE  # an answer to a heartbeat sent before the fencing
        if request.subscription_changed:
            self._subscription_dirty = False
        if request.owned_changed and self._owned_matches(request):
            self._owned_dirty = False
        if answer.member_id:
            self.member_id = answer.member_id
        self.member_epoch = answer.member_epoch
        if answer.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = answer.heartbeat_interval_ms
        if answer.has_assignment:
            self.target = from_topic_partitions(answer.assignment)  # acknowledged by reconciled(), even if unchanged
        if self.target is not None:
            self.state = MemberState.RECONCILING
        elif self.state == MemberState.JOINING:
            self.state = MemberState.STABLE if self.member_epoch > 0 else MemberState.JOINING
        return Action.CONTINUE

    def heartbeat_succeeded(self, now_ms: float) -> None:
        """A heartbeat was answered without error at ``now_ms`` (the shell's clock)."""
        self._last_success_ms = now_ms

    def session_lost(self, now_ms: float) -> bool:
        """After a failed heartbeat: when none has succeeded for the session timeout, the
        coordinator has removed this member and may have given its partitions to others, so
        it drops them (fenced: lost, then a rejoin). True when that happened now."""
        holding = self.owned or self.target or self._in_progress is not None
        if self._last_success_ms is None or not holding or self.state in (MemberState.FENCED, MemberState.LEAVING, MemberState.FATAL):
            return False
        if now_ms - self._last_success_ms < self.session_timeout_ms:
            return False
        self.fence()
        return True

    def fail(self, code: int, message: str) -> None:
        """An error no retry fixes: heartbeats stop and the next poll raises it."""
        self.state = MemberState.FATAL
        self.fatal_error = (code, message)

    @property
    def fence_count(self) -> int:
        """How often the member has been fenced: a commit made before a fence speaks for
        partitions the member lost, which others may since have read on and committed."""
        return self._fence_count

    def fence(self) -> None:
        """The coordinator no longer knows this member (or its epoch): drop what it owns,
        then rejoin with epoch 0. Also the shell's answer to a session it knows has expired."""
        self._fence_count += 1
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.state = MemberState.FENCED
        self._lost_pending = True
        if not self.owned and self._in_progress is None:
            self._lost_pending = False
            self.state = MemberState.JOINING
            self._subscription_dirty = self._owned_dirty = True

    def _owned_matches(self, request: group_pb2.ConsumerGroupHeartbeatRequest) -> bool:
        return from_topic_partitions(request.owned_partitions) == self.owned
