"""Group coordinator figures (the issue's goals: a member joining 10 consumers on 60
partitions reaches a stable assignment in under 1 s; at least 10,000 offset commits/s to one
coordinator):

    python -m pytest -m benchmark tests/integration/test_group_coordinator_benchmark.py -s

Raw gRPC members (tests/integration/test_group_coordinator.py) that heartbeat as soon as they
have something to report; the time to stable is measured from the newcomer's join until the
coordinator describes the group stable with the members' own views disjoint and complete.
The commit rate is the acknowledged (acks=all) single-partition OffsetCommits per second from
COMMITTERS concurrent requests of one group. Figures are printed with the load average (the
machine is shared); nothing is asserted about speed.
"""

from __future__ import annotations

import asyncio
import os
import time

import grpc
import pytest

from kraftlog_proto import group_pb2, group_pb2_grpc
from tests.cluster import local_cluster
from tests.integration import test_group_coordinator as g

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 60
MEMBERS = 10
COMMITTERS = 64
COMMIT_SECONDS = 5
BROKER_ARGS = ["--offsets-topic-partitions", "3", "--group-session-timeout-ms", "60000"]  # no heartbeats while committing


def test_rebalance_time_and_commit_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(g, "PARTITIONS", PARTITIONS)
    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=BROKER_ARGS) as cluster:
        cluster.create_topic(g.TOPIC, partitions=PARTITIONS, replication_factor=1)
        node, stub = g.coordinator_stub(cluster.bootstrap, "bench")
        members = [g.RawMember(stub, "bench", f"m{i}") for i in range(MEMBERS)]
        g.converge(stub, members, "bench", timeout_s=120)
        members.append(g.RawMember(stub, "bench", "newcomer"))
        started = time.perf_counter()
        g.converge(stub, members, "bench", timeout_s=120)
        rebalance_s = time.perf_counter() - started
        address = next(b.address for b in cluster.brokers if b.node_id == node)
        commits = asyncio.run(_commit_rate(address, members[0]))
        print(f"\ngroup coordinator (load average {os.getloadavg()[0]:.1f}):")
        print(f"  member joining {MEMBERS} on {PARTITIONS} partitions, stable after {rebalance_s * 1000:8.0f} ms")
        print(f"  offset commits, {COMMITTERS} in flight, acks=all  {commits:8.0f} /s")
        assert commits > 0


async def _commit_rate(address: str, member: g.RawMember) -> float:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = group_pb2_grpc.GroupCoordinatorStub(channel)
        done = 0
        deadline = time.perf_counter() + COMMIT_SECONDS

        async def committer(index: int) -> None:
            nonlocal done
            offset = 0
            while time.perf_counter() < deadline:
                offset += 1
                answer = await stub.OffsetCommit(group_pb2.OffsetCommitRequest(
                    group_id="bench", member_id=member.member_id, member_epoch=member.epoch,
                    topics=[group_pb2.OffsetCommitTopic(topic=g.TOPIC, partitions=[
                        group_pb2.OffsetCommitPartition(partition=index % PARTITIONS, committed_offset=offset)])]), timeout=30)
                assert answer.error_code == 0, answer
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(committer(i) for i in range(COMMITTERS)))
        return done / (time.perf_counter() - started)
