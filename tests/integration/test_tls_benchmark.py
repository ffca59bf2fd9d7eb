"""What TLS costs the produce path: ``kraftlog perf produce`` (the CLI, as an operator runs
it) with RF=3 and acks=all against a plaintext cluster and a secure one (``cluster up
--secure``: mutual TLS on client, replication and controller links, authentication and ACLs
on) in the same run. On the secure cluster the producer is a password user that is not a super
user, allowed by one ACL (WRITE on the topic, which also allows idempotent produce, KIP-679),
so every request pays authentication and the ACL check:

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

from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import AclBinding
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

RECORDS = 1_000_000
RECORD_BYTES = 100
ROUNDS = 5
TOPIC = "perf"
USER, PASSWORD = "bench", "bench-secret"


def producer_config(cluster: TestCluster, tmp_path: Path) -> Path:
    """A client config for a password user with WRITE on the topic and nothing else."""
    with SecurityClient(",".join(c.address for c in cluster.controllers), security=cluster.client_security) as admin:
        admin.upsert_user(USER, PASSWORD)
        admin.create_acls([AclBinding(f"User:{USER}", "*", "topic", TOPIC, "literal", "write", "allow")])
    path = tmp_path / "producer-client.json"
    path.write_text(json.dumps({**json.loads(cluster.client_config_path.read_text()), "username": USER, "password": PASSWORD}))
    return path


def perf_produce(cluster: TestCluster, config: Path | None) -> dict:
    """One ``kraftlog perf produce`` run, its --json document."""
    command = [sys.executable, "-m", "cli", "perf", "produce", "--topic", TOPIC, "--acks", "all", "--num-records", str(RECORDS),
               "--record-size", str(RECORD_BYTES), "--bootstrap", cluster.bootstrap, "--json"]
    if config is not None:
        command += ["--command-config", str(config)]
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
        configs = {False: None, True: producer_config(clusters[True], tmp_path)}
        best: dict[bool, dict] = {}
        for _ in range(ROUNDS):
            for secure, cluster in clusters.items():
                run = perf_produce(cluster, configs[secure])
                if secure not in best or run["records_per_sec"] > best[secure]["records_per_sec"]:
                    best[secure] = run
    plain, tls = best[False], best[True]
    ratio = tls["records_per_sec"] / plain["records_per_sec"]
    print(f"\nperf produce, {RECORDS:,} x {RECORD_BYTES} B, RF=3 acks=all, best of {ROUNDS} (load average {os.getloadavg()}):")
    for name, run in (("plaintext", plain), ("mTLS+authn+ACLs", tls)):
        print(f"  {name:15}  {run['records_per_sec']:>10,.0f} records/s  {run['mb_per_sec']:6.1f} MB/s  "
              f"p50 {run['latency_ms']['p50']} ms  p99 {run['latency_ms']['p99']} ms")
    print(f"  TLS / plaintext: {ratio:.2f} (goal >= 0.85)")
