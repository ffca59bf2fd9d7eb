"""The controller quorum as real processes: three `python -m metadata_quorum` voters on
loopback, a fake broker driven through the real BrokerLifecycleManager and MetadataFollower,
and the admin ControllerClient.

Checks: metadata survives SIGKILL of every controller; a new active controller accepts writes
within 5 s of SIGKILL of the old one (the figure is printed); a follower answers writes with
NOT_CONTROLLER naming the active controller; a broker is fenced when its heartbeats stop and
unfenced when they resume.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from data_plane.broker.controller_link import BrokerLifecycleManager, MetadataFollower
from metadata_quorum.controller_client import ControllerClient, ControllerError
from kraftlog_proto import common_pb2, controller_pb2, controller_pb2_grpc
from server_common.local_cluster import free_ports
from server_common.waiting import async_wait_for, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT_MS = 1500


class Quorum:
    """Three controller processes; always reaped by the fixture."""

    def __init__(self, tmp_path: Path) -> None:
        ports = free_ports(6)
        self.ids = [1, 2, 3]
        self.grpc_ports = {i: ports[2 * (i - 1) + 1] for i in self.ids}
        self.spec = ",".join(f"{i}@127.0.0.1:{ports[2 * (i - 1)]}:{self.grpc_ports[i]}" for i in self.ids)
        self.endpoints = [(i, "127.0.0.1", self.grpc_ports[i]) for i in self.ids]
        self.tmp_path = tmp_path
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, node_id: int) -> None:
        log = open(self.tmp_path / f"controller-{node_id}.log", "ab")
        command = [sys.executable, "-m", "metadata_quorum", "--node-id", str(node_id), "--quorum", self.spec,
                   "--data-dir", str(self.tmp_path / f"controller-{node_id}"), "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--log-format", "json"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.procs[node_id] = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def kill(self, node_id: int) -> None:
        proc = self.procs.pop(node_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for node_id in list(self.procs):
            self.kill(node_id)

    def client(self, **kwargs) -> ControllerClient:
        return ControllerClient(self.endpoints, **kwargs)

    def active_controller(self, client: ControllerClient) -> int:
        """Wait until the quorum reports an active controller; returns its id."""
        return wait_for(lambda: client.describe_cluster().active_controller.controller_id > 0 and client.describe_cluster().active_controller.controller_id, 20, "an active controller")


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(tmp_path)
    try:
        for node_id in q.ids:
            q.start(node_id)
        yield q
    finally:
        q.stop_all()


class FakeBroker:
    """A broker that only does the controller protocol, through the real classes."""

    def __init__(self, quorum: Quorum, broker_id: int = 1, endpoints: list | None = None) -> None:
        endpoints = endpoints or quorum.endpoints
        self.follower = MetadataFollower(endpoints, lambda delta, image: None)
        self.lifecycle = BrokerLifecycleManager(broker_id, "127.0.0.1", 9999, "", endpoints, lambda: self.follower.image.offset,
                                                on_active_controller=self.follower.follow_from,
                                                session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=200)

    async def start(self) -> None:
        await self.follower.start()
        await self.lifecycle.start()
        assert await self.lifecycle.wait_unfenced(10), "the fake broker was never unfenced"

    async def stop(self) -> None:
        await self.lifecycle.stop()
        await self.follower.stop()


def topic_layout(client: ControllerClient, name: str) -> list[tuple[int, tuple[int, ...]]]:
    topic = next((t for t in client.describe_cluster().topics if t.name == name), None)
    return [] if topic is None else [(p.partition, tuple(p.replicas)) for p in topic.partitions]


def test_topics_survive_sigkill_of_every_controller(quorum: Quorum):
    async def scenario() -> None:
        broker = FakeBroker(quorum)
        with quorum.client() as client:
            quorum.active_controller(client)
            await broker.start()
            topic_id = await asyncio.to_thread(client.create_topic, "orders", 3, 1, {"retention.ms": "60000"})
            before = topic_layout(client, "orders")
            await broker.stop()
            assert len(before) == 3

            quorum.stop_all()
            for node_id in quorum.ids:
                quorum.start(node_id)
            quorum.active_controller(client)
            cluster = await asyncio.to_thread(client.describe_cluster)
            assert [t.topic_id for t in cluster.topics if t.name == "orders"] == [topic_id]
            assert topic_layout(client, "orders") == before
            assert client.describe_configs(["orders"])["orders"][[e.key for e in client.describe_configs(["orders"])["orders"]].index("retention.ms")].value == "60000"

    asyncio.run(scenario())


def test_metadata_streams_from_the_active_controller_and_follows_it_after_a_failover(quorum: Quorum):
    """A broker streams metadata from whichever controller it reaches first, and moves to the
    active one (which applies each entry first) once its session has found it; when that
    controller dies, to the next active one, without going back to the dead one."""
    async def scenario() -> None:
        with quorum.client() as client:
            active = quorum.active_controller(client)
            # the active controller listed last: the broker's first stream is from another one
            broker = FakeBroker(quorum, endpoints=sorted(quorum.endpoints, key=lambda e: e[0] == active))
            await broker.start()
            await asyncio.to_thread(client.create_topic, "first", 1, 1)  # a batch: the stream moves after one
            await async_wait_for(lambda: broker.follower.source[0] == active, 10, f"the metadata stream to come from controller {active}")

            quorum.kill(active)
            successor = await asyncio.to_thread(quorum.active_controller, client)
            # The stream moves after the first batch it gets once the broker's session has found
            # the successor, which may open after a first topic's batch: a topic per attempt.
            for attempt in range(10):
                name = f"after-failover-{attempt}"
                await asyncio.to_thread(client.create_topic, name, 1, 1)
                await async_wait_for(lambda: name in broker.follower.image.topics, 20, f"topic {name} to reach the broker")
                if broker.follower.source[0] == successor:
                    break
            assert broker.follower.source[0] == successor, f"the metadata stream comes from {broker.follower.source}, not the new active controller"
            await broker.stop()

    asyncio.run(scenario())


def test_a_restarted_controller_answers_reads_only_once_caught_up(quorum: Quorum):
    """A controller restarted alone holds what it applied before, and cannot know whether more
    was committed since: until a leader of a new term has committed, it refuses reads (naming
    what to do) rather than answer from an image that may lack committed entries."""
    with quorum.client() as client:
        quorum.active_controller(client)
        client.alter_client_quotas(("alice", None), {"producer_byte_rate": 1000.0})
    quorum.stop_all()
    quorum.start(1)
    with ControllerClient([quorum.endpoints[0]], timeout_s=5) as lone:
        own = wait_for(lambda: _own_row(lone), 20, "controller 1 to answer")  # the quorum's state is always served
        assert not own.caught_up, own
        with pytest.raises(ControllerError) as refused:
            lone.describe_client_quotas()
        assert "has not yet caught up with the metadata log" in refused.value.message, refused.value.message
        assert "kraftlog quorum describe" in refused.value.message
        with pytest.raises(ControllerError, match="has not yet caught up"):
            lone.describe_cluster()
        quorum.start(2)
        users = wait_for(lambda: _quota_users(lone), 30, "controller 1 to catch up and answer")
        assert users == ["alice"]
        assert _own_row(lone).caught_up


def _own_row(client: ControllerClient) -> controller_pb2.QuorumMember | None:
    """Controller 1's row of the quorum, from its own answer (None until it answers)."""
    return next((m for m in client.describe_quorum() if m.controller_id == 1 and m.state != "unreachable"), None)


