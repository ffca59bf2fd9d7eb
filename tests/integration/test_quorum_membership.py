"""Changing the controller quorum's voters with real processes (docs/operations.md, Replacing a
controller): a dead controller whose disk is gone is replaced by a new one with a new id, with
no committed metadata lost and no broker fenced; an observer serves no reads before it has
caught up and votes only once it has; a removed controller stops serving; cluster.json keeps
the new voter set across a restart of the whole cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest

from cli.cluster_cmd import add_controller_to, remove_controller_from
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc
from metadata_quorum.controller_client import ControllerClient, ControllerError, is_catching_up
from server_common.local_cluster import LocalCluster, Node
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration


def _read_at(node: Node) -> pb.DescribeClusterResponse | grpc.RpcError:
    """DescribeCluster answered by ``node`` itself (no retry elsewhere), or the refusal."""
    with grpc.insecure_channel(node.address) as channel:
        try:
            return controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
        except grpc.RpcError as refused:
            return refused


def _catching_up_refusal(node: Node) -> grpc.RpcError | None:
    answer = _read_at(node)
    return answer if isinstance(answer, grpc.RpcError) and is_catching_up(answer) else None


def _topics_at(node: Node) -> set[str] | None:
    answer = _read_at(node)
    return None if isinstance(answer, grpc.RpcError) else {t.name for t in answer.topics}


def _voters(cluster: LocalCluster) -> dict[int, str]:
    """controller id -> role, as the active controller's directory says."""
    with ControllerClient(cluster.quorum, timeout_s=20) as client:
        return {m.controller_id: m.role for m in client.describe_quorum()}


def _brokers(cluster: TestCluster) -> dict[int, tuple[int, bool]]:
    with cluster.controller_client() as client:
        return {b.endpoint.broker_id: (b.broker_epoch, b.endpoint.fenced) for b in client.describe_cluster().brokers}


def test_replacing_a_dead_controller_keeps_metadata_and_brokers(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=3, brokers=1) as cluster:
        topics = {f"kept-{i}" for i in range(5)}
        for name in topics:
            cluster.create_topic(name)
        brokers_before = _brokers(cluster)
        dead = cluster.controller(3)
        cluster.kill(dead)
        shutil.rmtree(cluster.data_dir / dead.name)  # its disk is gone for good

        new, response = add_controller_to(cluster, catch_up_timeout_s=60, detach=False)
        assert new.node_id == 4 and {m.controller_id for m in response.voters} == {1, 2, 3, 4}
        remove_controller_from(cluster, dead)
        assert _voters(cluster) == {1: "voter", 2: "voter", 4: "voter"}
        assert [c.node_id for c in cluster.controllers] == [1, 2, 4] and "4@" in cluster.quorum and "3@" not in cluster.quorum
        wait_for(lambda: _topics_at(new) is not None and topics <= _topics_at(new), 30, "the new controller to serve every topic")
        cluster.create_topic("after-replacement")  # the new quorum commits
        with ControllerClient("1@127.0.0.1:1:%d,3@127.0.0.1:1:%d" % (cluster.controller(1).port, dead.port), timeout_s=20) as old_list:
            # a client that knows only the old list learns the current voters (and, from hints, the active one)
            assert {c.broker_id for c in old_list.describe_cluster().controllers} == {1, 2, 4}
            old_list.create_topic("through-the-old-list", 1, 1)
        assert _brokers(cluster) == brokers_before, "the broker was fenced or re-registered during the replacement"

        cluster.stop()  # a restart of the whole cluster uses the voters cluster.json names now
        restarted = TestCluster.load(cluster.data_dir)
        restarted.start()
        try:
            restarted.wait_ready()
            assert _voters(restarted) == {1: "voter", 2: "voter", 4: "voter"}
            for controller in restarted.controllers:
                wait_for(lambda: (_topics_at(controller) or set()) >= topics | {"after-replacement"}, 30,
                         f"{controller.name} to serve every topic after the restart")
        finally:
            restarted.stop()


def test_an_observer_serves_and_votes_only_once_caught_up_and_a_removed_controller_stops_serving(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=3, brokers=1) as cluster:
        cluster.create_topic("before")
        # No quorum: the observer cannot catch up, so it refuses reads, and adding it fails
        # without it ever voting (the quorum is left as it was).
        for node_id in (2, 3):
            cluster.stop_node(cluster.controller(node_id))
        joining = cluster.new_controller()
        cluster.start_node(joining)
        refusal = wait_for(lambda: _catching_up_refusal(joining), 30, "the observer to answer, refusing reads while it catches up")
        assert refusal.code() == grpc.StatusCode.UNAVAILABLE
        for node_id in (2, 3):
            cluster.start_node(cluster.controller(node_id))
        wait_for(lambda: (_topics_at(joining) or set()) >= {"before"}, 60, "the observer to catch up and serve reads")
        with ControllerClient(cluster.quorum, timeout_s=60) as client:
            client.add_controller(joining.node_id, joining.host, joining.raft_port, joining.port, 60)
        cluster.joined(joining)
        assert _voters(cluster) == {1: "voter", 2: "voter", 3: "voter", 4: "voter"}

        # Removing a running voter, the active one if it is: it hands over, and the removed
        # controller refuses reads from then on.
        with ControllerClient(cluster.quorum, timeout_s=30) as client:
            active = next(m.controller_id for m in client.describe_quorum() if m.state == "leader")
            client.remove_controller(active)
        removed = cluster.controller(active)
        assert _voters(cluster) == {i: "voter" for i in (1, 2, 3, 4) if i != active}
        wait_for(lambda: isinstance(_read_at(removed), grpc.RpcError), 30, f"removed {removed.name} to stop serving reads")
        refusal = _read_at(removed)
        assert refusal.code() == grpc.StatusCode.UNAVAILABLE and "removed from the metadata quorum" in refusal.details()
        cluster.create_topic("after-removal")


def test_adding_an_unknown_or_duplicate_controller_is_refused_with_advice(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=3, brokers=1) as cluster:
        taken = cluster.controller(2)
        with ControllerClient(cluster.quorum, timeout_s=20) as client:
            with pytest.raises(ControllerError, match="already a voter"):
                client.add_controller(2, taken.host, taken.raft_port + 1000, taken.port + 1000)
            with pytest.raises(ControllerError, match="not in the quorum"):
                client.remove_controller(9)
            with pytest.raises(ControllerError, match="has not caught up"):  # registered, but nothing runs there
                client.add_controller(9, "127.0.0.1", 1, 2, catch_up_timeout_s=1)
            client.remove_controller(9)  # the observer registration goes again
        assert _voters(cluster) == {1: "voter", 2: "voter", 3: "voter"}
