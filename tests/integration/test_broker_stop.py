"""A broker with many partitions stops cleanly after its controlled shutdown.

The failure this guards against: after "controlled shutdown complete" the broker's replica
fetchers kept fetching (a stop cancelled them once, and the fetch loop's timed waits could
swallow that cancel), so the process hung until it was killed and its next start had to
recover every log. Here a broker that follows a few hundred partitions is sent SIGTERM; it
must exit by itself with status 0 and leave the clean-shutdown marker, and its fetchers must
have ended when asked (not abandoned at the stop timeout). The deadline is generous: the
test is about stopping at all, not about speed on a shared machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_plane.storage.log_manager import CLEAN_SHUTDOWN
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_large_topics import REPLICATION_FACTOR, full_isr

pytestmark = pytest.mark.integration

TOPIC = "many"
PARTITIONS = 300
EXIT_DEADLINE_S = 90.0


def events(cluster: TestCluster, broker_id: int) -> list[str]:
    out = []
    for line in cluster.log_path(cluster.broker(broker_id)).read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line).get("event", ""))
        except ValueError:
            continue
    return out


@pytest.mark.timeout(300)
def test_broker_with_many_partitions_exits_cleanly_after_controlled_shutdown(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=REPLICATION_FACTOR)
        wait_for(lambda: full_isr(cluster, [TOPIC]), 120, "every partition in its full ISR")
        victim = cluster.broker(3)
        marker = cluster.data_dir / victim.name / CLEAN_SHUTDOWN
        assert not marker.exists(), "the marker must be gone while the broker runs"

        cluster.signal(victim, 15)  # SIGTERM: controlled shutdown, then stop
        process = cluster.processes[victim.name]
        wait_for(lambda: process.poll() is not None, EXIT_DEADLINE_S, f"{victim.name} to exit after SIGTERM")

        said = events(cluster, victim.node_id)
        assert process.returncode == 0, f"{victim.name} exited with {process.returncode}"
        assert "controlled shutdown complete" in said
        assert "replica fetchers stopped" in said, "fetchers must end when asked"
        assert "replica fetchers did not stop in time; shutting down without them" not in said
        assert "broker stopped cleanly" in said
        assert marker.exists(), "a clean stop leaves the clean-shutdown marker"
