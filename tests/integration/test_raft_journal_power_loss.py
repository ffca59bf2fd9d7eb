"""The Raft journal's promise (docs/durability.md, "The metadata quorum"): with
``--raft-journal fsync`` a committed metadata entry survives a power failure of every
controller at once; with ``page-cache`` (pysyncobj's own behaviour) it does not, which is
what shows the test can fail. The controllers run in the power-loss test mode; after a
SIGKILL of all three their data directories are cut back to their last fsyncs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server_common import power_loss
from server_common.waiting import wait_for
from tests.cluster import local_cluster

pytestmark = pytest.mark.integration

TOPICS = ("orders", "payments", "audit")


@pytest.mark.parametrize("journal, survives", [("fsync", True), ("page-cache", False)])
def test_committed_topics_after_every_controller_loses_power(tmp_path: Path, journal: str, survives: bool) -> None:
    with local_cluster(tmp_path, brokers=1, controller_args=[f"--raft-journal={journal}", power_loss.FLAG]) as cluster:
        with cluster.controller_client() as client:
            for name in TOPICS:
                client.create_topic(name, 1, 1)  # returns once the entry is committed
        for node in cluster.controllers:
            cluster.kill(node)
        for node in cluster.controllers:
            power_loss.apply(cluster.data_dir / node.name, power_loss.plan(cluster.data_dir / node.name))
        for node in cluster.controllers:
            cluster.start_node(node)
        with cluster.controller_client() as client:
            wait_for(lambda: any(m.state == "leader" for m in client.describe_quorum()), 30, "a new active controller")
            # a one-element tuple: truthy even when no topic is known (the page-cache case)
            (known,) = wait_for(lambda: (set(client.describe_configs([])),), 30, "the controllers to answer")
    if survives:
        assert set(TOPICS) <= known, known
    else:
        assert not set(TOPICS) & known, known

