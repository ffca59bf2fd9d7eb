"""A local cluster wired for faults: every link through a Toxiproxy proxy, short timeouts so
faults play out within a run, and the unsafe testing switch for negative controls.

Broker-to-controller links always go through proxies (a broker reaches controllers at the
grpc addresses in ``--controllers``), and so do controller-to-controller Raft links (the
dialing controller's ``--raft-peer-address``). Client and replication links go through proxies when
the broker offers ``--advertised-address`` and ``--peer-address``; without them, scenarios
that fault those links are not runnable (``ChaosCluster.missing_flags`` says why).
"""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from chaos.clock_skew import with_clock_env
from chaos.network import Network, client_link, controller_link, raft_link, replication_link
from server_common import power_loss
from server_common.local_cluster import HOST, READY_TIMEOUT_S, LocalCluster, Node, wait_ready

ADVERTISED_FLAG = "--advertised-address"
PEER_FLAG = "--peer-address"
UNSAFE_FLAG = "--unsafe-testing"
RAFT_PEER_FLAG = "--raft-peer-address"
FAULT_INJECTION_FLAG = "--storage-fault-injection"
DURABILITY_FLAG = "--durability"


@dataclass(frozen=True)
class ClusterSettings:
    """How the cluster under test runs; short timeouts so a fault's effect shows within seconds."""

    controllers: int = 3
    brokers: int = 3
    session_timeout_ms: int = 3000
    replica_lag_time_max_ms: int = 3000
    unsafe: str | None = None  # an --unsafe-testing behaviour, for negative controls
    secure: bool = False  # mutual TLS everywhere and encrypted Raft links, as `cluster up --secure` (proxies forward the TLS bytes)
    controller_unsafe: str | None = None  # the controllers' --unsafe-testing behaviour (elect-outside-isr-elr)
    broker_disk_mb: int | None = None  # each broker's data dir a tmpfs of this size (root only): a real full disk
    storage_fault_injection: bool = False  # brokers fail appends or rolls with EIO on request (--storage-fault-injection)
    durability: str = "page-cache"  # the brokers' --durability (docs/durability.md)
    raft_journal: str = "fsync"  # the controllers' --raft-journal
    namespaces: bool = False  # each node in a network namespace of its own (chaos.netns_cluster), no proxies
    link_emulator: bool = False  # with namespaces: joined through the userspace link emulator (delays without netem)


@cache
def broker_flags() -> frozenset[str]:
    """The command-line flags this checkout's broker accepts."""
    from data_plane.broker import config

    parser = argparse.ArgumentParser(add_help=False)
    config.add_arguments(parser)
    return frozenset(flag for action in parser._actions for flag in action.option_strings)


def raft_dialers(controllers: list[Node]) -> list[tuple[Node, Node]]:
    """(dialer, target) for each pair of voters: pysyncobj lets only the node whose Raft
    address ("host:port", compared as strings) is the larger connect, so that pair's proxy
    forwards to the other node and the route override goes on the dialer."""
    address = {c.node_id: f"{c.host}:{c.raft_port}" for c in controllers}
    return [(a, b) for a in controllers for b in controllers if address[a.node_id] > address[b.node_id]]


