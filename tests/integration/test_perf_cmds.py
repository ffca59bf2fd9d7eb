"""``kraftlog perf e2e``, ``perf latency``, ``perf failover`` and ``perf consume`` run end to end and report what they promise.

Benchmarks, not timed tests: tiny parameters on replication factor 1, and assertions on the
shape and consistency of the JSON report, never on how fast anything was.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from data_plane.client import Producer
from tests.cluster import local_cluster

pytestmark = pytest.mark.integration

LATENCY_KEYS = {"p50", "p99", "p999", "max"}


def kraftlog_json(*args: str, timeout: float) -> dict:
    """Runs ``kraftlog ... --json`` and returns its report (failing with stderr on a non-zero
    exit, or on a traceback printed on the way)."""
    done = subprocess.run([sys.executable, "-m", "cli", *args, "--json"], capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return json.loads(done.stdout)


def assert_ordered_latencies(figures: dict) -> None:
    assert set(figures) == LATENCY_KEYS
    assert 0 < figures["p50"] <= figures["p99"] <= figures["p999"] <= figures["max"]


def test_perf_e2e_reports_every_record_received_with_latencies(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic("perf-e2e", partitions=2)
        report = kraftlog_json(
            "perf", "e2e", "--topic", "perf-e2e", "--rate", "200", "--duration", "2", "--bootstrap", cluster.bootstrap, timeout=120
        )
    assert report["sent"] == 400
    assert report["acked"] == report["received"] == report["sent"]
    assert report["failed"] == report["lost"] == report["duplicates"] == 0
    assert report["acks"] == "all" and report["rate"] == 200
    assert_ordered_latencies(report["latency_ms"])
    assert_ordered_latencies(report["ack_latency_ms"])
    assert report["send_lag_ms_max"] >= 0
    stages = report["stages_ms"]
    assert 0 < stages["broker"]["p50"] <= stages["request"]["p50"], stages  # the leader says what it spent
    assert stages["network_and_grpc"]["p50"] > 0, stages


def test_perf_consume_of_a_topic_holding_fewer_records_reports_those(tmp_path) -> None:
    """Once every partition is read to its high watermark, `perf consume` reports what it read
    instead of failing after --timeout-ms without data (here a minute: the test's own timeout
    would end first)."""
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic("perf-consume", partitions=2)
        with Producer(cluster.bootstrap) as producer:
            for i in range(300):
                producer.send("perf-consume", b"v%d" % i, partition=i % 2)
            producer.flush()
        report = kraftlog_json("perf", "consume", "--topic", "perf-consume", "--num-records", "1000", "--timeout-ms", "60000",
                               "--bootstrap", cluster.bootstrap, timeout=50)
    assert report["records"] == 300 and report["records_per_sec"] > 0


@pytest.mark.parametrize("mode", ["kill", "pause", "shutdown"])
def test_perf_failover_reports_each_round_on_its_own_cluster(mode: str) -> None:
    # Replication factor 1: the faulted broker is its own successor once the controller has
    # taken leadership from it, so each round also covers restart (or SIGCONT) and rejoining.
    report = kraftlog_json(
        "perf", "failover", "--kills", "1", "--mode", mode, "--replication-factor", "1", "--rate", "100", "--round-timeout-s", "60",
        timeout=300,
    )
    assert (report["mode"], report["kills"], report["replication_factor"], report["min_insync_replicas"]) == (mode, 1, 1, 1)
    [round_] = report["rounds"]
    assert round_["number"] == 1
    assert round_["new_leader"] == round_["victim"]
    assert round_["new_epoch"] > round_["old_epoch"]
    assert report["failover_ms"] == {"p50": round_["failover_ms"], "p99": round_["failover_ms"], "max": round_["failover_ms"]}
    timeline = report["timeline_ms"]
    assert timeline["probe_acked"]["max"] == round(round_["failover_ms"], 1)
    if mode == "kill":  # the controller sees the session close, fences and commits: the nodes' logs say when
        assert 0 < timeline["noticed"]["max"] <= timeline["committed"]["max"] <= round_["failover_ms"], timeline
    assert round_["failover_ms"] > 0 and round_["producer_stall_ms"] > 0
    assert report["producer"]["acked"] > 0
    assert report["producer"]["failed"] == 0, report["producer"]["first_error"]


def test_perf_latency_reports_kraftlog_beside_the_grpc_floor(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        report = kraftlog_json("perf", "latency", "--count", "50", "--pause-ms", "1", "--peer", "none", "--bootstrap", cluster.bootstrap, timeout=120)
    assert report["count"] == 50 and report["record_size"] == 100 and report["pause_ms"] == 1
    for figures in ("kraftlog_ms", "floor_unary_ms", "floor_stream_ms"):
        assert_ordered_latencies(report[figures])
    assert "nats_jetstream_r3_ms" not in report


@pytest.mark.benchmark
def test_perf_latency_beside_nats_jetstream(tmp_path) -> None:
    """The side-by-side run of docs/performance.md (needs Debian's nats-server)."""
    from cli.nats_peer import nats_server_path

    if nats_server_path() is None:
        pytest.skip("nats-server is not installed: apt-get install nats-server")
    with local_cluster(tmp_path, controllers=3, brokers=3) as cluster:
        report = kraftlog_json("perf", "latency", "--count", "3000", "--bootstrap", cluster.bootstrap, timeout=600)
    print(json.dumps(report, indent=2))
    for figures in ("kraftlog_ms", "floor_unary_ms", "floor_stream_ms", "nats_jetstream_r3_ms"):
        assert_ordered_latencies(report[figures])
