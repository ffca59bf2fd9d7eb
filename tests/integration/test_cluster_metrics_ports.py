"""``kraftlog cluster up --metrics``: every node of a local cluster serves Prometheus metrics
on a port that ``cluster status`` shows and that a restart keeps."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_local_cluster import cleanup, kraftlog
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration


def test_cluster_up_with_metrics_gives_every_node_a_metrics_port(tmp_path):
    data_dir = tmp_path / "cluster"
    with cleanup(data_dir):
        started = kraftlog("cluster", "up", "--detach", "--metrics", "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir), base=0)
        assert started.returncode == 0, started.stdout + started.stderr
        status = json.loads(kraftlog("cluster", "status", "--json", "--data-dir", str(data_dir), base=0).stdout)
        ports = {node["name"]: node["metrics_port"] for node in status["nodes"]}
        assert set(ports) == {"controller-1", "broker-1", "broker-2"} and all(ports.values()), ports
        assert len(set(ports.values())) == 3
        for name, port in ports.items():
            families = scrape(port)
            assert value(families, "python_info") is not None, name
            if name.startswith("broker"):
                assert "kraftlog_partitions" in families, name
        table = kraftlog("cluster", "status", "--data-dir", str(data_dir), base=0).stdout
        assert "METRICS PORT" in table and str(ports["broker-2"]) in table

        assert kraftlog("cluster", "down", "--data-dir", str(data_dir), base=0).returncode == 0
        restarted = kraftlog("cluster", "up", "--detach", "--data-dir", str(data_dir), base=0)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert value(scrape(ports["broker-1"]), "python_info") is not None  # the recorded port, without --metrics again
