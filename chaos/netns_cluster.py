"""A local cluster whose every controller and broker runs in a network namespace of its
own, listening and advertised on its own address. No proxies: clients in the root namespace
reach the nodes through the fabric, and faults are the fabric's rules
(``chaos.netns_faults``). The fabric is ``chaos.netns.Fabric`` (veth pairs on a bridge,
faults as ``tc`` rules), or with ``ClusterSettings.link_emulator`` the userspace link
emulator's (``chaos.netns_emulated.EmulatedFabric``: delays without netem).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from chaos.chaos_cluster import UNSAFE_FLAG, ClusterSettings
from chaos.clock_skew import with_clock_env
from chaos.netns import Fabric, in_namespace
from chaos.netns_emulated import EmulatedFabric
from server_common.local_cluster import READY_TIMEOUT_S, LocalCluster, Node, wait_ready


class NetnsCluster(LocalCluster):
    """LocalCluster with each node in its fabric namespace; ``network`` is the fabric (its
    ``heal_all`` removes every fault rule, as the proxy network's does)."""

    def __init__(self, data_dir: Path, nodes: list[Node], settings: ClusterSettings, fabric: Fabric | EmulatedFabric) -> None:
        super().__init__(data_dir, nodes)
        self.settings = settings
        self.fabric = fabric
        self.network = fabric

    @classmethod
    def build(cls, data_dir: Path, settings: ClusterSettings, fabric: Fabric | EmulatedFabric) -> NetnsCluster:
        """The layout (free ports, each node on its fabric address) and the node flags."""
        base = LocalCluster.create(Path(data_dir), settings.controllers, settings.brokers)
        nodes = [replace(n, host=fabric.address(n.name)) for n in base.nodes]
        cluster = cls(base.data_dir, nodes, settings, fabric)
        for node in cluster.nodes:
            node.extra_args = [f"--session-timeout-ms={settings.session_timeout_ms}"]
            if node.role == "broker":
                node.extra_args.append(f"--replica-lag-time-max-ms={settings.replica_lag_time_max_ms}")
                if settings.unsafe:
                    node.extra_args.append(f"{UNSAFE_FLAG}={settings.unsafe}")
        cluster.save()
        return cluster

    def command(self, node: Node) -> list[str]:
        return in_namespace(self.fabric.namespace(node.name), with_clock_env(self, node, super().command(node)))

    @property
    def client_bootstrap(self) -> str:
        return self.bootstrap

    def raft_links_of(self, controller_id: int) -> list[str]:
        """No Raft proxies here: isolate a controller with a namespace fault instead."""
        return []


@contextmanager
def netns_cluster(data_dir: Path, settings: ClusterSettings, progress) -> Iterator[NetnsCluster]:
    """A fabric and a NetnsCluster on it, started; every process killed and the fabric
    removed on the way out, whatever happens."""
    names = [f"controller-{i}" for i in range(1, settings.controllers + 1)] + [f"broker-{i}" for i in range(1, settings.brokers + 1)]
    fabric = (EmulatedFabric if settings.link_emulator else Fabric).create(names)
    try:
        cluster = NetnsCluster.build(data_dir, settings, fabric)
        progress(f"starting {settings.controllers} controllers and {settings.brokers} brokers in namespaces {fabric.tag}-* on {fabric.subnet}.0/24 ({fabric.kind}), data in {data_dir}")
        try:
            cluster.start()
            wait_ready(cluster, READY_TIMEOUT_S)
            yield cluster
        finally:
            for node in cluster.nodes:
                cluster.kill(node)
    finally:
        fabric.destroy()
