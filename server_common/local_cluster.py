"""Start, stop and fault a local cluster of separate controller and broker processes.

Used by ``kraftlog cluster up/down/status``, by the integration tests and by the chaos
harness, so all three run the cluster the same way (it lives here, below ``cli`` and
``chaos``, so that both use it without importing each other). ``<data_dir>/cluster.json`` records the
layout (ids, roles, addresses, pids), so a second ``cluster up`` on the same data dir
restarts the same cluster with its data and ports, and other commands find the bootstrap
addresses.

Ports: ``kraftlog cluster up`` asks for the stable layout (``stable_nodes``: brokers from
9092, controllers from 9192, their Raft ports from 9292) so that documentation and scripts
can name ``127.0.0.1:9092``; a port someone else holds is replaced by a free one and
reported. Tests, the chaos harness and throwaway benchmark clusters ask for free ports
(``port_base=None``), so they never collide with a developer's cluster or with each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kraftlog_proto import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc
from server_common.channel_pool import open_channel
from server_common.cluster_identity import derived_cluster_id
from server_common.tls import channel_credentials
from server_common.tls_certs import ADMIN_CLIENT, RAFT_SECRET_FILE, SECURE_DIR, write_cluster_identities
from server_common.waiting import GaveUp, wait_for

CLUSTER_FILE = "cluster.json"
SECURE_CLIENT_CONFIG = "client-secure.json"  # what `cluster up --secure` writes for the CLI and clients
HOST = "127.0.0.1"
DEFAULT_PORT_BASE = 9092  # Kafka's broker port; broker N listens on base + N - 1
CONTROLLER_PORT_OFFSET = 100  # controller N's gRPC port is base + 100 + N - 1 (9192, 9193, ...)
RAFT_PORT_OFFSET = 200  # controller N's Raft port is base + 200 + N - 1 (9292, 9293, ...)
KAFKA_PORT_OFFSET = 300  # broker N's Kafka listener is base + 300 + N - 1 (9392, 9393, ...; docs/kafka.md)
NODES_PER_ROLE_MAX = 100  # so that one role's ports never run into the next role's range
PICKED_PORT_MIN = 10000  # free ports for tests and throwaway clusters come from here up to the ephemeral range
READY_TIMEOUT_S = 60.0  # a cluster whose brokers are not all registered and unfenced by then has failed to start


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now, drawn at random from below the OS's ephemeral range
    (``ip_local_port_range``): a port picked there is never handed to an outgoing connection
    (every client connection of the test process and of the nodes takes one) in the moment
    between picking it and the node binding it. Held together while checked, so distinct."""
    low = _ephemeral_low() - 1
    candidates = random.sample(range(PICKED_PORT_MIN, low), low - PICKED_PORT_MIN) if low - PICKED_PORT_MIN > 10 * count else []
    held: list[socket.socket] = []
    try:
        for port in candidates:
            if len(held) == count:
                break
            s = socket.socket()
            try:
                s.bind((HOST, port))
            except OSError:
                s.close()
                continue
            held.append(s)
        while len(held) < count:  # no room below the ephemeral range: the OS picks
            s = socket.socket()
            s.bind((HOST, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the range the OS gives outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_taken(port: int) -> bool:
    """Whether a server could not bind ``HOST:port`` now. SO_REUSEADDR as the brokers' and
    controllers' servers set it, so connections of a stopped cluster still in TIME_WAIT do not
    count, while any listener (on this address or on all addresses) does."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


@dataclass
class Node:
    node_id: int
    role: str  # "controller" or "broker"
    host: str
    port: int  # gRPC port
    raft_port: int = 0  # controllers only
    pid: int = 0
    extra_args: list[str] = field(default_factory=list)
    metrics_port: int = 0  # Prometheus /metrics (cluster up --metrics); 0: off
    kafka_port: int = 0  # brokers: Kafka's wire protocol (--kafka-listen, docs/kafka.md); 0: off
    joining: bool = False  # a controller being added: started with --join, not yet among the voters (--quorum)

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class MovedPort:
    """A port of the stable layout that was taken, and the free one used instead."""

    node: str  # "broker-1", "controller-2"
    purpose: str  # "gRPC" or "Raft"
    wanted: int
    used: int

    def describe(self) -> str:
        return f"port {self.wanted} ({self.node} {self.purpose}) is in use by another process; {self.node} uses {self.used} instead"


def stable_nodes(controllers: int, brokers: int, port_base: int) -> list[Node]:
    """The stable layout: broker N on ``port_base + N - 1``, controller N's gRPC port 100
    above and its Raft port 200 above that, so that each role has a range of its own."""
    if controllers > NODES_PER_ROLE_MAX or brokers > NODES_PER_ROLE_MAX:
        raise ValueError(f"stable ports allow at most {NODES_PER_ROLE_MAX} controllers and {NODES_PER_ROLE_MAX} brokers: set KRAFTLOG_PORT_BASE=0 for free ports")
    highest = port_base + KAFKA_PORT_OFFSET + NODES_PER_ROLE_MAX - 1
    if port_base < 1024 or highest > 65535:
        raise ValueError(f"port base {port_base} is out of range: give one from 1024 to {65535 - KAFKA_PORT_OFFSET - NODES_PER_ROLE_MAX + 1} (or 0 for free ports)")
    nodes = [
        Node(i, "controller", HOST, port_base + CONTROLLER_PORT_OFFSET + i - 1, raft_port=port_base + RAFT_PORT_OFFSET + i - 1)
        for i in range(1, controllers + 1)
    ]
    return nodes + [Node(i, "broker", HOST, port_base + i - 1, kafka_port=port_base + KAFKA_PORT_OFFSET + i - 1)
                     for i in range(1, brokers + 1)]


def node_ports(nodes: Iterable[Node]) -> list[tuple[Node, str, int]]:
    """Every port the nodes bind: (node, "gRPC" or "Raft", port)."""
    ports = []
    for node in nodes:
        ports.append((node, "gRPC", node.port))
        if node.raft_port:
            ports.append((node, "Raft", node.raft_port))
        if node.metrics_port:
            ports.append((node, "metrics", node.metrics_port))
        if node.kafka_port:
            ports.append((node, "Kafka", node.kafka_port))
    return ports


def move_taken_ports(nodes: list[Node], taken: Callable[[int], bool], spare: Callable[[int], list[int]]) -> tuple[list[Node], list[MovedPort]]:
    """The nodes with every ``taken`` port replaced by one of ``spare(n)`` (a port no node
    wants), and what moved. The other ports stay where the layout put them."""
    wanted = {port for _, _, port in node_ports(nodes)}
    moving = [(node, purpose, port) for node, purpose, port in node_ports(nodes) if taken(port)]
    if not moving:
        return nodes, []
    replacements = iter([p for p in spare(len(moving) + len(wanted)) if p not in wanted][: len(moving)])
    moved = [MovedPort(node.name, purpose, port, next(replacements)) for node, purpose, port in moving]
    new_port = {(m.node, m.purpose): m.used for m in moved}
    result = [
        replace(n, port=new_port.get((n.name, "gRPC"), n.port), raft_port=new_port.get((n.name, "Raft"), n.raft_port),
                kafka_port=new_port.get((n.name, "Kafka"), n.kafka_port))
        for n in nodes
    ]
    return result, moved


def free_nodes(controllers: int, brokers: int) -> list[Node]:
    """A layout on free ports (``free_ports``; for tests and throwaway clusters)."""
    ports = free_ports(2 * controllers + 2 * brokers)
    nodes = [Node(i + 1, "controller", HOST, ports[2 * i + 1], raft_port=ports[2 * i]) for i in range(controllers)]
    return nodes + [Node(i + 1, "broker", HOST, ports[2 * controllers + i], kafka_port=ports[2 * controllers + brokers + i])
                    for i in range(brokers)]


def killed_message(killed: list[str]) -> str:
    return f"sent SIGKILL to {', '.join(killed)}" if killed else "every process had exited already"


class StopInterrupted(KeyboardInterrupt):
    """An interrupt (a second Ctrl-C) came while the cluster stopped in order: every process
    still running got SIGKILL. Still a KeyboardInterrupt, so callers that do not look for it
    stop as they would on any interrupt."""

    def __init__(self, killed: list[str]) -> None:
        super().__init__(killed_message(killed))
        self.killed = killed


class LocalCluster:
    """A cluster whose processes are children of (or recorded by) this process."""

    def __init__(self, data_dir: Path, nodes: list[Node], log_format: str = "json", secure: bool = False, cluster_id: str | None = None,
                 last_controller_id: int = 0) -> None:
        """``secure``: every node serves mutual TLS (client certificates required) and
        refuses to start without its certificate; the controllers' Raft links are encrypted
        and authenticated with a shared secret. The files live in ``<data_dir>/tls``."""
        self.data_dir = Path(data_dir)
        self.nodes = nodes
        self.log_format = log_format
        self.secure = secure
        self.processes: dict[str, subprocess.Popen] = {}
        self.moved_ports: list[MovedPort] = []  # stable ports that were taken (set by create)
        # Given to every controller: a quorum whose voters change keeps its id (server_common/cluster_identity.py).
        self.cluster_id = cluster_id or derived_cluster_id((c.node_id, f"{c.host}:{c.raft_port}") for c in self.controllers)
        self.last_controller_id = max([last_controller_id, *(c.node_id for c in self.controllers)])  # ids are never reused

    # ------------------------------------------------------------------ layout

    @classmethod
    def create(cls, data_dir: Path, controllers: int = 3, brokers: int = 3, log_format: str = "json", port_base: int | None = None,
               secure: bool = False) -> "LocalCluster":
        """Reuse the layout in ``data_dir/cluster.json`` when there is one (its ports too),
        else make a new one: the stable layout from ``port_base`` with taken ports moved (see
        ``moved_ports``), or free ports when ``port_base`` is None. A new ``secure`` cluster
        gets a throwaway CA, a certificate per node and for the ``admin`` client, a Raft
        secret and the client config (``SECURE_CLIENT_CONFIG``)."""
        data_dir = Path(data_dir)
        existing = data_dir / CLUSTER_FILE
        if existing.exists():
            cluster = cls.load(data_dir, log_format)
            if secure and not cluster.secure:
                raise ValueError(f"the cluster in {data_dir} was created without --secure and stays plaintext: "
                                 f"start a secure one in a new --data-dir")
            return cluster
        moved: list[MovedPort] = []
        if port_base is None:
            nodes = free_nodes(controllers, brokers)
        else:
            nodes, moved = move_taken_ports(stable_nodes(controllers, brokers, port_base), port_taken, free_ports)
        cluster = cls(data_dir, nodes, log_format, secure)
        cluster.moved_ports = moved
        if secure:
            cluster.write_security_files()
        cluster.save()
        return cluster

    @classmethod
    def load(cls, data_dir: Path, log_format: str = "json") -> "LocalCluster":
        path = Path(data_dir) / CLUSTER_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no cluster at {data_dir}: start one with kraftlog cluster up --data-dir {data_dir}") from None
        nodes = [Node(**n) for n in raw["nodes"]]
        return cls(Path(data_dir), nodes, log_format, raw.get("secure", False), raw.get("cluster_id"), raw.get("last_controller_id", 0))

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        layout = {
            "bootstrap": self.bootstrap,
            "kafka_bootstrap": self.kafka_bootstrap,
            "controllers": self.quorum,
            "nodes": [asdict(n) for n in self.nodes],
            "secure": self.secure,
            "cluster_id": self.cluster_id,
            "last_controller_id": self.last_controller_id,
        }
        tmp = self.data_dir / (CLUSTER_FILE + ".tmp")
        tmp.write_text(json.dumps(layout, indent=2) + "\n")
        os.replace(tmp, self.data_dir / CLUSTER_FILE)

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "controller"]

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "broker"]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def kafka_bootstrap(self) -> str:
        """Where Kafka clients start (bootstrap.servers); empty when no broker has a Kafka listener."""
        return ",".join(f"{b.host}:{b.kafka_port}" for b in self.brokers if b.kafka_port)

    @property
    def quorum(self) -> str:
        """The voters, as --quorum and the brokers' --controllers take them (not a joining controller)."""
        return ",".join(f"{c.node_id}@{c.host}:{c.raft_port}:{c.port}" for c in self.controllers if not c.joining)

    # ------------------------------------------------------------------ membership

    def new_controller(self) -> Node:
        """A controller to add: the next id no controller has had, free ports, recorded as
        joining (it starts with --join and is not in --quorum until ``joined``)."""
        ports = self.spare_ports(2)
        self.last_controller_id += 1
        node = Node(self.last_controller_id, "controller", HOST, ports[0], raft_port=ports[1], joining=True)
        self.nodes.append(node)
        self.save()
        return node

    def joined(self, node: Node) -> None:
        """``node`` became a voter: from now on it is in --quorum (restarts use the new voter set)."""
        node.joining = False
        self.save()

    def forget(self, node: Node) -> None:
        """``node`` left the quorum (its directory stays, for its logs)."""
        self.nodes.remove(node)
        self.processes.pop(node.name, None)
        self.save()

    def taken_ports(self) -> list[str]:
        """The recorded ports another process holds now (before a restart: the cluster's own
        processes are not running, so any holder is a stranger)."""
        return self.taken_ports_of(self.nodes)

    def spare_ports(self, count: int) -> list[int]:
        """``count`` free ports that no node uses for anything (gRPC, Raft, Kafka, metrics): the
        nodes' ports were picked and released earlier, so they may be handed out again before
        the nodes bind them (a proxy on a broker's Kafka port keeps that broker from starting)."""
        taken = {port for _, _, port in node_ports(self.nodes)}
        return [port for port in free_ports(count + len(taken)) if port not in taken][:count]

    def give_metrics_ports(self) -> None:
        """A metrics port for every node that has none (free ports, recorded in cluster.json
        so that a restart serves metrics on the same ones)."""
        bare = [n for n in self.nodes if not n.metrics_port]
        for node, port in zip(bare, self.spare_ports(len(bare))):
            node.metrics_port = port
        self.save()

    def node(self, role: str, node_id: int) -> Node:
        for n in self.nodes:
            if n.role == role and n.node_id == node_id:
                return n
        raise KeyError(f"no {role} {node_id} in this cluster")

    def node_named(self, name: str) -> Node:
        """The node ``cluster status`` calls ``name`` ("broker-2"); a ValueError listing the
        valid names for any other."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise ValueError(f"no node {name!r} in the cluster in {self.data_dir}: give one of {', '.join(n.name for n in self.nodes)}")

    def down_nodes(self) -> list[Node]:
        """The nodes not running now, controllers first (the order they start in)."""
        return [n for n in self.controllers + self.brokers if not self.is_running(n)]

    def taken_ports_of(self, nodes: Iterable[Node]) -> list[str]:
        """The ports of ``nodes`` another process holds now (the nodes themselves are down,
        so any holder is a stranger)."""
        return [f"{port} ({node.name} {purpose})" for node, purpose, port in node_ports(nodes) if port_taken(port)]

    # ------------------------------------------------------------------ security

    @property
    def security_dir(self) -> Path:
        return self.data_dir.resolve() / SECURE_DIR

    @property
    def client_config_path(self) -> Path:
        """The client config of a secure cluster (the ``admin`` certificate)."""
        return self.data_dir / SECURE_CLIENT_CONFIG

    def write_security_files(self) -> None:
        """The CA, the node and ``admin`` certificates, the Raft secret and the client config."""
        write_cluster_identities(self.security_dir, [n.name for n in self.nodes])
        config = {"ca_file": str(self.security_dir / "ca.crt"),
                  "cert_file": str(self.security_dir / f"{ADMIN_CLIENT}.crt"),
                  "key_file": str(self.security_dir / f"{ADMIN_CLIENT}.key")}
        self.client_config_path.write_text(json.dumps(config, indent=2) + "\n")

    def security_args(self, node: Node) -> list[str]:
        """A node's TLS (and, for a controller, mutual TLS and the shared secret on the Raft
        links) options, with authentication and
        ACLs on: the nodes (certificate CN = node name) and ``admin`` are the super users, so
        the cluster runs and the CLI administers it, and every other principal needs ACLs.
        None in plaintext."""
        if not self.secure:
            return []
        files = self.security_dir
        super_users = ",".join(f"User:{name}" for name in [ADMIN_CLIENT, *(n.name for n in self.nodes)])
        args = ["--tls-cert-file", str(files / f"{node.name}.crt"), "--tls-key-file", str(files / f"{node.name}.key"),
                "--tls-ca-file", str(files / "ca.crt"), "--tls-client-auth", "required", "--require-tls",
                "--authentication-required", "--authorization", "--super-users", super_users]
        if node.role == "controller":
            args += ["--raft-tls", "--raft-secret-file", str(files / RAFT_SECRET_FILE)]
        return args

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """What this process's own probes of the nodes use: the ``admin`` identity of a
        secure cluster, plaintext otherwise."""
        if not self.secure:
            return None
        files = self.security_dir
        return channel_credentials(files / "ca.crt", files / f"{ADMIN_CLIENT}.crt", files / f"{ADMIN_CLIENT}.key")

    # ------------------------------------------------------------------ processes

    def command(self, node: Node) -> list[str]:
        node_dir = self.data_dir / node.name
        common = ["--data-dir", str(node_dir), "--log-format", self.log_format, *self.security_args(node)]
        if node.metrics_port:
            common += ["--metrics-port", str(node.metrics_port)]
        if node.kafka_port:
            common += ["--kafka-listen", f"{node.host}:{node.kafka_port}"]
        if node.role == "controller":
            join = ["--join", f"{node.host}:{node.raft_port}:{node.port}"] if node.joining else []
            return [sys.executable, "-m", "metadata_quorum", "--node-id", str(node.node_id), "--quorum", self.quorum, "--cluster-id", self.cluster_id,
                    *join, *common, *node.extra_args]
        return [
            sys.executable, "-m", "data_plane.broker", "--broker-id", str(node.node_id), "--listen", node.address,
            "--controllers", self.quorum, *common, *node.extra_args,
        ]

    def start_node(self, node: Node, detach: bool = False) -> None:
        """Start ``node`` in a process group of its own (a session of its own with
        ``detach``, so it outlives the terminal). A terminal's Ctrl-C goes to the foreground
        process group only: the owner of the cluster gets it and stops the nodes in order
        (``stop``), instead of every controller and broker stopping at once."""
        log_dir = self.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / f"{node.name}.log", "ab") as out:
            proc = subprocess.Popen(
                self.command(node),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=detach,
                process_group=None if detach else 0,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.processes[node.name] = proc
        node.pid = proc.pid
        self.save()

    def start(self, detach: bool = False) -> None:
        for node in self.controllers + self.brokers:
            self.start_node(node, detach)

    def is_running(self, node: Node) -> bool:
        proc = self.processes.get(node.name)
        if proc is not None:
            return proc.poll() is None
        return _pid_alive(node.pid)

    def signal(self, node: Node, sig: int) -> None:
        if self.is_running(node):
            os.kill(node.pid, sig)

    def kill(self, node: Node) -> None:
        """SIGKILL and reap: the process gets no chance to flush or say goodbye."""
        self.signal(node, signal.SIGKILL)
        self._reap(node, 10)

    def stop_node(self, node: Node, timeout_s: float = 30) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL if it does not exit in time."""
        self._stop_together([node], timeout_s)

    def _stop_together(self, nodes: list[Node], timeout_s: float) -> None:
        """SIGTERM to all of ``nodes`` at once, then each one SIGKILLed if it has not exited
        within ``timeout_s``."""
        for node in nodes:
            self.signal(node, signal.SIGTERM)
        for node in nodes:
            if not self._reap(node, timeout_s):
                self.kill(node)

    def restart(self, node: Node) -> None:
        self.start_node(node)

    def stop(self, timeout_s: float = 30) -> None:
        """Brokers first, all at once: their controlled shutdown needs the controllers, which
        move the brokers' leaderships away; then the controllers, all at once. Each node gets ``timeout_s``
        before SIGKILL. An interrupt while waiting (a second Ctrl-C) kills every node still
        running and raises ``StopInterrupted`` naming them."""
        try:
            self._stop_together(self.brokers, timeout_s)
            self._stop_together(self.controllers, timeout_s)
        except KeyboardInterrupt:
            raise StopInterrupted(self.kill_all()) from None

    def kill_all(self) -> list[str]:
        """SIGKILL every node still running, all before reaping any (a further interrupt
        while reaping leaves nothing running); returns the names of the nodes killed."""
        alive = [node for node in self.nodes if self.is_running(node)]
        for node in alive:
            with contextlib.suppress(ProcessLookupError):  # it may exit on its own meanwhile
                os.kill(node.pid, signal.SIGKILL)
        for node in alive:
            self._reap(node, 10)
        return [node.name for node in alive]

    def _reap(self, node: Node, timeout_s: float) -> bool:
        proc = self.processes.get(node.name)
        if proc is not None:
            try:
                proc.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        try:
            wait_for(lambda: not _pid_alive(node.pid), timeout_s, f"{node.name} (pid {node.pid}) to exit")
            return True
        except TimeoutError:
            return False

    def log_path(self, node: Node) -> Path:
        return self.data_dir / "logs" / f"{node.name}.log"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def live_brokers(address: str, credentials: grpc.ChannelCredentials | None = None) -> int:
    """How many registered, unfenced brokers the broker at ``address`` knows of."""
    with open_channel(address, credentials) as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(brokers_only=True), timeout=2)
    return sum(1 for b in response.brokers if not b.fenced)


