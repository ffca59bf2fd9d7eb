"""What durability costs, 3 brokers and 3 controllers on one machine (docs/durability.md):

    python -m pytest -m benchmark tests/integration/test_durability_benchmark.py -s

``test_produce_durability``: ``kraftlog perf produce`` RF=3 acks=all, 100-byte records,
against a cluster with the default ``--durability page-cache``, the same cluster with the
topic's ``flush.messages=1`` (each replica fsyncs every append, on its event loop), and one
with ``--durability fsync`` (group commit), in the same run. Goal: fsync keeps at least half
the page-cache throughput.

``test_controller_write_rate``: topics created one after another (each a committed metadata
entry), controllers with ``--raft-journal fsync`` (the default) against ``page-cache``.

The machine is shared: each figure is the best of ROUNDS runs, printed with the load average;
compare those of one run with each other; nothing here asserts a speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_plane.client import Admin
from tests.cluster import local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

RECORDS = 200_000
BATCH_RECORDS = 500
ROUNDS = 3  # each figure is the best of this many runs (the machine is shared)
TOPICS_CREATED = 60


def perf_produce(bootstrap: str, topic: str) -> float:
    """records/s of the best of ROUNDS ``kraftlog perf produce --acks all`` runs."""
    rates = []
    for _ in range(ROUNDS):
        out = subprocess.run(
            [sys.executable, "-m", "cli", "perf", "produce", "--topic", topic, "--num-records", str(RECORDS), "--acks", "all",
             "--batch-records", str(BATCH_RECORDS), "--bootstrap", bootstrap, "--json"],
            check=True, capture_output=True, text=True, timeout=600,
        )
        rates.append(json.loads(out.stdout)["records_per_sec"])
    return max(rates)


def test_produce_durability(tmp_path: Path) -> None:
    rates: dict[str, float] = {}
    for durability in ("page-cache", "fsync"):
        with local_cluster(tmp_path / durability, broker_args=[f"--durability={durability}"]) as cluster:
            cluster.create_topic("bench", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
            rates[f"--durability {durability}"] = perf_produce(cluster.bootstrap, "bench")
            if durability == "page-cache":
                cluster.create_topic("bench-flush", partitions=3, replication_factor=3,
                                     configs={"min.insync.replicas": "2", "flush.messages": "1"})
                rates["page-cache, flush.messages=1"] = perf_produce(cluster.bootstrap, "bench-flush")
    print(f"\nperf produce RF=3 acks=all, {RECORDS} x 100 B, batches of {BATCH_RECORDS} (load average {os.getloadavg()})")
    for name, rate in rates.items():
        print(f"  {name:32} {rate:12,.0f} records/s")
    print(f"  fsync / page-cache: {rates['--durability fsync'] / rates['--durability page-cache']:.2f}")
    assert all(rate > 0 for rate in rates.values()), rates


def test_controller_write_rate(tmp_path: Path) -> None:
    rates: dict[str, float] = {}
    for journal in ("page-cache", "fsync"):
        with local_cluster(tmp_path / journal, controller_args=[f"--raft-journal={journal}"], brokers=1) as cluster:
            with Admin(cluster.bootstrap) as admin:
                started = time.perf_counter()
                for i in range(TOPICS_CREATED):
                    admin.create_topics([(f"t{i}", 1, 1)])
                rates[journal] = TOPICS_CREATED / (time.perf_counter() - started)
    print(f"\ncontroller writes (topics created one at a time; load average {os.getloadavg()})")
    for name, rate in rates.items():
        print(f"  --raft-journal {name:12} {rate:8.1f} topics/s")
    assert all(rate > 0 for rate in rates.values()), rates
