"""The group coordinator with real broker processes, driven by raw gRPC members (the stubs
alone, as a client in another language would): members converge to a stable disjoint
assignment, a leave and a session timeout rebalance, offsets commit and fetch (a stale
member epoch is refused), and a SIGKILL of the coordinator's broker moves the group to the
new leader of its offsets partition with its committed offsets intact."""

from __future__ import annotations

import json

import grpc
import pytest

from kraftlog_proto import common_pb2, group_pb2, group_pb2_grpc
from server_common.waiting import wait_for
from tests.cluster import local_cluster

pytestmark = pytest.mark.timeout(180)

TOPIC = "orders"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 3000
BROKER_ARGS = ["--offsets-topic-partitions", "3", "--group-session-timeout-ms", str(SESSION_TIMEOUT_MS),
               "--group-heartbeat-interval-ms", "200"]
RETRIABLE = (common_pb2.COORDINATOR_NOT_AVAILABLE, common_pb2.NOT_COORDINATOR,
             common_pb2.COORDINATOR_LOAD_IN_PROGRESS)


def coordinator_stub(bootstrap: str, group: str, timeout_s: float = 30) -> tuple[int, group_pb2_grpc.GroupCoordinatorStub]:
    """FindCoordinator at any live broker until one is named; (its id, a stub to it)."""
    found: dict = {}

    def named() -> bool:
        for address in bootstrap.split(","):
            try:
                with grpc.insecure_channel(address) as channel:
                    answer = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(
                        group_pb2.FindCoordinatorRequest(keys=[group]), timeout=5).coordinators[0]
            except grpc.RpcError:
                continue
            if answer.error_code == 0:
                found.update(node=answer.node_id, address=f"{answer.host}:{answer.port}")
                return True
        return False

    wait_for(named, timeout_s, f"a coordinator for group {group}")
    stub = group_pb2_grpc.GroupCoordinatorStub(grpc.insecure_channel(found["address"]))
    wait_for(lambda: stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id=group), timeout=5).error_code == 0, timeout_s,
             f"broker {found['node']} serving group {group}")
    return found["node"], stub


class RawMember:
    """A member that revokes at once: each heartbeat reports what it owns."""

    def __init__(self, stub, group: str, member_id: str) -> None:
        self.stub, self.group, self.member_id = stub, group, member_id
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()

    def beat(self) -> group_pb2.ConsumerGroupHeartbeatResponse:
        request = group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, client_id=f"raw-{self.member_id}",
            owned_changed=True, owned_partitions=_wire(self.owned))
        if self.epoch == 0:
            request.subscription_changed = True
            request.subscribed_topic_names.append(TOPIC)
        answer = self.stub.ConsumerGroupHeartbeat(request, timeout=10)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.has_assignment:
                self.owned = {(t.topic, p) for t in answer.assignment for p in t.partitions}
        return answer

    def leave(self) -> None:
        self.epoch = -1
        assert self.beat().error_code == 0
        self.owned = set()


def _wire(partitions) -> list[group_pb2.TopicPartitions]:
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        topics.setdefault(topic, []).append(p)
    return [group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()]


def converge(stub, members: list[RawMember], group: str, timeout_s: float = 30) -> None:
    """Heartbeat every member until the coordinator says stable and the members' own views
    are disjoint and cover the topic."""
    def stable() -> bool:
        for member in members:
            answer = member.beat()
            assert answer.error_code in (0, *RETRIABLE), answer
        owned = [m.owned for m in members]
        assert sum(len(o) for o in owned) == len(set().union(*owned)), f"a partition owned twice: {owned}"
        described = stub.DescribeGroups(group_pb2.DescribeGroupsRequest(group_ids=[group]), timeout=10).groups[0]
        return described.state == "stable" and set().union(*owned) == {(TOPIC, p) for p in range(PARTITIONS)}

    wait_for(stable, timeout_s, f"group {group} stable over {PARTITIONS} partitions")


def commit(stub, group: str, member: RawMember, offsets: dict[int, int]) -> group_pb2.OffsetCommitResponse:
    parts = [group_pb2.OffsetCommitPartition(partition=p, committed_offset=o, committed_leader_epoch=1, metadata="m") for p, o in offsets.items()]
    return stub.OffsetCommit(group_pb2.OffsetCommitRequest(
        group_id=group, member_id=member.member_id, member_epoch=member.epoch,
        topics=[group_pb2.OffsetCommitTopic(topic=TOPIC, partitions=parts)]), timeout=10)