def usable_brokers_at_active_controller(cluster: LocalCluster) -> int:
    """How many brokers the active controller would place replicas on (registered, unfenced,
    not in controlled shutdown); 0 while no controller answers as the active one.

    A broker's own view is not enough after a restart: the registrations of the previous run
    end in controlled shutdown and stay unfenced until their sessions expire, so brokers list
    them as live while the controller refuses to place anything on them."""
    for controller in cluster.controllers:
        try:
            with open_channel(controller.address, cluster.channel_credentials()) as channel:
                answer = controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(
                    controller_pb2.DescribeClusterRequest(), timeout=2
                )
        except grpc.RpcError:
            continue
        if answer.answering_controller_id == answer.active_controller.controller_id:
            return sum(1 for b in answer.brokers if not b.endpoint.fenced and not b.in_controlled_shutdown)
    return 0


def serving(node: Node, credentials: grpc.ChannelCredentials | None = None) -> bool:
    """Whether ``node``'s gRPC health service says SERVING: a broker once it is registered
    (on its current broker epoch) and unfenced, a controller once it knows the Raft leader and
    has caught up with the metadata log (it serves reads).
    Unlike the controller's broker list, this is false for a broker restarted after SIGKILL
    until its new incarnation has registered (the old one stays listed, unfenced, until its
    session expires)."""
    try:
        with open_channel(node.address, credentials) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    except grpc.RpcError:
        return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def wait_serving(cluster: LocalCluster, nodes: Iterable[Node], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Each of ``nodes`` answers SERVING (see ``serving``)."""
    for node in nodes:
        wait_for(lambda: serving(node, cluster.channel_credentials()), timeout_s, f"{node.name} to serve (see {cluster.log_path(node)})")


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a node's log, for an error that must be read where the log
    is gone (a CI run keeps the test output only)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def ensure_alive(cluster: LocalCluster, nodes: Iterable[Node]) -> None:
    """GaveUp, with the end of its log, if a node this cluster started has exited: a readiness
    wait on it can only time out."""
    for node in nodes:
        proc = cluster.processes.get(node.name)
        if proc is not None and proc.poll() is not None:
            raise GaveUp(f"{node.name} exited with code {proc.returncode} while starting; the end of "
                         f"{cluster.log_path(node)}:\n{log_tail(cluster.log_path(node))}")


def wait_ready(cluster: LocalCluster, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Every broker is registered and unfenced, as seen by every broker, and usable for new
    replicas as the active controller sees it. Fails at once, with the end of its log, if a
    broker has exited."""

    def live_brokers_at(broker: Node) -> bool:
        ensure_alive(cluster, cluster.brokers)  # a controller may be down on purpose: a quorum needs only a majority
        return live_brokers(broker.address, cluster.channel_credentials()) == len(cluster.brokers)

    for broker in cluster.brokers:
        wait_for(
            lambda: live_brokers_at(broker),
            timeout_s,
            f"{len(cluster.brokers)} live brokers seen by {broker.name} (see {cluster.log_path(broker)})",
        )
    wait_for(
        lambda: usable_brokers_at_active_controller(cluster) == len(cluster.brokers),
        timeout_s,
        f"{len(cluster.brokers)} usable brokers at the active controller (see {cluster.data_dir / 'logs'})",
    )
