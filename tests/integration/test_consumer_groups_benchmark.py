"""Consumer-group benchmarks on one controller and three brokers, through the CLI's perf
commands (``cli/perf_group.py``):

    python -m pytest -m benchmark tests/integration/test_consumer_groups_benchmark.py -s

``test_rebalance_when_a_member_joins_ten``: ten members on a 60-partition topic, then one
more joins (and leaves) JOIN_ROUNDS times: the time from its ``subscribe()`` to a stable
assignment. Goal: under 1 s.

``test_offset_commit_rate``: admin commits of every partition of a 600-partition topic per
request to one coordinator, 8 requests in flight, for 10 s; each partition of a request is
one commit (one offset record written to the group's ``__consumer_offsets`` partition, RF 3).
Goal: >= 10,000 commits/s.

``test_group_of_three_against_one_assigned_consumer``: 100-byte records, read by a group of
three member processes and by one consumer with every partition assigned (``perf consume``
without ``--group``). Goal: the group at least as fast.

Every figure is printed with the machine's load average (a shared machine: compare the
figures of one run with each other).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
GROUP_BROKER_ARGS = ["--group-heartbeat-interval-ms", "200"]
JOIN_ROUNDS = 5
RECORDS = 1_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("groups-bench"), controllers=1, brokers=3, broker_args=GROUP_BROKER_ARGS) as c:
        yield c


def perf(cluster: TestCluster, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "cli", "perf", *args, "--json", "--bootstrap", cluster.bootstrap], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def test_rebalance_when_a_member_joins_ten(cluster):
    cluster.create_topic("bench-rebalance", 60, replication_factor=1)
    report = perf(cluster, "produce", "--topic", "bench-rebalance", "--num-records", "60000", "--batch-records", "1000")
    assert report["records"] == 60000
    result = perf(cluster, "consume", "--topic", "bench-rebalance", "--group", "bench-rebalance", "--members", "10",
                  "--joins", str(JOIN_ROUNDS), "--num-records", "60000")
    print(f"\na member joining 10 on 60 partitions: {result['join_rebalance_ms']} ms (median {result['join_rebalance_ms_median']}), "
          f"leaving: {result['leave_rebalance_ms']} ms; {load()}")
    assert len(result["join_rebalance_ms"]) == JOIN_ROUNDS


def test_offset_commit_rate(cluster):
    cluster.create_topic("bench-commit", 600, replication_factor=1)
    result = perf(cluster, "commit", "--topic", "bench-commit", "--group", "bench-commit", "--duration", "10")
    print(f"\noffset commits to broker {result['coordinator']}: {result['commits_per_sec']:,.0f} commits/s "
          f"({result['requests_per_sec']:,.0f} requests/s of {result['partitions_per_request']} partitions, p50 {result['latency_ms_p50']} ms); {load()}")
    assert result["commits"] > 0


def test_group_of_three_against_one_assigned_consumer(cluster):
    cluster.create_topic("bench-read", 6, replication_factor=1)
    perf(cluster, "produce", "--topic", "bench-read", "--num-records", str(RECORDS), "--record-size", "100")
    single = perf(cluster, "consume", "--topic", "bench-read", "--num-records", str(RECORDS))
    group = perf(cluster, "consume", "--topic", "bench-read", "--group", "bench-read", "--members", "3", "--joins", "0", "--num-records", str(RECORDS))
    print(f"\n100-byte records: one assigned consumer {single['records_per_sec']:,.0f}/s, a group of 3 {group['records_per_sec']:,.0f}/s; {load()}")
    assert single["records"] == RECORDS and group["records"] >= RECORDS
