"""The local cluster's port layout: the stable ranges, moving taken ports, the base from the
environment, and the check that a port is taken (with real sockets)."""

from __future__ import annotations

import socket

import pytest

from cli.cluster_cmd import PORT_BASE_ENV, port_base
from server_common.local_cluster import HOST, MovedPort, free_ports, move_taken_ports, node_ports, port_taken, stable_nodes


def ports_by_node(nodes) -> dict[str, tuple[int, int]]:
    return {n.name: (n.port, n.raft_port) for n in nodes}


def test_stable_layout_gives_each_role_its_own_range():
    nodes = stable_nodes(controllers=3, brokers=3, port_base=9092)
    assert ports_by_node(nodes) == {
        "controller-1": (9192, 9292),
        "controller-2": (9193, 9293),
        "controller-3": (9194, 9294),
        "broker-1": (9092, 0),
        "broker-2": (9093, 0),
        "broker-3": (9094, 0),
    }
    assert [n.kafka_port for n in nodes] == [0, 0, 0, 9392, 9393, 9394]  # brokers' Kafka listeners (docs/kafka.md)


def test_stable_layout_moves_with_the_base_and_never_overlaps():
    nodes = stable_nodes(controllers=100, brokers=100, port_base=20000)
    ports = [port for _, _, port in node_ports(nodes)]
    assert len(ports) == len(set(ports)) == 400
    assert min(ports) == 20000 and max(ports) == 20399


@pytest.mark.parametrize(
    ("controllers", "brokers", "base", "message"),
    [(101, 3, 9092, "at most 100"), (3, 101, 9092, "at most 100"), (3, 3, 80, "out of range"), (3, 3, 65300, "out of range")],
)
def test_stable_layout_refuses_what_it_cannot_lay_out(controllers, brokers, base, message):
    with pytest.raises(ValueError, match=message):
        stable_nodes(controllers, brokers, base)


def test_only_taken_ports_move_and_replacements_avoid_the_layout():
    nodes = stable_nodes(controllers=2, brokers=2, port_base=9092)
    taken = {9092, 9293, 9393}
    # the spare ports on offer include ports of the layout itself: those must be skipped
    moved_nodes, moved = move_taken_ports(nodes, taken.__contains__, lambda n: [9093, 40001, 9192, 40002, 40003][:n])
    assert moved == [
        MovedPort("controller-2", "Raft", 9293, 40001),
        MovedPort("broker-1", "gRPC", 9092, 40002),
        MovedPort("broker-2", "Kafka", 9393, 40003),
    ]
    assert [n.kafka_port for n in moved_nodes if n.role == "broker"] == [9392, 40003]
    assert ports_by_node(moved_nodes) == {
        "controller-1": (9192, 9292),
        "controller-2": (9193, 40001),
        "broker-1": (40002, 0),
        "broker-2": (9093, 0),
    }
    assert "port 9092 (broker-1 gRPC) is in use by another process; broker-1 uses 40002 instead" == moved[1].describe()


def test_nothing_moves_when_every_port_is_free():
    nodes = stable_nodes(controllers=1, brokers=1, port_base=9092)
    assert move_taken_ports(nodes, lambda port: False, lambda n: pytest.fail("no spare port is needed")) == (nodes, [])


def test_port_taken_sees_a_listener_and_not_a_closed_socket():
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        assert port_taken(port)
    finally:
        listener.close()
    assert not port_taken(port)
    assert not port_taken(free_ports(1)[0])


@pytest.mark.parametrize(("value", "expected"), [(None, 9092), ("", 9092), ("20000", 20000), (" 21000 ", 21000), ("0", None)])
def test_port_base_from_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(PORT_BASE_ENV, raising=False)
    else:
        monkeypatch.setenv(PORT_BASE_ENV, value)
    assert port_base() == expected


def test_a_port_base_that_is_not_a_number_is_an_error_saying_what_to_give(monkeypatch):
    monkeypatch.setenv(PORT_BASE_ENV, "ninety")
    with pytest.raises(ValueError, match="is not a port: give the first broker port, such as 9092, or 0 for free ports"):
        port_base()


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    """A port an outgoing connection may take between the pick and the node's bind would keep
    the node from starting: picked ports stay below the range the OS gives connections."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = free_ports(50)
    assert len(set(ports)) == 50
    assert all(port < low for port in ports)
    assert not any(port_taken(port) for port in ports)


def test_spare_ports_avoid_every_port_a_node_binds(tmp_path, monkeypatch):
    """Negative control: a spare port on a broker's Kafka or metrics port would keep that
    broker from starting (a chaos proxy took it). The OS is made to offer the nodes' own
    ports first."""
    import server_common.local_cluster as local_cluster

    cluster = local_cluster.LocalCluster.create(tmp_path, controllers=1, brokers=2)
    cluster.nodes[1].metrics_port = free_ports(1)[0]
    bound = {port for _, _, port in node_ports(cluster.nodes)}
    assert {n.kafka_port for n in cluster.brokers} <= bound
    offered = sorted(bound) + free_ports(3)
    monkeypatch.setattr(local_cluster, "free_ports", lambda count: offered[:count])
    spare = cluster.spare_ports(3)
    assert len(spare) == 3 and not set(spare) & bound
