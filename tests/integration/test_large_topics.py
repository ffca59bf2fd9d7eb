"""Creating large topics must not take the cluster offline (issue 9, problem 6).

Three controllers and three brokers as real processes. While topics totalling
``PARTITIONS_TOTAL`` partitions at replication factor 3 are created, a watcher polls a
broker's metadata and the controllers' view of the brokers; the test fails if any broker is
fenced at any moment (in a poll or in any controller's or broker's log) or if any partition a
client can see has no leader. A small topic created first stands for the existing traffic
that an outage would take down. Afterwards every partition has its full ISR.

The soak variant creates 2 x 5,000 partitions.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from cli.local_cluster import wait_for
from data_plane.client import Admin
from metadata_quorum.controller_client import ControllerClient
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration]

REPLICATION_FACTOR = 3


class MetadataWatcher:
    """Polls metadata in a thread until stopped; keeps every problem it saw."""

    def __init__(self, cluster: TestCluster) -> None:
        self.cluster = cluster
        self.problems: list[str] = []
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MetadataWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        with Admin(self.cluster.bootstrap) as admin, self.cluster.controller_client() as controllers:
            while not self._stop.is_set():
                self._poll(admin, controllers)
                self._stop.wait(0.25)

    def _poll(self, admin: Admin, controllers) -> None:
        try:
            topics = admin.describe_topics()
            cluster = controllers.describe_cluster()
        except Exception as exc:  # a poll that cannot be answered is itself an outage
            self.problems.append(f"metadata poll failed: {exc}")
            return
        self.polls += 1
        fenced = [b.endpoint.broker_id for b in cluster.brokers if b.endpoint.fenced]
        if fenced:
            self.problems.append(f"brokers {fenced} fenced at metadata offset {cluster.metadata_offset}")
        for name, topic in topics.items():
            leaderless = [n for n, p in topic.partitions.items() if p.leader < 0]
            if leaderless:
                self.problems.append(f"{len(leaderless)} partitions of {name} without a leader, e.g. {leaderless[:5]}")


def fencing_log_lines(cluster: TestCluster) -> list[str]:
    """Every fencing event in any node's JSON log."""
    out = []
    for node in cluster.nodes:
        for line in cluster.log_path(node).read_text(errors="replace").splitlines():
            try:
                event = json.loads(line).get("event", "")
            except ValueError:
                continue
            if event in ("broker fenced", "fenced") or event.startswith("fencing broker"):
                out.append(f"{node.name}: {line}")
    return out


def full_isr(cluster: TestCluster, names: list[str]) -> bool:
    with Admin(cluster.bootstrap) as admin:
        topics = admin.describe_topics(names)
    return all(len(p.isr) == REPLICATION_FACTOR for t in topics.values() for p in t.partitions.values())


def create_large_topics(tmp_path: Path, topic_count: int, partitions_per_topic: int) -> None:
    with local_cluster(tmp_path, controllers=3, brokers=3) as cluster:
        cluster.create_topic("canary", partitions=3, replication_factor=REPLICATION_FACTOR)
        names = [f"big-{i}" for i in range(1, topic_count + 1)]
        # A create is not idempotent: give it time rather than retry it after a client timeout.
        creator = ControllerClient(",".join(c.address for c in cluster.controllers), timeout_s=120, rpc_timeout_s=60)
        with MetadataWatcher(cluster) as watcher, creator as client:
            started = time.monotonic()
            for name in names:
                client.create_topic(name, partitions_per_topic, REPLICATION_FACTOR)
            created_s = time.monotonic() - started
            wait_for(lambda: full_isr(cluster, ["canary", *names]), 120, "every partition in its full ISR")
            settled_s = time.monotonic() - started
            polls_before = watcher.polls
            wait_for(lambda: watcher.polls >= polls_before + 4, 30, "a few more metadata polls after settling")
        print(f"created {topic_count} x {partitions_per_topic} partitions in {created_s:.1f} s, full ISR after {settled_s:.1f} s, {watcher.polls} polls")
        assert watcher.polls > 0
        assert not watcher.problems, "\n".join(watcher.problems[:20])
        assert not fencing_log_lines(cluster), "\n".join(fencing_log_lines(cluster)[:20])


@pytest.mark.timeout(240)
def test_topics_totalling_5000_partitions_fence_no_broker(tmp_path: Path) -> None:
    create_large_topics(tmp_path, topic_count=2, partitions_per_topic=2500)


@pytest.mark.soak
@pytest.mark.timeout(900)
def test_topics_totalling_20000_partitions_fence_no_broker(tmp_path: Path) -> None:
    create_large_topics(tmp_path, topic_count=4, partitions_per_topic=5000)
