"""Naming one node of a local cluster, and telling the ones that are down (no processes:
nodes that never started have pid 0)."""

from __future__ import annotations

import os

import pytest

from server_common.local_cluster import LocalCluster, stable_nodes


def cluster(tmp_path) -> LocalCluster:
    return LocalCluster(tmp_path, stable_nodes(2, 3, 20000))


def test_a_node_is_found_by_the_name_status_shows(tmp_path) -> None:
    node = cluster(tmp_path).node_named("broker-2")
    assert (node.role, node.node_id) == ("broker", 2)


def test_an_unknown_name_is_refused_with_the_valid_ones(tmp_path) -> None:
    with pytest.raises(ValueError) as refused:
        cluster(tmp_path).node_named("broker2")
    assert "no node 'broker2'" in str(refused.value)
    assert "controller-1, controller-2, broker-1, broker-2, broker-3" in str(refused.value)


def test_down_nodes_are_those_without_a_live_process_controllers_first(tmp_path) -> None:
    layout = cluster(tmp_path)
    layout.node("broker", 1).pid = os.getpid()  # a live process stands in for a running broker
    assert [n.name for n in layout.down_nodes()] == ["controller-1", "controller-2", "broker-2", "broker-3"]
