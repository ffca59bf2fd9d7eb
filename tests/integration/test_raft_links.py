"""Controller-to-controller (Raft) links through Toxiproxy-API proxies.

pysyncobj names peers by address, so a proxied link keeps the peer's identity and only
changes where the connection goes (``--raft-peer-address``). Of each pair, the node with the
larger address dials; its proxy forwards to the other node. Cutting every link of the active
controller isolates it: the other two elect a new active controller and accept writes; when
the links come back the old one rejoins as a follower.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server_common.local_cluster import HOST
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration


class RaftLinks:
    def __init__(self) -> None:
        from chaos.toxiproxy.launcher import start_toxiproxy

        self.server = start_toxiproxy(prefer_real=False)
        self.api = self.server.client()
        self.pairs: dict[frozenset[int], str] = {}

    def configure(self, cluster: TestCluster) -> None:
        from chaos.chaos_cluster import raft_dialers
        from chaos.network import raft_link

        dialers = raft_dialers(cluster.controllers)
        ports = iter(cluster.spare_ports(len(dialers)))
        for dialer, target in dialers:  # pysyncobj: only the larger address dials
            name = raft_link(dialer.node_id, target.node_id)
            listen = f"{HOST}:{next(ports)}"
            self.api.create(upstream=f"{target.host}:{target.raft_port}", name=name, listen=listen)
            dialer.extra_args += ["--raft-peer-address", f"{target.node_id}={listen}"]
            self.pairs[frozenset((dialer.node_id, target.node_id))] = name

    def set_links_of(self, node_id: int, enabled: bool) -> None:
        for pair, name in self.pairs.items():
            if node_id in pair:
                proxy = self.api.get_proxy(name)
                proxy.enable() if enabled else proxy.disable()


def quorum(cluster: TestCluster) -> dict[int, object]:
    """Each voter's own view of itself (state, lag), asked of every controller."""
    with cluster.controller_client() as client:
        return {m.controller_id: m for m in client.describe_quorum()}


def leaders(cluster: TestCluster) -> set[int]:
    return {node_id for node_id, member in quorum(cluster).items() if member.state == "leader"}


def test_cutting_the_active_controllers_raft_links_moves_the_quorum_and_heals(tmp_path: Path) -> None:
    links = RaftLinks()
    try:
        with local_cluster(tmp_path, brokers=1, configure=links.configure) as cluster:
            assert len(links.pairs) == 3
            cluster.create_topic("before-cut")
            isolated = next(iter(leaders(cluster)))
            links.set_links_of(isolated, enabled=False)
            # The other two elect at once (their links to the leader closed); the isolated one
            # steps down only after its leader fallback timeout, and a write it takes before
            # then cannot commit: wait for both.
            wait_for(lambda: (now := leaders(cluster)) and isolated not in now, 20, "a new leader among the other controllers, the isolated one stepped down")
            cluster.create_topic("during-cut")  # the majority side accepts writes
            links.set_links_of(isolated, enabled=True)

            def rejoined() -> bool:
                member = quorum(cluster)[isolated]
                return member.state == "follower" and member.lag == 0

            wait_for(rejoined, 30, f"controller {isolated} to rejoin as an up-to-date follower")
            from data_plane.client import Admin

            with Admin(cluster.bootstrap) as admin:
                assert {"before-cut", "during-cut"} <= set(admin.describe_topics(["before-cut", "during-cut"]))
    finally:
        links.server.stop()
