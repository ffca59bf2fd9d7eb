"""The classic group protocol's state machine (data_plane/groups/classic.py): a rebalance
completes when every member has rejoined or the rebalance timeout passes, the leader's
SyncGroup answers every waiting member, and stale generations and unknown members are refused."""

from __future__ import annotations

from data_plane.groups.classic import ClassicGroup, ErrorCode, JoinAnswer, State, SyncAnswer

PROTOCOLS = (("range", b"sub"),)


def _join(group: ClassicGroup, member_id: str, now: int = 0, protocols=PROTOCOLS, require_known_id: bool = False):
    return group.join(member_id, None, "client", "host", "consumer", protocols, 10_000, 30_000, require_known_id, now)


def _two_member_group() -> tuple[ClassicGroup, str, str]:
    group = ClassicGroup("g")
    a, answers = _join(group, "")
    assert [x.member_id for x in answers] == [a] and group.generation == 1
    group.sync(a, 1, {a: b"all"}, 0)
    b, answers = _join(group, "")  # a must rejoin before anyone is answered
    assert answers == [] and group.state is State.PREPARING_REBALANCE
    assert group.heartbeat(a, 1, 0) is ErrorCode.REBALANCE_IN_PROGRESS
    assert group.commit_refusal(a, 1) is ErrorCode.NONE  # what it processed before giving its partitions up
    _, answers = _join(group, a)
    assert {x.member_id for x in answers} == {a, b} and group.generation == 2
    leader = next(x for x in answers if x.members)
    assert leader.member_id == a and {m for m, _, _ in leader.members} == {a, b}
    return group, a, b


def test_join_requires_a_known_id_from_v4():
    group = ClassicGroup("g")
    member, [answer] = _join(group, "", require_known_id=True)
    assert answer == JoinAnswer(member, ErrorCode.MEMBER_ID_REQUIRED) and not group.members
    _, [answer] = _join(group, member, require_known_id=True)
    assert answer.error is ErrorCode.NONE and answer.generation == 1
    _, [answer] = _join(group, "made-up")
    assert answer.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_the_leaders_sync_answers_the_waiting_followers():
    group, a, b = _two_member_group()
    assert group.commit_refusal(b, 2) is ErrorCode.REBALANCE_IN_PROGRESS  # between join and sync
    assert group.sync(b, 2, {}, 0) == []  # the follower waits for the leader
    answers = group.sync(a, 2, {a: b"p0", b: b"p1"}, 0)
    assert set(answers) == {SyncAnswer(a, assignment=b"p0"), SyncAnswer(b, assignment=b"p1")}
    assert group.state is State.STABLE
    assert group.sync(b, 2, {}, 0) == [SyncAnswer(b, assignment=b"p1")]  # asked again: answered at once
    assert group.sync(b, 1, {}, 0) == [SyncAnswer(b, ErrorCode.ILLEGAL_GENERATION)]
    assert group.commit_refusal(b, 2) is ErrorCode.NONE
    assert group.commit_refusal(b, 1) is ErrorCode.ILLEGAL_GENERATION
    assert group.commit_refusal("", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # a memberless commit to a live group


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    group, a, b = _two_member_group()
    group.sync(a, 2, {a: b"p0", b: b"p1"}, 0)
    _, answers = _join(group, a, now=1_000)  # b never rejoins, though it heartbeats
    assert answers == []
    for now in (9_000, 18_000, 27_000):
        assert group.heartbeat(b, 2, now) is ErrorCode.REBALANCE_IN_PROGRESS
    assert group.expire(1_000 + 29_999) == []
    answers = group.expire(1_000 + 30_000)
    assert [x.member_id for x in answers] == [a] and set(group.members) == {a} and group.generation == 3


def test_a_silent_member_expires_and_a_leave_rebalances():
    group, a, b = _two_member_group()
    group.sync(a, 2, {a: b"p0", b: b"p1"}, 0)
    group.heartbeat(a, 2, 9_000)
    assert group.expire(10_001) == []  # b's session ended: the group waits for a to rejoin
    assert set(group.members) == {a} and group.state is State.PREPARING_REBALANCE
    errors, answers = group.leave([a, "stranger"], 10_002)
    assert errors == {a: ErrorCode.NONE, "stranger": ErrorCode.UNKNOWN_MEMBER_ID}
    assert group.state is State.EMPTY and not group.members
    assert group.commit_refusal("", -1) is ErrorCode.NONE


def test_members_without_a_shared_protocol_are_refused():
    group, a, _ = _two_member_group()
    _, [answer] = _join(group, "", protocols=(("roundrobin", b""),))
    assert answer.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_members_assignment_is_read_from_the_consumer_protocol_bytes():
    """Kafka's ConsumerProtocolAssignment (version prefix, then the body kio writes) read back
    as topic partitions; bytes of another protocol read as no partitions, never an error."""
    import io
    import struct

    from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment, TopicPartition
    from kio.serial import entity_writer

    from data_plane.groups.classic import assigned_partitions

    body = io.BytesIO()
    entity_writer(ConsumerProtocolAssignment)(body, ConsumerProtocolAssignment(
        assigned_partitions=(TopicPartition(topic="t", partitions=(0, 2)), TopicPartition(topic="u", partitions=(1,))), user_data=b"x"))
    assert assigned_partitions(struct.pack(">h", 3) + body.getvalue()) == {"t": [0, 2], "u": [1]}
    assert assigned_partitions(b"connect-protocol") == {}
    assert assigned_partitions(b"") == {}
