"""The classic group protocol's decisions (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and
whether an OffsetCommit's generation is current): Kafka's state machine before KIP-848, which
kafka-python, aiokafka and librdkafka's default consumer speak. Pure: no I/O, no clock
(``now_ms`` is passed in); the shell holds the callers' waiting answers and delivers what each
call returns.

Unlike KIP-848, the *client* assigns: every member joins, the coordinator picks one (the
leader) and hands it every member's subscription; the leader's SyncGroup carries each
member's assignment, which the coordinator passes on as opaque bytes. A rebalance is:

    Stable/Empty --join, leave, expiry--> PreparingRebalance
        --every member rejoined, or the rebalance timeout--> CompletingRebalance (generation + 1)
        --the leader's SyncGroup--> Stable

A member that has not rejoined when the rebalance timeout (the largest of the members')
passes is dropped, so one dead member delays a rebalance by at most that timeout; a member
whose heartbeats stop for its session timeout is dropped and the others rebalance.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.serial import entity_reader

from server_common.errors import ErrorCode




class State(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, subscription metadata), in the member's preference
    session_deadline_ms: int
    instance_id: str | None = None
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False


@dataclass(frozen=True)
class JoinAnswer:
    member_id: str
    error: ErrorCode = ErrorCode.NONE
    generation: int = -1
    protocol: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # the leader's only: (member id, instance id, metadata)


@dataclass(frozen=True)
class SyncAnswer:
    member_id: str
    error: ErrorCode = ErrorCode.NONE
    assignment: bytes = b""


Answer = JoinAnswer | SyncAnswer


@dataclass
class ClassicGroup:
    group_id: str
    protocol_type: str = ""
    state: State = State.EMPTY
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_ids: set[str] = field(default_factory=set)  # ids handed out (MEMBER_ID_REQUIRED), not joined yet
    rebalance_deadline_ms: int = 0

    # ------------------------------------------------------------------ the calls

    def join(self, member_id: str, instance_id: str | None, client_id: str, client_host: str, protocol_type: str,
             protocols: tuple[tuple[str, bytes], ...], session_timeout_ms: int, rebalance_timeout_ms: int,
             require_known_id: bool, now_ms: int) -> tuple[str, list[Answer]]:
        """A JoinGroup: the joining member's id (handed out when it came without one) and the
        answers to deliver now: an immediate refusal or id, or, when this join completes the
        rebalance, every waiting member's answer (this one's among them). No answer of its
        own: the caller waits for a later call's answers."""
        if not protocols:
            return member_id, [JoinAnswer(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)]
        if self.members and (protocol_type != self.protocol_type or not self._shared_protocols({p for p, _ in protocols})):
            return member_id, [JoinAnswer(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)]
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_id:  # KIP-394: the client rejoins with this id, so a lost answer leaves no ghost member
                self.pending_ids.add(member_id)
                return member_id, [JoinAnswer(member_id, ErrorCode.MEMBER_ID_REQUIRED)]
        elif member_id not in self.members and member_id not in self.pending_ids:
            return member_id, [JoinAnswer(member_id, ErrorCode.UNKNOWN_MEMBER_ID)]
        self.pending_ids.discard(member_id)
        known = self.members.get(member_id)
        if known is not None and self.state is State.STABLE and known.protocols == protocols and member_id != self.leader:
            # a follower rejoining with nothing changed (it missed the answer): the current generation again
            return member_id, [self._join_answer(member_id)]
        self.protocol_type = protocol_type
        self.members[member_id] = Member(member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                                         protocols, now_ms + session_timeout_ms, instance_id, awaiting_join=True)
        answers = self._prepare_rebalance(now_ms) if self.state is not State.PREPARING_REBALANCE else []
        return member_id, answers + self._maybe_complete_join(now_ms)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes], now_ms: int) -> list[Answer]:
        refusal = self._check(member_id, generation)
        if refusal is not ErrorCode.NONE:
            return [SyncAnswer(member_id, refusal)]
        member = self.members[member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is State.PREPARING_REBALANCE:
            return [SyncAnswer(member_id, ErrorCode.REBALANCE_IN_PROGRESS)]
        if self.state is State.STABLE:
            return [SyncAnswer(member_id, assignment=member.assignment)]
        member.awaiting_sync = True
        if member_id != self.leader:
            return []
        answers: list[Answer] = []
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            if m.awaiting_sync:
                m.awaiting_sync = False
                answers.append(SyncAnswer(m.member_id, assignment=m.assignment))
        self.state = State.STABLE
        return answers

    def heartbeat(self, member_id: str, generation: int, now_ms: int) -> ErrorCode:
        refusal = self._check(member_id, generation)
        if refusal is not ErrorCode.NONE:
            return refusal
        member = self.members[member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.REBALANCE_IN_PROGRESS if self.state is State.PREPARING_REBALANCE else ErrorCode.NONE

    def leave(self, member_ids: list[str], now_ms: int) -> tuple[dict[str, ErrorCode], list[Answer]]:
        """Each leaving member's error, and the answers the departures release."""
        errors = {m: ErrorCode.NONE if m in self.members else ErrorCode.UNKNOWN_MEMBER_ID for m in member_ids}
        gone = [m for m in member_ids if m in self.members]
        return errors, self._remove(gone, now_ms) if gone else []

    def commit_refusal(self, member_id: str, generation: int) -> ErrorCode:
        """Whether an OffsetCommit may count: a member of the current generation (or, with no
        member id and generation -1, an admin commit to a group without members). As in Kafka,
        a member may commit while the group prepares a rebalance (what it processed before
        giving its partitions up), not between the join and the leader's sync."""
        if not member_id and generation < 0:
            return ErrorCode.NONE if not self.members else ErrorCode.UNKNOWN_MEMBER_ID
        refusal = self._check(member_id, generation)
        if refusal is ErrorCode.NONE and self.state is State.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return refusal

    def expire(self, now_ms: int) -> list[Answer]:
        """Drop members whose session ended (those waiting on a join or sync are alive) and,
        past the rebalance deadline, those that did not rejoin."""
        dead = [m.member_id for m in self.members.values()
                if m.session_deadline_ms < now_ms and not m.awaiting_join and not m.awaiting_sync]
        if self.state is State.PREPARING_REBALANCE and now_ms >= self.rebalance_deadline_ms:
            dead += [m.member_id for m in self.members.values() if not m.awaiting_join and m.member_id not in dead]
        return self._remove(dead, now_ms) if dead else []

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        if self.state is State.PREPARING_REBALANCE:
            deadlines.append(self.rebalance_deadline_ms)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ the machine

    def _check(self, member_id: str, generation: int) -> ErrorCode:
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _shared_protocols(self, offered: set[str]) -> set[str]:
        shared = set(offered)
        for m in self.members.values():
            shared &= {p for p, _ in m.protocols}
        return shared

    def _remove(self, gone: list[str], now_ms: int) -> list[Answer]:
        answers: list[Answer] = [SyncAnswer(m, ErrorCode.REBALANCE_IN_PROGRESS) for m in gone if self.members[m].awaiting_sync]
        answers += [JoinAnswer(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in gone if self.members[m].awaiting_join]
        for m in gone:
            del self.members[m]
        if self.leader in gone:
            self.leader = None
        if self.state is not State.PREPARING_REBALANCE:
            answers += self._prepare_rebalance(now_ms)
        return answers + self._maybe_complete_join(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> list[Answer]:
        """Every member must rejoin; a member waiting on SyncGroup hears REBALANCE_IN_PROGRESS."""
        self.state = State.PREPARING_REBALANCE
        self.rebalance_deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        waiting = [m for m in self.members.values() if m.awaiting_sync]
        for m in waiting:
            m.awaiting_sync = False
        return [SyncAnswer(m.member_id, ErrorCode.REBALANCE_IN_PROGRESS) for m in waiting]

    def _maybe_complete_join(self, now_ms: int) -> list[Answer]:
        if any(not m.awaiting_join for m in self.members.values()):
            return []
        answers: list[Answer] = []
        self.generation += 1
        if not self.members:
            self.state, self.protocol, self.leader = State.EMPTY, None, None
            return answers
        self.state = State.COMPLETING_REBALANCE
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.protocol = self._choose_protocol()
        for m in self.members.values():
            m.awaiting_join, m.awaiting_sync, m.assignment = False, False, b""
            m.session_deadline_ms = now_ms + m.session_timeout_ms
            answers.append(self._join_answer(m.member_id))
        return answers

    def _choose_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred protocol every member
        supports; the most votes wins (ties: the leader's preference order)."""
        shared = self._shared_protocols({p for p, _ in self.members[self.leader].protocols})
        votes = {p: 0 for p, _ in self.members[self.leader].protocols if p in shared}
        for m in self.members.values():
            votes[next(p for p, _ in m.protocols if p in shared)] += 1
        return max(votes, key=lambda p: votes[p])

    def _join_answer(self, member_id: str) -> JoinAnswer:
        members = ()
        if member_id == self.leader:
            members = tuple((m.member_id, m.instance_id, dict(m.protocols)[self.protocol]) for m in self.members.values())
        return JoinAnswer(member_id, generation=self.generation, protocol=self.protocol, leader=self.leader or "",
                          members=members)


CLASSIC, CONSUMER = "classic", "consumer"  # the two group protocols, as ListGroups and DescribeGroups name them
_VERSION_PREFIX = 2  # the int16 version before the body; every version's assignment body is v0's


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """The topic partitions in a member's assignment, read with kio's ConsumerProtocolAssignment
    (generated from Kafka's schema) from the consumer protocol's bytes; empty for bytes of
    another protocol (Kafka Connect's, say), which the coordinator passes on without reading."""
    try:
        body, _ = entity_reader(ConsumerProtocolAssignment)(memoryview(assignment), _VERSION_PREFIX)
    except Exception:  # kio raises several types for bytes that are not this schema's
        return {}
    return {t.topic: list(t.partitions) for t in body.assigned_partitions}
