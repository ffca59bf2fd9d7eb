"""An attacker beside the workload of a secure cluster (``kraftlog chaos attack``,
chaos/attacker.py): a process holding an application's certificate of the cluster's CA and a
user without ACLs hammers wrong passwords, expensive and revealing requests and bare TLS
handshakes at every port, while a producer writes with acks=all. The cluster must hold: the
controller leadership does not change, no produce fails, and nothing the attacker asked for
happened (no user, no topic). The benchmark also holds produce p99 within 2x of the same run
without the attacker; the default run checks no timing (a shared machine's would flake)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from metadata_quorum.security_client import SecurityClient
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_authz import issue_app_certificate
from tests.integration.test_metrics import give_metrics_ports, metrics_port

pytestmark = pytest.mark.integration

TOPIC = "work"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    def configure(c: TestCluster) -> None:
        issue_app_certificate(c)
        give_metrics_ports(c)

    with local_cluster(tmp_path_factory.mktemp("attacker"), controllers=3, brokers=2, secure=True, configure=configure) as running:
        running.create_topic(TOPIC, partitions=2, replication_factor=2)
        with SecurityClient(",".join(c.address for c in running.controllers), security=running.client_security) as admin:
            admin.upsert_user("mallory", "mallory-secret")
            admin.upsert_user("alice", "alice-secret")
        files = running.security_dir
        (running.data_dir / "attacker.json").write_text(json.dumps(
            {"ca_file": str(files / "ca.crt"), "cert_file": str(files / "app.crt"), "key_file": str(files / "app.key")}))
        yield running


def leadership(cluster: TestCluster) -> tuple[int, int]:
    """(active controller, its Raft term) once every controller follows it in that term: any
    election since changes the term. A quorum just started may still be settling (a voter
    that has not heard the first leader yet stands as a candidate): that is not the attack's."""
    def settled() -> tuple[int, int] | None:
        with cluster.controller_client() as client:
            members = client.describe_quorum()
        leaders = [m for m in members if m.state == "leader"]
        if len(leaders) != 1 or any(m.state not in ("leader", "follower") or m.raft_term != leaders[0].raft_term for m in members):
            return None
        return leaders[0].controller_id, leaders[0].raft_term

    return wait_for(settled, 30, "every controller following one leader in one term")


@dataclass
class Run:
    latencies: list[float]
    failed: list[str]
    attack: dict[str, dict[str, int]] | None
    leadership: tuple[tuple[int, int], tuple[int, int]]

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.latencies, n=100)[98]


def start_attacker(cluster: TestCluster, seconds: float) -> subprocess.Popen:
    """The attacker process, returned once it attacks (its first line says so)."""
    metrics = [f"127.0.0.1:{metrics_port(cluster, n.role, n.node_id)}" for n in cluster.nodes]
    attacker = subprocess.Popen(
        [sys.executable, "-m", "cli", "chaos", "attack", "--brokers", ",".join(b.address for b in cluster.brokers),
         "--controllers", ",".join(c.address for c in cluster.controllers), "--metrics", ",".join(metrics),
         "--command-config", str(cluster.data_dir / "attacker.json"), "--user", "mallory", "--password", "mallory-secret",
         "--victim", "alice", "--duration", str(seconds)],
        # at nice 19: its own CPU stands for a remote machine's, so only what the cluster spends answering it competes
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=lambda: os.nice(19))
    first = attacker.stdout.readline()  # blocks until the attack runs (or the process ends)
    assert first.startswith("attacking"), first
    return attacker


def produce_for(cluster: TestCluster, seconds: float, attacked: bool) -> Run:
    """acks=all writes one after another for ``seconds``, with or without the attacker."""
    from data_plane.client import Producer

    before = leadership(cluster)
    attacker = start_attacker(cluster, seconds + 1) if attacked else None
    latencies: list[float] = []
    failed: list[str] = []
    with Producer(cluster.bootstrap, security=cluster.client_security, acks="all") as producer:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sent = time.perf_counter()
            try:
                producer.send(TOPIC, value=b"v" * 100).result(timeout=30)
                latencies.append(time.perf_counter() - sent)
            except Exception as error:  # every failure is the finding, not the end of the run
                failed.append(repr(error))
    attack = None
    if attacker is not None:
        out, _ = attacker.communicate(timeout=60)
        assert attacker.returncode == 0, out
        attack = json.loads(out.strip().splitlines()[-1])
    return Run(latencies, failed, attack, (before, leadership(cluster)))


def assert_the_cluster_held(cluster: TestCluster, run: Run) -> None:
    assert not run.failed, run.failed[:5]
    assert run.leadership[0] == run.leadership[1], f"the controller leadership changed: {run.leadership}"
    attack = run.attack
    assert attack["wrong-passwords"].get("UNAUTHENTICATED", 0) > 0 and attack["wrong-passwords"].get("throttled", 0) > 0, attack
    assert "answered" not in attack["wrong-passwords"], attack
    assert attack["expensive-requests"].get("CLUSTER_AUTHORIZATION_FAILED", 0) > 0, attack  # UpsertUser, CreateTopics refused
    assert attack["handshakes"].get("refused", 0) > 0 and "answered" not in attack["handshakes"], attack
    with SecurityClient(",".join(c.address for c in cluster.controllers), security=cluster.client_security) as admin:
        assert not [u.name for u in admin.list_users() if u.name.startswith("intruder-")]
    with cluster.controller_client() as client:
        assert "flood" not in {t.name for t in client.describe_cluster().topics}


def test_an_attacker_beside_the_workload_changes_no_leadership_and_fails_no_produce(cluster: TestCluster) -> None:
    run = produce_for(cluster, 8.0, attacked=True)
    assert len(run.latencies) > 10, len(run.latencies)
    assert_the_cluster_held(cluster, run)


@pytest.mark.benchmark
def test_an_attacker_keeps_produce_p99_within_twice_the_quiet_run(cluster: TestCluster) -> None:
    quiet = produce_for(cluster, 20.0, attacked=False)
    attacked = produce_for(cluster, 20.0, attacked=True)
    print(f"\nquiet: {len(quiet.latencies)} writes, p50 {statistics.median(quiet.latencies) * 1000:.1f} ms, p99 {quiet.p99 * 1000:.1f} ms"
          f"\nattacked: {len(attacked.latencies)} writes, p50 {statistics.median(attacked.latencies) * 1000:.1f} ms, "
          f"p99 {attacked.p99 * 1000:.1f} ms\nattack: {attacked.attack}")
    assert_the_cluster_held(cluster, attacked)
    assert attacked.p99 <= 2 * quiet.p99, (attacked.p99, quiet.p99)