def _quota_users(client: ControllerClient) -> list[str] | None:
    """The users with quotas, or None while the controller refuses the read."""
    try:
        return [entry.entity.user for entry in client.describe_client_quotas().entries]
    except ControllerError:
        return None


def test_failover_not_controller_hint_and_fencing(quorum: Quorum):
    async def scenario() -> None:
        broker = FakeBroker(quorum)
        with quorum.client(timeout_s=15) as client:
            active = quorum.active_controller(client)
            await broker.start()

            latencies_ms = []
            for i in range(20):
                started = time.monotonic()
                await asyncio.to_thread(client.create_topic, f"latency-{i}", 1, 1)
                latencies_ms.append((time.monotonic() - started) * 1000)
            print(f"\nsync CreateTopics latency through the active controller: p50 {statistics.median(latencies_ms):.1f} ms, max {max(latencies_ms):.1f} ms")

            # a follower refuses writes and names the active controller
            follower = next(i for i in quorum.ids if i != active)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{quorum.grpc_ports[follower]}") as channel:
                request = controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreateTopicsRequest.Topic(name="x", num_partitions=1, replication_factor=1)])
                response = await controller_pb2_grpc.ControllerServiceStub(channel).CreateTopics(request)
            assert response.error_code == common_pb2.NOT_CONTROLLER
            assert (response.active_controller.controller_id, response.active_controller.port) == (active, quorum.grpc_ports[active])
            assert f"retry against controller {active} at 127.0.0.1:{quorum.grpc_ports[active]}" in response.error_message

            # failover: SIGKILL the active controller, time until a new one accepts a write
            killed_at = time.monotonic()
            quorum.kill(active)
            await asyncio.to_thread(client.create_topic, "after-failover", 1, 1)
            failover_s = time.monotonic() - killed_at
            new_active = client.describe_cluster().active_controller.controller_id
            print(f"failover: controller {active} SIGKILLed, controller {new_active} accepted CreateTopics after {failover_s:.2f} s")
            assert new_active != active and failover_s < 5.0

            # the broker survives the failover unfenced (full session grace), then is fenced when it stops heartbeating
            await asyncio.sleep(SESSION_TIMEOUT_MS / 1000 + 0.5)
            assert not broker.lifecycle.is_fenced
            # stopping closes its session stream, as a dying process's kernel would: the
            # controller fences it at once instead of waiting out the session timeout
            await broker.lifecycle.stop()
            stopped_at = time.monotonic()
            await async_wait_for(lambda: broker.follower.image.brokers[1].fenced, 10, "the broker to be fenced")
            fenced_after_s = time.monotonic() - stopped_at
            print(f"broker fenced {fenced_after_s:.2f} s after its session closed (session timeout {SESSION_TIMEOUT_MS} ms)")
            assert fenced_after_s < SESSION_TIMEOUT_MS / 1000
            assert all(p.leader == -1 for p in broker.follower.image.topics["after-failover"].partitions.values())

            await broker.lifecycle.start()  # resumes heartbeating: same incarnation, same epoch
            await async_wait_for(lambda: not broker.follower.image.brokers[1].fenced, 10, "the broker to be unfenced")
            assert not broker.lifecycle.is_fenced or await broker.lifecycle.wait_unfenced(5)
            assert broker.follower.image.partition("after-failover", 0).leader == 1
            await broker.stop()

    asyncio.run(scenario())