class ChaosCluster(LocalCluster):
    """LocalCluster whose brokers reach controllers, peers and clients through ``network``."""

    def __init__(self, data_dir: Path, nodes: list[Node], settings: ClusterSettings, network: Network) -> None:
        super().__init__(data_dir, nodes, secure=settings.secure)
        self.settings = settings
        self.network = network
        self.proxied_clients = {ADVERTISED_FLAG, PEER_FLAG} <= broker_flags()
        self._controller_proxies: dict[int, str] = {}  # broker id -> its --controllers value
        self._raft_pairs: dict[str, frozenset[int]] = {}  # raft link name -> the two controller ids

    @classmethod
    def build(cls, data_dir: Path, settings: ClusterSettings, network: Network) -> ChaosCluster:
        """Lays out a fresh cluster and its proxies (nothing started yet)."""
        base = LocalCluster.create(Path(data_dir), settings.controllers, settings.brokers, secure=settings.secure)
        cluster = cls(base.data_dir, base.nodes, settings, network)
        cluster._add_links()
        return cluster

    @staticmethod
    def missing_flags(settings: ClusterSettings, needs_client_links: bool) -> list[str]:
        """Broker flags a scenario needs that this broker does not have."""
        wanted = ({ADVERTISED_FLAG, PEER_FLAG} if needs_client_links else set()) | ({UNSAFE_FLAG} if settings.unsafe else set())
        wanted |= {FAULT_INJECTION_FLAG} if settings.storage_fault_injection else set()
        wanted |= {DURABILITY_FLAG} if settings.durability != "page-cache" else set()
        return sorted(wanted - broker_flags())

    def _add_links(self) -> None:
        brokers, controllers = self.brokers, self.controllers
        dialers = raft_dialers(controllers)
        ports = iter(self.spare_ports(len(brokers) * (len(controllers) + len(brokers)) + len(dialers)))
        for b in brokers:
            voters = []
            for c in controllers:
                listen = self.network.add_link(controller_link(b.node_id, c.node_id), f"{HOST}:{next(ports)}", c.address)
                voters.append(f"{c.node_id}@{c.host}:{c.raft_port}:{listen.rpartition(':')[2]}")
            self._controller_proxies[b.node_id] = ",".join(voters)
            args = [f"--session-timeout-ms={self.settings.session_timeout_ms}", f"--replica-lag-time-max-ms={self.settings.replica_lag_time_max_ms}"]
            if self.proxied_clients:
                args.append(f"{ADVERTISED_FLAG}={self.network.add_link(client_link(b.node_id), f'{HOST}:{next(ports)}', b.address)}")
            if self.settings.unsafe:
                args.append(f"{UNSAFE_FLAG}={self.settings.unsafe}")
            if self.settings.storage_fault_injection:
                args.append(FAULT_INJECTION_FLAG)
            if self.settings.durability != "page-cache":
                args.append(f"{DURABILITY_FLAG}={self.settings.durability}")
            if power_loss.FLAG in broker_flags():
                args.append(power_loss.FLAG)  # every node keeps a ledger, so a power-loss fault can cut it
            b.extra_args = args
        if self.proxied_clients:
            for follower in brokers:
                for leader in brokers:
                    if follower is not leader:
                        name = replication_link(follower.node_id, leader.node_id)
                        listen = self.network.add_link(name, f"{HOST}:{next(ports)}", leader.address)
                        follower.extra_args.append(f"{PEER_FLAG}={leader.node_id}={listen}")
        for c in controllers:
            c.extra_args = [f"--session-timeout-ms={self.settings.session_timeout_ms}", power_loss.FLAG,
                            f"--raft-journal={self.settings.raft_journal}"]
            if self.settings.controller_unsafe:
                c.extra_args.append(f"{UNSAFE_FLAG}={self.settings.controller_unsafe}")
        for dialer, target in dialers:
            name = raft_link(dialer.node_id, target.node_id)
            listen = self.network.add_link(name, f"{HOST}:{next(ports)}", f"{target.host}:{target.raft_port}")
            dialer.extra_args.append(f"{RAFT_PEER_FLAG}={target.node_id}={listen}")
            self._raft_pairs[name] = frozenset((dialer.node_id, target.node_id))
        self.save()

    def data_dir_of(self, broker: Node) -> Path:
        return self.data_dir / broker.name

    def mount_broker_disks(self) -> None:
        """A tmpfs of ``broker_disk_mb`` as each broker's data directory, so that filling it
        gives the broker a real ENOSPC (the ``disk-full`` fault). Needs root; the contents go
        with ``unmount_broker_disks`` at the end of the run (the logs stay: they are elsewhere)."""
        for broker in self.brokers:
            path = self.data_dir_of(broker)
            path.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.settings.broker_disk_mb}m", "tmpfs", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                self.unmount_broker_disks()
                raise RuntimeError(f"cannot mount a tmpfs as {path} ({done.stderr.strip()}): the disk-full scenario needs root")

    def unmount_broker_disks(self) -> None:
        for broker in self.brokers:
            subprocess.run(["umount", "-l", str(self.data_dir_of(broker))], capture_output=True)

    def raft_links_of(self, controller_id: int) -> list[str]:
        """The Raft links between controller ``controller_id`` and every other voter, sorted:
        cutting them all isolates it from the quorum while brokers still reach it."""
        return sorted(name for name, pair in self._raft_pairs.items() if controller_id in pair)

    def command(self, node: Node) -> list[str]:
        """The LocalCluster command, with a broker's controllers behind its proxies."""
        command = super().command(node)
        if node.role == "broker":
            command[command.index("--controllers") + 1] = self._controller_proxies[node.node_id]
        return with_clock_env(self, node, command)

    @property
    def client_bootstrap(self) -> str:
        """Where clients start: the client proxies when brokers advertise them."""
        if not self.proxied_clients:
            return self.bootstrap
        return ",".join(self.network.proxies[client_link(b.node_id)].listen for b in self.brokers)

    @property
    def controller_endpoints(self) -> str:
        return ",".join(f"{c.node_id}@{c.host}:{c.raft_port}:{c.port}" for c in self.controllers)

    def start_and_wait(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.start()
        wait_ready(self, timeout_s)