def fetched(stub, group: str) -> dict[int, tuple[int, int, str]]:
    answer = stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id=group), timeout=10)
    assert answer.error_code == 0, answer
    return {p.partition: (p.committed_offset, p.committed_leader_epoch, p.metadata) for t in answer.topics for p in t.partitions}


def overlaps(cluster, group: str) -> list[str]:
    """Replay the coordinators' assignment logs (event ``group assignment``, in order per
    broker) and name every moment a partition was owned (assigned or pending revocation) by
    two members of ``group``: the check a group chaos checker makes."""
    found = []
    for broker in cluster.brokers:
        owners: dict[str, set] = {}
        for line in cluster.log_path(broker).read_text().splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") != "group assignment" or event["group"] != group:
                continue
            owned = {(t, p) for t, ps in {**event["assigned"]}.items() for p in ps}
            owned |= {(t, p) for t, ps in event["pending_revocation"].items() for p in ps}
            owners[event["member"]] = owned
            for other, theirs in owners.items():
                if other != event["member"] and owned & theirs:
                    found.append(f"{event['member']} and {other} both own {sorted(owned & theirs)} (broker {broker.node_id})")
    return found


@pytest.fixture
def cluster(tmp_path):
    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=BROKER_ARGS) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=1)
        yield cluster


def test_members_converge_commit_and_fetch(cluster):
    _, stub = coordinator_stub(cluster.bootstrap, "g1")
    members = [RawMember(stub, "g1", f"m{i}") for i in range(3)]
    converge(stub, members, "g1")
    assert sorted(len(m.owned) for m in members) == [2, 2, 2]
    assert overlaps(cluster, "g1") == []

    answer = commit(stub, "g1", members[0], {0: 10, 1: 20})
    assert answer.error_code == 0 and all(p.error_code == 0 for t in answer.topics for p in t.partitions), answer
    assert fetched(stub, "g1") == {0: (10, 1, "m"), 1: (20, 1, "m")}

    stale = RawMember(stub, "g1", members[0].member_id)
    stale.epoch = members[0].epoch - 1
    refused = commit(stub, "g1", stale, {0: 99})
    assert refused.error_code == common_pb2.STALE_MEMBER_EPOCH, refused
    unknown = commit(stub, "g1", RawMember(stub, "g1", "nobody"), {0: 99})
    assert unknown.error_code == common_pb2.UNKNOWN_MEMBER_ID, unknown
    assert fetched(stub, "g1")[0] == (10, 1, "m")


def test_leave_and_session_timeout_rebalance(cluster):
    _, stub = coordinator_stub(cluster.bootstrap, "g2")
    members = [RawMember(stub, "g2", f"m{i}") for i in range(3)]
    converge(stub, members, "g2")
    members[0].leave()
    converge(stub, members[1:], "g2")
    assert sorted(len(m.owned) for m in members[1:]) == [3, 3]
    # members[1] goes silent: after the session timeout members[2] owns everything
    converge(stub, members[2:], "g2", timeout_s=SESSION_TIMEOUT_MS / 1000 + 20)
    described = stub.DescribeGroups(group_pb2.DescribeGroupsRequest(group_ids=["g2"]), timeout=10).groups[0]
    assert [m.member_id for m in described.members] == [members[2].member_id]


def test_coordinator_sigkill_moves_group_with_offsets(cluster):
    node, stub = coordinator_stub(cluster.bootstrap, "g3")
    member = RawMember(stub, "g3", "m0")
    converge(stub, [member], "g3")
    offsets = {p: 100 + p for p in range(PARTITIONS)}
    assert commit(stub, "g3", member, offsets).error_code == 0
    cluster.kill(cluster.broker(node))
    survivors = ",".join(b.address for b in cluster.brokers if b.node_id != node)

    def moved() -> bool:
        new_node, new_stub = coordinator_stub(survivors, "g3")
        if new_node == node:
            return False
        answer = new_stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id="g3"), timeout=10)
        if answer.error_code in RETRIABLE:
            return False
        got = {p.partition: p.committed_offset for t in answer.topics for p in t.partitions}
        assert got == offsets, got
        return True

    wait_for(moved, 60, "the group at a new coordinator with its offsets")


