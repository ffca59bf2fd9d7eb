"""The cluster's links routed through Toxiproxy, and the network faults applied to them.

Every link that can be faulted is a Toxiproxy proxy with a fixed listen port, named for the
two ends so a schedule can say which one to break:

* ``client-B``: clients to broker B (B advertises this address),
* ``replication-F-L``: follower broker F fetching from leader broker L,
* ``controller-B-C``: broker B to controller C (heartbeats, registration, metadata),
* ``raft-A-B``: controller A's Raft connection to controller B (A dials: of each pair of
  voters pysyncobj lets only the one with the larger address connect, and the connection
  carries the pair's traffic both ways).

Faults go through the ``toxiproxy-python`` client, so the same code drives a real
``toxiproxy-server`` or ``chaos.toxiproxy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.toxiproxy import ToxiproxyHandle

if TYPE_CHECKING:
    import toxiproxy

# Toxic types with the attributes Toxiproxy documents for each (the stream is separate).
TOXIC_TYPES = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data")


def client_link(broker: int) -> str:
    return f"client-{broker}"


def replication_link(follower: int, leader: int) -> str:
    return f"replication-{follower}-{leader}"


def controller_link(broker: int, controller: int) -> str:
    return f"controller-{broker}-{controller}"


def raft_link(dialer: int, target: int) -> str:
    return f"raft-{dialer}-{target}"


class Network:
    """The proxies of one cluster on one Toxiproxy server."""

    def __init__(self, handle: ToxiproxyHandle) -> None:
        self.handle = handle
        self.server = handle.client()
        self.proxies: dict[str, toxiproxy.Proxy] = {}
        self._toxic_count = 0

    def add_link(self, name: str, listen: str, upstream: str) -> str:
        """Creates the proxy ``name`` listening on ``listen``; returns the listen address."""
        assert name not in self.proxies, f"link {name} exists"
        self.proxies[name] = self.server.create(upstream=upstream, name=name, listen=listen, enabled=True)
        return listen

    def links(self, prefix: str = "") -> list[str]:
        """Link names starting with ``prefix``, sorted (so a seeded choice is replayable)."""
        return sorted(name for name in self.proxies if name.startswith(prefix))

    def add_toxic(self, link: str, toxic_type: str, attributes: dict[str, int], stream: str = "downstream") -> str:
        """Adds a toxic to one direction of a link; returns its name (to remove it alone)."""
        assert toxic_type in TOXIC_TYPES, f"unknown toxic {toxic_type}"
        self._toxic_count += 1
        name = f"{toxic_type}-{stream}-{self._toxic_count}"
        self.proxies[link].add_toxic(type=toxic_type, stream=stream, name=name, attributes=attributes)
        return name

    def remove_toxic(self, link: str, name: str) -> None:
        self.proxies[link].destroy_toxic(name)

    def cut(self, link: str) -> None:
        """Drops the link's connections and refuses new ones (Toxiproxy's disabled proxy)."""
        self.proxies[link].disable()

    def restore(self, link: str) -> None:
        self.proxies[link].enable()

    def heal_all(self) -> None:
        """Every proxy enabled and every toxic gone (Toxiproxy's POST /reset)."""
        assert self.server.reset(), "Toxiproxy refused POST /reset"
        for proxy in self.proxies.values():
            proxy.enabled = True
