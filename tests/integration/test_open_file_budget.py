"""A broker that knows its open-file limit: real processes, a broker started with a low limit.

One controller and one broker whose process alone runs under ``prlimit --nofile=512:512``
(soft and hard: the broker cannot raise it). The broker hosts 2,000 replicas, far more than
512 descriptors could hold open one file each, serves a produce and a fetch on every one of
them, and stays under the limit throughout (counted in /proc/<pid>/fd). Before segment files
were a budget, such a broker failed with EMFILE ("Too many open files") at about 500
replicas: partitions went offline and the broker stopped applying metadata.

Its capacity (8 replicas per handle of its budget: (512 - 128) x 8 = 3,072) is registered
with the controller, which refuses a topic that would go past it, whole, with the documented
error, while the cluster serves on; ``kraftlog brokers list --json`` shows it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from data_plane.client import Consumer, Producer
from data_plane.storage.handle_budget import handle_budget, replica_capacity
from kraftlog_proto import common_pb2 as common
from metadata_quorum.controller_client import ControllerError
from server_common.open_files import open_descriptor_count
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
LIMIT = 512
TOPICS = [("wide-a", 1000), ("wide-b", 1000)]  # 2,000 replicas at RF=1 on the one broker
CAPACITY = replica_capacity(handle_budget(LIMIT))


def brokers_limited_to(limit: int) -> Callable[[TestCluster], None]:
    """A ``configure`` hook: the brokers (only) start under an open-file limit of ``limit``, soft and hard."""

    def configure(cluster: TestCluster) -> None:
        command = cluster.command

        def limited(node):
            base = command(node)
            return ["prlimit", f"--nofile={limit}:{limit}", "--", *base] if node.role == "broker" else base

        cluster.command = limited  # type: ignore[method-assign]

    return configure


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("files"), controllers=1, brokers=1, configure=brokers_limited_to(LIMIT)) as c:
        for name, partitions in TOPICS:
            with c.controller_client() as client:
                client.create_topic(name, partitions, 1)
        for name, partitions in TOPICS:
            c.wait_topic_ready(name, partitions, timeout_s=60)
        yield c


def broker_pid(cluster: TestCluster) -> int:
    return cluster.processes[cluster.broker(1).name].pid


def kraftlog(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_broker_under_a_low_limit_hosts_2000_replicas_and_serves_every_one(cluster: TestCluster) -> None:
    pid = broker_pid(cluster)
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert f"Max open files            {LIMIT}                  {LIMIT}" in limits, limits
    started = next(json.loads(line) for line in cluster.log_path(cluster.broker(1)).read_text().splitlines() if '"open-file limit"' in line)
    assert (started["soft_limit"], started["hard_limit"], started["log_handle_budget"], started["max_replicas"]) == (
        LIMIT, LIMIT, handle_budget(LIMIT), CAPACITY)
    peak = open_descriptor_count(pid)
    with Producer(cluster.bootstrap, acks=1, linger_ms=20) as producer:
        futures = [producer.send(name, f"{name}-{p}".encode(), partition=p) for name, count in TOPICS for p in range(count)]
        producer.flush(timeout=60)
    assert all(f.result(timeout=1) is not None for f in futures)
    peak = max(peak, open_descriptor_count(pid))

    wanted = {(name, p) for name, count in TOPICS for p in range(count)}
    seen: dict[tuple[str, int], bytes] = {}
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign(sorted(wanted))
        consumer.seek_to_beginning(sorted(wanted))
        deadline = time.monotonic() + 60
        while len(seen) < len(wanted) and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=500):
                seen[(record.topic, record.partition)] = record.value
            peak = max(peak, open_descriptor_count(pid))
    assert set(seen) == wanted, f"{len(wanted) - len(seen)} partitions never answered a fetch"
    assert all(value == f"{name}-{p}".encode() for (name, p), value in seen.items())
    assert peak < LIMIT, f"the broker held {peak} descriptors under a limit of {LIMIT}"


def test_a_topic_past_the_broker_capacity_is_refused_whole_and_the_cluster_serves_on(cluster: TestCluster) -> None:
    held = sum(count for _, count in TOPICS)
    asked = CAPACITY - held + 1
    with cluster.controller_client() as client, pytest.raises(ControllerError) as info:
        client.create_topic("too-wide", asked, 1)
    assert info.value.code == common.BROKER_CAPACITY_EXCEEDED
    assert (f"would put {CAPACITY + 1} replicas on broker 1 ({held} now + {asked}), over its capacity of {CAPACITY}"
            in info.value.message)

    listing = kraftlog(cluster, "brokers", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    [broker] = json.loads(listing.stdout)["brokers"]
    assert (broker["broker_id"], broker["replicas"], broker["max_replicas"]) == (1, held, CAPACITY)  # nothing half created
    with cluster.controller_client() as client:
        assert "too-wide" not in {t.name for t in client.describe_cluster().topics}

    with Producer(cluster.bootstrap, acks=1) as producer:
        producer.send("wide-a", b"still serving", partition=7).result(timeout=30)
    human = kraftlog(cluster, "brokers", "list")
    assert f"{held}" in human.stdout and f"{CAPACITY}" in human.stdout


BENCH_LIMIT = 2048  # budget 1,536, capacity 12,288 replicas per broker
BENCH_TOPIC_PARTITIONS = 2500


@pytest.mark.benchmark
@pytest.mark.timeout(1200)
def test_the_operators_scenario_scaled_to_a_limit_of_2048(tmp_path: Path) -> None:
    """The report, scaled: 3 controllers and 3 brokers under an open-file limit of 2,048 each,
    topics of 2,500 partitions at RF=3 created one after another (2,500 replicas per broker
    each). Before the handle cache every broker hit EMFILE on the first topic; now four
    topics (10,000 replicas per broker) are hosted and served, every broker stays under its
    limit, and the fifth, past the capacity of 12,288, is refused while the cluster serves on."""
    capacity = replica_capacity(handle_budget(BENCH_LIMIT))
    with local_cluster(tmp_path, controllers=3, brokers=3, configure=brokers_limited_to(BENCH_LIMIT)) as c:
        topics = [f"bench-{i}" for i in range(capacity // BENCH_TOPIC_PARTITIONS)]
        for name in topics:
            started = time.monotonic()
            with c.controller_client() as client:
                client.create_topic(name, BENCH_TOPIC_PARTITIONS, 3)
            c.wait_topic_ready(name, BENCH_TOPIC_PARTITIONS, timeout_s=300)
            fds = {b.node_id: open_descriptor_count(c.processes[b.name].pid) for b in c.brokers}
            print(f"{name}: ready in {time.monotonic() - started:.1f}s; descriptors per broker {fds}")
            assert max(fds.values()) < BENCH_LIMIT
        with Producer(c.bootstrap, acks="all", linger_ms=20) as producer:
            futures = [producer.send(name, b"v", partition=p) for name in topics for p in range(0, BENCH_TOPIC_PARTITIONS, 10)]
            producer.flush(timeout=300)
        assert all(f.result(timeout=1) is not None for f in futures)
        with c.controller_client() as client, pytest.raises(ControllerError) as info:
            client.create_topic("one-too-many", BENCH_TOPIC_PARTITIONS, 3)
        assert info.value.code == common.BROKER_CAPACITY_EXCEEDED and f"over its capacity of {capacity}" in info.value.message
        with Producer(c.bootstrap, acks="all") as producer:
            producer.send(topics[0], b"after the refusal", partition=1).result(timeout=60)
        assert all(open_descriptor_count(c.processes[b.name].pid) < BENCH_LIMIT for b in c.brokers)