def test_admin_list_describe_delete(cluster):
    _, stub = coordinator_stub(cluster.bootstrap, "g4")
    members = [RawMember(stub, "g4", f"m{i}") for i in range(2)]
    converge(stub, members, "g4")
    assert commit(stub, "g4", members[0], {0: 5}).error_code == 0

    described = stub.DescribeGroups(group_pb2.DescribeGroupsRequest(group_ids=["g4", "nope"]), timeout=10).groups
    g4, nope = described
    assert (g4.state, g4.group_epoch, g4.assignment_epoch, g4.assignor) == ("stable", g4.assignment_epoch, g4.group_epoch, "uniform")
    assert [(m.member_id, m.client_id, m.client_host) for m in g4.members] == [("m0", "raw-m0", "127.0.0.1"), ("m1", "raw-m1", "127.0.0.1")]
    assert all(list(m.assignment) == list(m.target_assignment) for m in g4.members)
    assert nope.error_code in (common_pb2.GROUP_ID_NOT_FOUND, common_pb2.NOT_COORDINATOR)
    listed = {g.group_id: g for a in cluster.brokers for g in _list(a.address)}
    assert (listed["g4"].state, listed["g4"].member_count) == ("stable", 2)

    refused = stub.DeleteGroups(group_pb2.DeleteGroupsRequest(group_ids=["g4"]), timeout=10).results[0]
    assert refused.error_code == common_pb2.NON_EMPTY_GROUP, refused
    subscribed = stub.OffsetDelete(group_pb2.OffsetDeleteRequest(group_id="g4", topics=[group_pb2.TopicPartitions(topic=TOPIC, partitions=[0])]), timeout=10)
    assert subscribed.topics[0].partitions[0].error_code == common_pb2.GROUP_SUBSCRIBED_TO_TOPIC, subscribed
    for member in members:
        member.leave()
    deleted = stub.OffsetDelete(group_pb2.OffsetDeleteRequest(group_id="g4", topics=[group_pb2.TopicPartitions(topic=TOPIC, partitions=[0])]), timeout=10)
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0, deleted
    assert fetched(stub, "g4") == {}
    assert stub.DeleteGroups(group_pb2.DeleteGroupsRequest(group_ids=["g4"]), timeout=10).results[0].error_code == 0
    gone = stub.DescribeGroups(group_pb2.DescribeGroupsRequest(group_ids=["g4"]), timeout=10).groups[0]
    assert (gone.error_code, gone.state) == (common_pb2.GROUP_ID_NOT_FOUND, "dead")


def _list(address: str) -> list[group_pb2.ListedGroup]:
    with grpc.insecure_channel(address) as channel:
        return list(group_pb2_grpc.GroupCoordinatorStub(channel).ListGroups(group_pb2.ListGroupsRequest(), timeout=10).groups)


class SlowRevoker(RawMember):
    """A member that reports what it owned before the last answer: it never revokes."""

    def beat(self) -> group_pb2.ConsumerGroupHeartbeatResponse:
        held = set(self.owned)
        answer = super().beat()
        self.owned |= held
        return answer


def test_unsafe_assign_before_revoke_is_seen_in_the_assignment_log(tmp_path):
    """The negative control: with --unsafe-testing assign-before-revoke the assignment log
    shows a partition owned by two members; the same steps on a safe broker show none."""
    for unsafe in (False, True):
        args = BROKER_ARGS + (["--unsafe-testing", "assign-before-revoke"] if unsafe else [])
        with local_cluster(tmp_path / str(unsafe), controllers=1, brokers=1, broker_args=args) as one:
            one.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=1)
            _, stub = coordinator_stub(one.bootstrap, "g5")
            holder, newcomer = SlowRevoker(stub, "g5", "holder"), RawMember(stub, "g5", "newcomer")
            for member in (holder, newcomer, holder, newcomer, holder, newcomer):
                assert member.beat().error_code == 0
            assert bool(overlaps(one, "g5")) == unsafe, overlaps(one, "g5")
            assert bool(newcomer.owned) == unsafe  # safe: nothing until the holder revokes
