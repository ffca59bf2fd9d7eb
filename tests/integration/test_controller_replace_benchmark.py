"""Replacing a dead controller at 10,000 and 100,000 partitions (docs/operations.md, Replacing a
controller), with real processes:

    flock /tmp/kraftlog-bench.lock python -m pytest -m benchmark tests/integration/test_controller_replace_benchmark.py -s

Three controllers and three brokers; topics of 2,500 partitions at replication factor 1 (the
quorum's metadata is what is measured, so the brokers host one replica per partition). Then
controller 3 is SIGKILLed and its directory deleted, and a new controller is added the way
``kraftlog cluster add-controller`` adds one. Prints: the time from its start until the active
controller made it a voter (it catches up from a snapshot and the log first), until it serves
every topic, and the removal of the dead voter; the machine's load beside each.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import grpc
import pytest

from cli.cluster_cmd import add_controller_to, remove_controller_from
from data_plane.client import Admin
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc
from server_common.local_cluster import Node
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration]

PARTITIONS_PER_TOPIC = 2_500


def topics_served_by(node: Node) -> int:
    """How many topics ``node`` itself describes (0 while it refuses reads, catching up)."""
    with grpc.insecure_channel(node.address, options=[("grpc.max_receive_message_length", 1 << 30)]) as channel:
        try:
            return len(controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(pb.DescribeClusterRequest(), timeout=30).topics)
        except grpc.RpcError:
            return 0


def every_partition_led(cluster: TestCluster, names: list[str]) -> bool:
    """The brokers have created every replica: the replacement is measured on a settled cluster."""
    with Admin(cluster.bootstrap) as admin:
        topics = admin.describe_topics(names)
    return all(p.leader >= 0 for t in topics.values() for p in t.partitions.values())


def raft_term(client) -> int:
    """The quorum's current term, the highest any controller reports: each election raises it."""
    return max(member.raft_term for member in client.describe_quorum())


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("partitions", [10_000, 100_000])
def test_replacing_a_dead_controller(tmp_path: Path, partitions: int) -> None:
    names = [f"replace-{i}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    with local_cluster(tmp_path, controllers=3, brokers=3) as cluster:
        started = time.monotonic()
        with cluster.controller_client() as client:
            for name in names:
                client.create_topic(name, PARTITIONS_PER_TOPIC, 1)
        wait_for(lambda: every_partition_led(cluster, names), 1200, "every partition led")
        print(f"\n{partitions:,} partitions created and led in {time.monotonic() - started:.1f} s ({load()})")
        dead = cluster.controller(3)
        cluster.kill(dead)
        shutil.rmtree(cluster.data_dir / dead.name)  # its disk is gone for good

        started = time.monotonic()
        new, _ = add_controller_to(cluster, catch_up_timeout_s=600, detach=False)
        voter_s = time.monotonic() - started
        print(f"{new.name} started, caught up and made a voter in {voter_s:.1f} s ({load()})")
        wait_for(lambda: topics_served_by(new) == len(names), 600, f"{new.name} to serve every topic")
        print(f"{new.name} serves every topic {time.monotonic() - started:.1f} s after its start ({load()})")
        removing = time.monotonic()
        remove_controller_from(cluster, dead)
        print(f"{dead.name} removed from the voters in {time.monotonic() - removing:.1f} s ({load()})")
        cluster.create_topic("after-replacement")  # the new quorum commits


COMPACTION_ENTRIES = 5_000  # pysyncobj compacts its log every 5,000 entries (docs/operations.md, Controller sizing)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("partitions", [10_000, 100_000])
def test_commit_latency_through_log_compactions(tmp_path: Path, partitions: int) -> None:
    """One config change at a time, awaited, for a little over one compaction interval of
    entries: each change's latency, and how many dumps each controller wrote meanwhile (a
    compaction used to build the dump on the Raft thread, docs/operations.md). Prints p50, p99
    and the worst change, the one a compaction stalls, and the Raft term before and after: a
    stall past the election timeout shows as an election."""
    names = [f"compact-{i}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    with local_cluster(tmp_path, controllers=3, brokers=3) as cluster:
        with cluster.controller_client() as client:
            for name in names:
                client.create_topic(name, PARTITIONS_PER_TOPIC, 1)
            wait_for(lambda: every_partition_led(cluster, names), 1200, "every partition led")
            dumps = {c.name: cluster.data_dir / c.name / "raft.dump" for c in cluster.controllers}

            def dump_times() -> dict[str, float]:
                return {name: path.stat().st_mtime if path.exists() else 0.0 for name, path in dumps.items()}

            before = dump_times()
            term_before = raft_term(client)
            latencies_ms = []
            for i in range(COMPACTION_ENTRIES + 500):
                started = time.monotonic()
                client.alter_configs(names[i % len(names)], {"retention.ms": str(3_600_000 + i)})
                latencies_ms.append((time.monotonic() - started) * 1000)
            compacted = [name for name, mtime in dump_times().items() if mtime != before[name]]
            term_after = raft_term(client)
        latencies_ms.sort()
        print(f"\n{partitions:,} partitions: {len(latencies_ms)} config changes one at a time, p50 {latencies_ms[len(latencies_ms) // 2]:.1f} ms, "
              f"p99 {latencies_ms[len(latencies_ms) * 99 // 100]:.1f} ms, worst {latencies_ms[-1]:.0f} ms; "
              f"controllers that compacted meanwhile: {', '.join(compacted) or 'none'}; Raft term {term_before} -> {term_after} ({load()})")
        assert compacted, "no controller compacted its log: the run measured no compaction"
