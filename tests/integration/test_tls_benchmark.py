"""What TLS costs the produce path: ``kraftlog perf produce`` (the CLI, as an operator runs
it) with RF=3 and acks=all against a plaintext cluster and a secure one (``cluster up
--secure``: mutual TLS on client, replication and controller links) in the same run:

    python -m pytest -m benchmark tests/integration/test_tls_benchmark.py -s

Rounds alternate plaintext and TLS so that load from other processes on the shared machine
falls on both; each figure is the best of ROUNDS, printed with the load average. Goal: TLS
within 15% of plaintext. Nothing is asserted on speed (the machine is shared); the test
fails only when a run fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

RECORDS = 1_000_000
RECORD_BYTES = 100
ROUNDS = 5
TOPIC = "perf"


def perf_produce(cluster: TestCluster) -> dict:
    """One ``kraftlog perf produce`` run, its --json document."""
    command = [sys.executable, "-m", "cli", "perf", "produce", "--topic", TOPIC, "--acks", "all", "--num-records", str(RECORDS),
               "--record-size", str(RECORD_BYTES), "--bootstrap", cluster.bootstrap, "--json"]
    if cluster.secure:
        command += ["--command-config", str(cluster.client_config_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "KRAFTLOG_CLIENT_CONFIG": ""})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_produce_rf3_acks_all_with_tls_against_plaintext(tmp_path: Path) -> None:
    with ExitStack() as stack:
        clusters = {
            secure: stack.enter_context(local_cluster(tmp_path / ("tls" if secure else "plain"), controllers=1, brokers=3, secure=secure))
            for secure in (False, True)
        }
        for cluster in clusters.values():
            cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
        best: dict[bool, dict] = {}
        for _ in range(ROUNDS):
            for secure, cluster in clusters.items():
                run = perf_produce(cluster)
                if secure not in best or run["records_per_sec"] > best[secure]["records_per_sec"]:
                    best[secure] = run
    plain, tls = best[False], best[True]
    ratio = tls["records_per_sec"] / plain["records_per_sec"]
    print(f"\nperf produce, {RECORDS:,} x {RECORD_BYTES} B, RF=3 acks=all, best of {ROUNDS} (load average {os.getloadavg()}):")
    for name, run in (("plaintext", plain), ("mutual TLS", tls)):
        print(f"  {name:10}  {run['records_per_sec']:>10,.0f} records/s  {run['mb_per_sec']:6.1f} MB/s  "
              f"p50 {run['latency_ms']['p50']} ms  p99 {run['latency_ms']['p99']} ms")
    print(f"  TLS / plaintext: {ratio:.2f} (goal >= 0.85)")
