"""Start, stop and fault a local cluster of separate controller and broker processes.

Used by ``kraftlog cluster up/down/status``, by the integration tests and by the chaos
harness, so all three run the cluster the same way. ``<data_dir>/cluster.json`` records the
layout (ids, roles, addresses, pids), so a second ``cluster up`` on the same data dir
restarts the same cluster with its data, and other commands find the bootstrap addresses.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

CLUSTER_FILE = "cluster.json"
HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Ports the OS just handed out and released (held together, so they are distinct)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Node:
    node_id: int
    role: str  # "controller" or "broker"
    host: str
    port: int  # gRPC port
    raft_port: int = 0  # controllers only
    pid: int = 0
    extra_args: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05) -> object:
    """Poll ``condition`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # the condition may fail while a process is still starting
            last_error = exc
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


async def async_wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05) -> object:
    """``wait_for`` for code on an event loop (the loop keeps running between checks)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")


class LocalCluster:
    """A cluster whose processes are children of (or recorded by) this process."""

    def __init__(self, data_dir: Path, nodes: list[Node], log_format: str = "json") -> None:
        self.data_dir = Path(data_dir)
        self.nodes = nodes
        self.log_format = log_format
        self.processes: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------------ layout

    @classmethod
    def create(cls, data_dir: Path, controllers: int = 3, brokers: int = 3, log_format: str = "json") -> "LocalCluster":
        """Reuse the layout in ``data_dir/cluster.json`` when there is one, else make a new one."""
        data_dir = Path(data_dir)
        existing = data_dir / CLUSTER_FILE
        if existing.exists():
            return cls.load(data_dir, log_format)
        ports = free_ports(2 * controllers + brokers)
        nodes = [Node(i + 1, "controller", HOST, ports[2 * i + 1], raft_port=ports[2 * i]) for i in range(controllers)]
        nodes += [Node(i + 1, "broker", HOST, ports[2 * controllers + i]) for i in range(brokers)]
        cluster = cls(data_dir, nodes, log_format)
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
        return cls(Path(data_dir), nodes, log_format)

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        layout = {
            "bootstrap": self.bootstrap,
            "controllers": self.quorum,
            "nodes": [asdict(n) for n in self.nodes],
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
    def quorum(self) -> str:
        return ",".join(f"{c.node_id}@{c.host}:{c.raft_port}:{c.port}" for c in self.controllers)

    def spare_ports(self, count: int) -> list[int]:
        """``count`` free ports that no node uses: the nodes' ports were picked and released
        earlier, so the OS may hand them out again before the nodes bind them (a proxy on a
        controller's port keeps that controller from starting)."""
        taken = {n.port for n in self.nodes} | {n.raft_port for n in self.controllers}
        return [port for port in free_ports(count + len(taken)) if port not in taken][:count]

    def node(self, role: str, node_id: int) -> Node:
        for n in self.nodes:
            if n.role == role and n.node_id == node_id:
                return n
        raise KeyError(f"no {role} {node_id} in this cluster")

    # ------------------------------------------------------------------ processes

    def command(self, node: Node) -> list[str]:
        node_dir = self.data_dir / node.name
        common = ["--data-dir", str(node_dir), "--log-format", self.log_format]
        if node.role == "controller":
            return [sys.executable, "-m", "metadata_quorum", "--node-id", str(node.node_id), "--quorum", self.quorum, *common, *node.extra_args]
        return [
            sys.executable, "-m", "data_plane.broker", "--broker-id", str(node.node_id), "--listen", node.address,
            "--controllers", self.quorum, *common, *node.extra_args,
        ]

    def start_node(self, node: Node, detach: bool = False) -> None:
        log_dir = self.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / f"{node.name}.log", "ab") as out:
            proc = subprocess.Popen(
                self.command(node),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=detach,
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
        self.signal(node, signal.SIGTERM)
        if not self._reap(node, timeout_s):
            self.kill(node)

    def restart(self, node: Node) -> None:
        self.start_node(node)

    def stop(self, timeout_s: float = 30) -> None:
        """Brokers first (they hand off leadership), then controllers."""
        for node in self.brokers:
            self.signal(node, signal.SIGTERM)
        for node in self.brokers:
            if not self._reap(node, timeout_s):
                self.kill(node)
        for node in self.controllers:
            self.stop_node(node, timeout_s)

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
