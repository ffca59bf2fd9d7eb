"""The classic group calls on the Kafka door, at every version ApiVersions advertises: a
one-member group joins (from v4 after MEMBER_ID_REQUIRED), syncs, heartbeats and leaves, and
each answer encodes as that version's frame. A group with KIP-848 members refuses a join."""

from __future__ import annotations

import asyncio
import datetime
import importlib

import pytest
from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.apis import SERVED
from data_plane.kafka.classic_groups import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP, ClassicGroups
from data_plane.kafka.codec import encode_response
from data_plane.kafka.entities import build


class FakeCoordinator:
    def __init__(self, group=None) -> None:
        self.kip848 = group

    def group(self, group_id):
        return self.kip848


class FakeService:
    def __init__(self, group=None) -> None:
        self.coordinator = FakeCoordinator(group)


def _schema(api: str, v: int):
    return importlib.import_module(f"kio.schema.{api}.v{v}.request")


def _join(schema, member_id: str):
    return build(schema.JoinGroupRequest, group_id="g", session_timeout=datetime.timedelta(seconds=10),
                 rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id, group_instance_id=None,
                 protocol_type="consumer", reason=None,
                 protocols=(build(schema.JoinGroupRequestProtocol, name="range", metadata=b"sub"),))


@pytest.mark.parametrize("join_version", range(SERVED[JOIN_GROUP][0], SERVED[JOIN_GROUP][1] + 1))
def test_every_served_version_of_the_classic_calls_answers(join_version):
    async def run() -> None:
        groups = ClassicGroups(FakeService())
        schema = _schema("join_group", join_version)
        answer = await groups.join_group(_join(schema, ""), "client", "127.0.0.1")
        encode_response(1, answer)
        member = answer.member_id
        if join_version >= 4:
            assert answer.error_code == KafkaError.member_id_required
            answer = await groups.join_group(_join(schema, member), "client", "127.0.0.1")
            encode_response(2, answer)
        assert (answer.error_code, answer.leader, answer.generation_id) == (KafkaError.none, member, 1)
        assert [(m.member_id, m.metadata) for m in answer.members] == [(member, b"sub")]

        sync_version = min(join_version, SERVED[SYNC_GROUP][1])
        sync = _schema("sync_group", sync_version)
        synced = await groups.sync_group(build(
            sync.SyncGroupRequest, group_id="g", generation_id=1, member_id=member, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=(build(sync.SyncGroupRequestAssignment, member_id=member, assignment=b"all"),)))
        encode_response(3, synced)
        assert (synced.error_code, synced.assignment) == (KafkaError.none, b"all")

        beat = _schema("heartbeat", min(join_version, SERVED[HEARTBEAT][1]))
        answered = await groups.heartbeat(build(beat.HeartbeatRequest, group_id="g", generation_id=1, member_id=member,
                                                group_instance_id=None))
        encode_response(4, answered)
        assert answered.error_code == KafkaError.none

        leave = _schema("leave_group", min(join_version, SERVED[LEAVE_GROUP][1]))
        left = await groups.leave_group(build(leave.LeaveGroupRequest, group_id="g", member_id=member, members=(
            build(getattr(leave, "MemberIdentity", None), member_id=member, group_instance_id=None, reason=None),)))
        encode_response(5, left)
        assert left.error_code == KafkaError.none and not groups.has_members("g")
    asyncio.run(run())


def test_a_group_with_kip848_members_refuses_a_classic_join():
    class Kip848Group:
        members = {"m": object()}

    async def run():
        answer = await ClassicGroups(FakeService(Kip848Group())).join_group(_join(_schema("join_group", 9), ""), "c", "h")
        assert answer.error_code == KafkaError.inconsistent_group_protocol
    asyncio.run(run())
