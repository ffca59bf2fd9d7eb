"""The classic group protocol on the Kafka door (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):
the shell around ``data_plane.groups.classic``. It holds each coordinated classic group, the
answers its members wait for (a JoinGroup waits until every member has rejoined, a follower's
SyncGroup until the leader's), and a timer that expires silent members.

A group is classic or KIP-848, as in Kafka: a JoinGroup for a group with KIP-848 members, or a
ConsumerGroupHeartbeat for a classic group with members, is INCONSISTENT_GROUP_PROTOCOL. The
coordinator of a classic group is the coordinator of any group of that id (the leader of its
``__consumer_offsets`` partition): every call asks the group coordinator first, and a broker
that no longer coordinates drops the group (its members rejoin at the new coordinator).
Membership lives in memory only; committed offsets go through the group coordinator's commit
(``__consumer_offsets``), after this shell has checked the member's generation.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable

import structlog
from kio.schema.errors import ErrorCode as KafkaError

from data_plane.groups.classic import Answer, ClassicGroup, JoinAnswer, SyncAnswer
from data_plane.groups.membership import Refused
from data_plane.groups.service import GroupCoordinatorService
from data_plane.kafka.entities import NO_THROTTLE, build, millis, response_type, sibling, version
from data_plane.kafka.error_codes import TO_KAFKA, to_kafka as kafka_code
from server_common.errors import ErrorCode

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
MEMBER_ID_REQUIRED_FROM = 4
NULLABLE_PROTOCOL = 7  # JoinGroup's protocol name is nullable from v7  # JoinGroup v4 on: an unknown member is handed an id and rejoins with it (KIP-394)
EXPIRY_INTERVAL_S = 0.1

log = structlog.get_logger("kafka")


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class NotHere(Exception):
    """This broker may not serve the group (not its coordinator, still loading, or KIP-848's)."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass
class ClassicGroups:
    service: GroupCoordinatorService
    clock_ms: Callable[[], int] = _now_ms
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    _waiting: dict[tuple[str, str, type], asyncio.Future] = field(default_factory=dict)  # (group, member, answer type)
    _timer: asyncio.Task | None = None

    # ------------------------------------------------------------------ the requests

    async def join_group(self, request, client_id: str, client_host: str):
        out = response_type(request)
        group_id = request.group_id
        try:
            group = self._group(group_id, create=True)
        except NotHere as refusal:
            return build(out, throttle_time=NO_THROTTLE, error_code=refusal.error, generation_id=-1, leader="",
                         protocol_type=None, protocol_name=None if version(request) >= NULLABLE_PROTOCOL else "",
                         member_id=request.member_id, members=(), skip_assignment=False)
        session_ms = millis(request.session_timeout)
        rebalance_ms = millis(getattr(request, "rebalance_timeout", request.session_timeout))
        protocols = tuple((p.name, bytes(p.metadata)) for p in request.protocols)
        member_id, answers = group.join(request.member_id, getattr(request, "group_instance_id", None), client_id, client_host,
                             request.protocol_type, protocols, session_ms, rebalance_ms,
                             version(request) >= MEMBER_ID_REQUIRED_FROM, self.clock_ms())
        answer = await self._await(group, answers, JoinAnswer, member_id)
        member_type = sibling(out, "JoinGroupResponseMember")
        return build(out, throttle_time=NO_THROTTLE, error_code=_kafka(answer.error), generation_id=answer.generation,
                     protocol_type=group.protocol_type, leader=answer.leader,
                     protocol_name=answer.protocol if answer.protocol is not None or version(request) >= NULLABLE_PROTOCOL else "",
                     skip_assignment=False, member_id=answer.member_id, members=tuple(
                         build(member_type, member_id=m, group_instance_id=instance, metadata=metadata)
                         for m, instance, metadata in answer.members))

    async def sync_group(self, request):
        out = response_type(request)
        try:
            group = self._group(request.group_id)
        except NotHere as refusal:
            return build(out, throttle_time=NO_THROTTLE, error_code=refusal.error, assignment=b"")
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
        answers = group.sync(request.member_id, request.generation_id, assignments, self.clock_ms())
        answer = await self._await(group, answers, SyncAnswer, request.member_id)
        return build(out, throttle_time=NO_THROTTLE, error_code=_kafka(answer.error), protocol_type=group.protocol_type,
                     protocol_name=group.protocol, assignment=answer.assignment)

    async def heartbeat(self, request):
        out = response_type(request)
        try:
            group = self._group(request.group_id)
        except NotHere as refusal:
            return build(out, throttle_time=NO_THROTTLE, error_code=refusal.error)
        return build(out, throttle_time=NO_THROTTLE,
                     error_code=_kafka(group.heartbeat(request.member_id, request.generation_id, self.clock_ms())))

    async def leave_group(self, request):
        out = response_type(request)
        leaving = [m.member_id for m in request.members] if hasattr(request, "members") else [request.member_id]
        try:
            group = self._group(request.group_id)
        except NotHere as refusal:
            return build(out, throttle_time=NO_THROTTLE, error_code=refusal.error, members=())
        errors, answers = group.leave(leaving, self.clock_ms())
        self._deliver(group.group_id, answers)
        self._log_generation(group, "left", leaving)
        member_type = sibling(out, "MemberResponse")
        single = errors[leaving[0]] if len(leaving) == 1 else ErrorCode.NONE
        return build(out, throttle_time=NO_THROTTLE, error_code=_kafka(single), members=tuple(
            build(member_type, member_id=m, group_instance_id=None, error_code=_kafka(e)) for m, e in errors.items()))

    def commit_refusal(self, group_id: str, member_id: str, generation: int) -> KafkaError | None:
        """None when the commit is the classic group's business and may go on (it then goes
        in as the coordinator's memberless commit); the error otherwise. A group id with no
        classic group here is not this module's: None with ``is_classic`` False."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        error = group.commit_refusal(member_id, generation)
        return None if error is ErrorCode.NONE else _kafka(error)

    def is_classic(self, group_id: str) -> bool:
        return group_id in self.groups

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # ------------------------------------------------------------------ waiting and delivering

    async def _await(self, group: ClassicGroup, answers: list[Answer], kind: type, member_id: str):
        """This call's answer: among ``answers`` if the call decided it, else once a later call does."""
        mine = [a for a in answers if isinstance(a, kind) and a.member_id == member_id]
        self._deliver(group.group_id, [a for a in answers if a not in mine])
        if mine:
            if kind is JoinAnswer and mine[0].error is ErrorCode.NONE:
                self._log_generation(group, "joined", [mine[0].member_id])
            return mine[0]
        key = (group.group_id, member_id, kind)
        previous = self._waiting.pop(key, None)
        if previous is not None and not previous.done():  # a member that asked again: its older call is moot
            previous.set_result(kind(key[1], ErrorCode.REBALANCE_IN_PROGRESS))
        future = self._waiting[key] = asyncio.get_running_loop().create_future()
        try:
            return await future
        finally:
            if self._waiting.get(key) is future:
                del self._waiting[key]

    def _deliver(self, group_id: str, answers: list[Answer]) -> None:
        for answer in answers:
            future = self._waiting.pop((group_id, answer.member_id, type(answer)), None)
            if future is not None and not future.done():
                future.set_result(answer)

    def _group(self, group_id: str, create: bool = False) -> ClassicGroup:
        """The classic group if this broker coordinates it; raises ``NotHere`` otherwise."""
        try:
            kip848 = self.service.coordinator.group(group_id)
        except Refused as refusal:
            self._drop(group_id)
            raise NotHere(kafka_code(refusal.code)) from refusal
        if kip848 is not None and kip848.members:
            raise NotHere(KafkaError.inconsistent_group_protocol)
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise NotHere(KafkaError.unknown_member_id)
            group = self.groups[group_id] = ClassicGroup(group_id)
            self._start_timer()
        return group

    def _drop(self, group_id: str) -> None:
        """Forget a group this broker no longer coordinates; its waiting members hear NOT_COORDINATOR."""
        if self.groups.pop(group_id, None) is None:
            return
        for (gid, member, kind), future in list(self._waiting.items()):
            if gid == group_id and not future.done():
                future.set_result(kind(member, ErrorCode.UNKNOWN_MEMBER_ID))

    def _start_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.ensure_future(self._expire_forever())

    async def _expire_forever(self) -> None:
        """Every 100 ms: drop members past their session or rebalance deadline, and groups
        this broker stopped coordinating."""
        while self.groups:
            await asyncio.sleep(EXPIRY_INTERVAL_S)
            now = self.clock_ms()
            for group_id, group in list(self.groups.items()):
                try:
                    self._group(group_id)
                except NotHere:
                    self._drop(group_id)
                    continue
                before = set(group.members)
                self._deliver(group_id, group.expire(now))
                if gone := sorted(before - set(group.members)):
                    self._log_generation(group, "expired", gone)
                if not group.members and not any(k[0] == group_id for k in self._waiting):
                    del self.groups[group_id]  # its offsets stay with the group coordinator

    def _log_generation(self, group: ClassicGroup, event: str, members: list[str]) -> None:
        log.info("classic group " + event, group=group.group_id, members=members, generation=group.generation,
                 state=group.state.value, leader=group.leader, protocol=group.protocol)


def _kafka(error: ErrorCode) -> KafkaError:
    return TO_KAFKA[error]
