"""``kraftlog cluster up/down`` as a user runs them: real processes, real signals.

Ports: a new cluster takes the stable layout (brokers from the base, controllers 100 above,
Raft 200 above); a taken port moves to a free one with a line saying so; a restart keeps the
recorded ports and refuses when someone else holds one. These tests never use 9092: each
finds a base whose whole layout is free (``KRAFTLOG_PORT_BASE``), below the OS's ephemeral
range, so a developer's cluster on 9092 or a parallel test run cannot collide with them.

Shutdown: ``cluster up`` runs in a process group of its own and gets SIGINT the way a
terminal's Ctrl-C delivers it (to the whole foreground group). Brokers must finish their
controlled shutdown while the controllers still run, and a second SIGINT, or one to
``cluster down``, must leave no process running.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cli.cluster_cmd import PORT_BASE_ENV
from server_common.local_cluster import HOST, LocalCluster, node_ports, port_taken, serving, stable_nodes
from server_common.waiting import wait_for

pytestmark = pytest.mark.integration

SHUTDOWN_BOUND_S = 15  # a controlled shutdown here takes 1-5 s; brokers waiting out their 30 s timeout fail it
STARTUP_S = 90
EPHEMERAL_FLOOR = 32768  # Linux hands out ephemeral ports from here: bases below it are never picked by the OS


def free_base(controllers: int, brokers: int) -> int:
    """A port base whose whole stable layout is free now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, EPHEMERAL_FLOOR - 300, 10)
        if not any(port_taken(port) for _, _, port in node_ports(stable_nodes(controllers, brokers, base))):
            return base
    raise AssertionError("no free port base between 20000 and 32468")


def cli_env(base: int) -> dict[str, str]:
    return {**os.environ, PORT_BASE_ENV: str(base), "PYTHONUNBUFFERED": "1"}


def kraftlog(*args: str, base: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=STARTUP_S + 30, env=cli_env(base))


def layout(data_dir: Path) -> dict[str, tuple[int, int]]:
    nodes = json.loads((data_dir / "cluster.json").read_text())["nodes"]
    return {f"{n['role']}-{n['node_id']}": (n["port"], n["raft_port"]) for n in nodes}


def running(data_dir: Path) -> list[str]:
    cluster = LocalCluster.load(data_dir)
    return [n.name for n in cluster.nodes if cluster.is_running(n)]


def listen_on(port: int) -> socket.socket:
    """Hold ``port`` the way another program's server would."""
    holder = socket.socket()
    holder.bind((HOST, port))
    holder.listen()
    return holder


@contextmanager
def cleanup(data_dir: Path) -> Iterator[None]:
    """Whatever the test did, no node of the cluster in ``data_dir`` outlives it."""
    try:
        yield
    finally:
        if (data_dir / "cluster.json").exists():
            LocalCluster.load(data_dir).kill_all()


@contextmanager
def detached_cluster(tmp_path: Path, controllers: int, brokers: int) -> Iterator[tuple[Path, Callable[..., subprocess.CompletedProcess]]]:
    """``cluster up --detach`` of a new cluster in ``tmp_path``/cluster on free ports; yields
    its directory and ``run(*args)``, which runs ``kraftlog ARGS --data-dir DIR`` on it."""
    data_dir = tmp_path / "cluster"
    base = free_base(controllers, brokers)

    def run(*args: str) -> subprocess.CompletedProcess:
        return kraftlog(*args, "--data-dir", str(data_dir), base=base)

    with cleanup(data_dir):
        started = run("cluster", "up", "--detach", "--controllers", str(controllers), "--brokers", str(brokers))
        assert started.returncode == 0, started.stdout + started.stderr
        yield data_dir, run


class Foreground:
    """``kraftlog ARGS`` in a process group of its own, as a shell runs a foreground job;
    its output lines are collected as they come, until ``hang_up`` closes our end."""

    def __init__(self, *args: str, base: int) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=cli_env(base), start_new_session=True
        )
        self._hung_up = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        fd, pending = self.process.stdout.fileno(), b""
        while not self._hung_up.is_set():
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *complete, pending = (pending + chunk).split(b"\n")
            self.lines += [line.decode() for line in complete]
        self.process.stdout.close()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, predicate, timeout_s: float, what: str) -> str:
        """The first output line ``predicate`` accepts; fails at once if the command exits first."""

        def seen_or_exited() -> str | bool:
            line = next((line for line in self.lines if predicate(line)), None)
            return line or (self.process.poll() is not None and not self._reader.is_alive())

        try:
            seen = wait_for(seen_or_exited, timeout_s, what)
        except TimeoutError as timeout:
            raise AssertionError(f"{timeout}; output:\n{self.output}") from None
        if seen is True:
            raise AssertionError(f"kraftlog exited ({self.process.returncode}) before {what}:\n{self.output}")
        return seen

    def ctrl_c(self) -> None:
        """SIGINT to the whole process group, as a terminal's Ctrl-C."""
        os.killpg(self.process.pid, signal.SIGINT)

    def wait_output_closed(self) -> None:
        """Every line it printed is in ``lines``."""
        self._reader.join(timeout=5)

    def hang_up(self) -> None:
        """Close our end of its output, as a closed terminal or ``| head`` leaves it."""
        self._hung_up.set()
        self._reader.join(timeout=5)

    def __enter__(self) -> "Foreground":
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def wait_all_gone(foreground: Foreground, pids: list[int], timeout_s: float) -> None:
    def gone() -> bool:
        return foreground.process.poll() is not None and not any(_alive(pid) for pid in pids)

    try:
        wait_for(gone, timeout_s, f"kraftlog and every node ({pids}) to exit")
    except TimeoutError as timeout:
        raise AssertionError(f"{timeout}; output:\n{foreground.output}") from None
    foreground.wait_output_closed()


def ctrl_c_while_stopping(command: Foreground, cluster: LocalCluster) -> None:
    """Ctrl-C once ``command`` has begun stopping the cluster: every node must be gone
    soon after, killed, with a line that names them, and the exit status 130."""
    command.wait_line(lambda line: line.startswith("stopping brokers"), SHUTDOWN_BOUND_S, "the stop to begin")
    command.ctrl_c()
    wait_all_gone(command, [n.pid for n in cluster.nodes], SHUTDOWN_BOUND_S)
    assert command.process.returncode == 130, command.output
    killed = next(line for line in command.lines if line.startswith("interrupted: sent SIGKILL to "))
    assert "broker-1" in killed and "controller-1" in killed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def log_events(path: Path, *events: str) -> list[dict]:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return [e for e in entries if e.get("event") in events]


# ---------------------------------------------------------------------------------- ports


def test_a_new_cluster_takes_the_stable_ports_and_a_restart_keeps_them(tmp_path):
    data_dir = tmp_path / "cluster"
    base = free_base(3, 3)
    with cleanup(data_dir):
        started = kraftlog("cluster", "up", "--detach", "--data-dir", str(data_dir), base=base)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "in use" not in started.stdout
        assert f"cluster ready; bootstrap {HOST}:{base},{HOST}:{base + 1},{HOST}:{base + 2}" in started.stdout
        assert layout(data_dir) == {
            **{f"controller-{i}": (base + 99 + i, base + 199 + i) for i in (1, 2, 3)},
            **{f"broker-{i}": (base - 1 + i, 0) for i in (1, 2, 3)},
        }
        recorded = layout(data_dir)

        stopped = kraftlog("cluster", "down", "--data-dir", str(data_dir), base=base)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert running(data_dir) == []

        # another base in the environment does not move a recorded cluster
        restarted = kraftlog("cluster", "up", "--detach", "--data-dir", str(data_dir), base=free_base(3, 3))
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert layout(data_dir) == recorded
        assert f"bootstrap {HOST}:{base}," in restarted.stdout
        assert kraftlog("cluster", "down", "--data-dir", str(data_dir), base=base).returncode == 0


def test_a_taken_port_moves_with_a_line_and_a_restart_refuses_a_taken_port(tmp_path):
    data_dir = tmp_path / "cluster"
    base = free_base(1, 2)
    with cleanup(data_dir):
        holder = listen_on(base)  # broker 1's stable port
        try:
            started = kraftlog("cluster", "up", "--detach", "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir), base=base)
        finally:
            holder.close()
        assert started.returncode == 0, started.stdout + started.stderr
        ports = layout(data_dir)
        moved_to = ports["broker-1"][0]
        assert moved_to != base
        assert f"port {base} (broker-1 gRPC) is in use by another process; broker-1 uses {moved_to} instead" in started.stdout
        assert ports == {"controller-1": (base + 100, base + 200), "broker-1": (moved_to, 0), "broker-2": (base + 1, 0)}
        assert f"bootstrap {HOST}:{moved_to},{HOST}:{base + 1}" in started.stdout
        assert kraftlog("cluster", "down", "--data-dir", str(data_dir), base=base).returncode == 0

        holder = listen_on(base + 1)  # now someone takes broker 2's recorded port
        try:
            refused = kraftlog("cluster", "up", "--detach", "--data-dir", str(data_dir), base=base)
        finally:
            holder.close()
        assert refused.returncode == 1
        assert f"other processes hold its recorded ports {base + 1} (broker-2 gRPC)" in refused.stderr
        assert "another --data-dir" in refused.stderr
        assert running(data_dir) == []
        assert layout(data_dir) == ports


# ---------------------------------------------------------------------------------- shutdown


def test_ctrl_c_stops_brokers_in_controlled_shutdown_before_controllers(tmp_path):
    """The README's command with its demo workload on an RF=3 topic, then Ctrl-C."""
    data_dir = tmp_path / "cluster"
    with cleanup(data_dir), Foreground("cluster", "up", "--data-dir", str(data_dir), base=free_base(3, 3)) as up:
        up.wait_line(lambda line: line.startswith("t=") and "acked=0 " not in line, STARTUP_S, "the demo to acknowledge records")
        cluster = LocalCluster.load(data_dir)
        up.ctrl_c()
        wait_all_gone(up, [n.pid for n in cluster.nodes], SHUTDOWN_BOUND_S)
    assert up.process.returncode == 0, up.output
    assert any(line.startswith("stopped in ") for line in up.lines), up.output
    brokers_stopped = []
    for broker in cluster.brokers:
        log = cluster.log_path(broker)
        assert log_events(log, "controlled shutdown complete"), f"{broker.name} did not complete a controlled shutdown (see {log})"
        assert not log_events(log, "controlled shutdown timed out; leaderships move when the session expires")
        brokers_stopped += [e["timestamp"] for e in log_events(log, "broker stopped cleanly")]
    controllers_stopping = [e["timestamp"] for c in cluster.controllers for e in log_events(cluster.log_path(c), "controller stopping")]
    assert len(brokers_stopped) == 3 and len(controllers_stopping) == 3
    assert max(brokers_stopped) < min(controllers_stopping), "a controller stopped before every broker had"


def test_the_demo_starts_on_a_cluster_restarted_before_its_topic_exists(tmp_path):
    """``up --detach``, ``down``, then the README's command: the previous run's registrations
    end in controlled shutdown, so "cluster ready" must wait until the active controller can
    place replicas on the new ones, or creating the demo topic is refused with 0 usable brokers."""
    data_dir = tmp_path / "cluster"
    base = free_base(1, 3)
    args = ("--controllers", "1", "--brokers", "3", "--data-dir", str(data_dir))
    with cleanup(data_dir):
        assert kraftlog("cluster", "up", "--detach", *args, base=base).returncode == 0
        assert kraftlog("cluster", "down", "--data-dir", str(data_dir), base=base).returncode == 0
        with Foreground("cluster", "up", *args, base=base) as up:
            up.wait_line(lambda line: line.startswith("t=") and "acked=0 " not in line, STARTUP_S, "the demo to acknowledge records")
            described = kraftlog("topics", "describe-configs", "demo", "--json", "--data-dir", str(data_dir), base=base)
            up.ctrl_c()
            up.wait_output_closed()
    assert "created topic demo" in up.output, up.output
    bounded = {c["key"]: c["value"] for c in json.loads(described.stdout) if c["source"] != "default"}
    assert bounded.get("retention.bytes") == str(64 << 20) and bounded.get("retention.ms") == "3600000", described.stdout
    assert "waiting for the topic" not in up.output, "the demo starts once the topic has leaders: no warning to create it"


def test_a_second_ctrl_c_kills_every_node_still_running(tmp_path):
    """A paused broker cannot finish its controlled shutdown, so the stop is still waiting
    when the second Ctrl-C comes."""
    data_dir = tmp_path / "cluster"
    args = ("cluster", "up", "--no-workload", "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir))
    with cleanup(data_dir), Foreground(*args, base=free_base(1, 2)) as up:
        up.wait_line(lambda line: line == "press Ctrl-C to stop", STARTUP_S, "the cluster to be ready")
        cluster = LocalCluster.load(data_dir)
        os.kill(cluster.node("broker", 1).pid, signal.SIGSTOP)
        up.ctrl_c()
        ctrl_c_while_stopping(up, cluster)


@pytest.mark.parametrize("workload", [["--no-workload"], []], ids=["no-workload", "demo"])
def test_cluster_down_from_another_shell_ends_up_and_a_detached_restart_runs_on(tmp_path, workload):
    """``cluster down`` in another shell while ``up`` runs in the foreground (with or without
    the demo workload): ``up`` notices that every process it started has exited and ends by
    itself, status 0, without waiting out the demo producer's undelivered records; a later
    ``cluster up --detach`` is not stopped by it."""
    data_dir = tmp_path / "cluster"
    base = free_base(1, 2)
    args = ("cluster", "up", *workload, "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir))
    with cleanup(data_dir), Foreground(*args, base=base) as up:
        up.wait_line(lambda line: line == "press Ctrl-C to stop" or (line.startswith("t=") and "acked=0 " not in line), STARTUP_S,
                     "the cluster to be ready (and the demo to acknowledge records)")
        assert kraftlog("cluster", "down", "--data-dir", str(data_dir), base=base).returncode == 0
        wait_all_gone(up, [], SHUTDOWN_BOUND_S)
        assert up.process.returncode == 0, up.output
        restarted = kraftlog("cluster", "up", "--detach", "--data-dir", str(data_dir), base=base)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        cluster = LocalCluster.load(data_dir)
        assert not cluster.down_nodes(), "the detached restart runs on after the foreground up ended"
    assert any("has exited (stopped by 'kraftlog cluster down'?)" in line for line in up.lines), up.output


def test_ctrl_c_on_cluster_down_kills_every_node_still_running(tmp_path):
    data_dir = tmp_path / "cluster"
    base = free_base(1, 2)
    with cleanup(data_dir):
        started = kraftlog("cluster", "up", "--detach", "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir), base=base)
        assert started.returncode == 0, started.stdout + started.stderr
        cluster = LocalCluster.load(data_dir)
        os.kill(cluster.node("broker", 1).pid, signal.SIGSTOP)
        with Foreground("cluster", "down", "--data-dir", str(data_dir), base=base) as down:
            ctrl_c_while_stopping(down, cluster)


def test_a_closed_output_or_a_hangup_stops_the_cluster_in_order(tmp_path):
    """``kraftlog cluster up | head`` or a closed terminal: the demo's next progress line
    fails to print, and a terminal's SIGHUP reaches ``up`` only; either way every node stops."""
    data_dir = tmp_path / "cluster"
    args = ("cluster", "up", "--controllers", "1", "--brokers", "2", "--data-dir", str(data_dir))
    with cleanup(data_dir), Foreground(*args, base=free_base(1, 2)) as up:
        up.wait_line(lambda line: line.startswith("t="), STARTUP_S, "the demo's first progress line")
        cluster = LocalCluster.load(data_dir)
        up.hang_up()
        os.killpg(up.process.pid, signal.SIGHUP)
        wait_all_gone(up, [n.pid for n in cluster.nodes], SHUTDOWN_BOUND_S)
    for broker in cluster.brokers:
        assert log_events(cluster.log_path(broker), "controlled shutdown complete"), f"{broker.name} did not complete a controlled shutdown"


# ---------------------------------------------------------------------------------- one node at a time


def pids(data_dir: Path) -> dict[str, int]:
    return {n.name: n.pid for n in LocalCluster.load(data_dir).nodes}


def test_up_starts_only_the_nodes_that_are_down_and_restart_moves_one_node(tmp_path):
    """A broker SIGKILLed (as a test or a crash does) shows as down; ``up`` brings back that
    one and leaves every other process alone; ``restart broker-2`` replaces only its process
    and waits until it serves again; a mistyped name lists the valid ones."""
    with detached_cluster(tmp_path, 1, 3) as (data_dir, run):
        before = pids(data_dir)
        cluster = LocalCluster.load(data_dir)
        cluster.kill(cluster.node("broker", 2))

        shown = json.loads(run("cluster", "status", "--json").stdout)
        assert shown["down"] == ["broker-2"]
        assert {n["name"]: n["state"] for n in shown["nodes"]} == {"controller-1": "running", "broker-1": "running", "broker-2": "down", "broker-3": "running"}
        table_out = run("cluster", "status").stdout
        assert next(line for line in table_out.splitlines() if line.startswith("broker-2")).split()[-1] == "down", table_out
        assert "down: broker-2; kraftlog cluster up" in table_out

        brought_back = run("cluster", "up", "--detach")
        assert brought_back.returncode == 0, brought_back.stdout + brought_back.stderr
        assert "starting broker-2 in the background; leaving controller-1, broker-1, broker-3 running" in brought_back.stdout
        after_up = pids(data_dir)
        assert {k: v for k, v in after_up.items() if k != "broker-2"} == {k: v for k, v in before.items() if k != "broker-2"}
        assert after_up["broker-2"] != before["broker-2"]
        assert running(data_dir) == ["controller-1", "broker-1", "broker-2", "broker-3"]
        assert serving(LocalCluster.load(data_dir).node("broker", 2))

        nothing = run("cluster", "up", "--detach")
        assert nothing.returncode == 0 and "nothing to start" in nothing.stdout, nothing.stdout + nothing.stderr
        assert pids(data_dir) == after_up

        restarted = run("cluster", "restart", "broker-2")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert "controlled shutdown" in restarted.stdout and "broker-2 is back in" in restarted.stdout
        after_restart = pids(data_dir)
        assert after_restart["broker-2"] != after_up["broker-2"]
        assert {k: v for k, v in after_restart.items() if k != "broker-2"} == {k: v for k, v in after_up.items() if k != "broker-2"}
        assert serving(LocalCluster.load(data_dir).node("broker", 2)), "restart returned before broker-2 served"

        stopped = run("cluster", "stop", "broker-3")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert running(data_dir) == ["controller-1", "broker-1", "broker-2"]
        assert run("cluster", "start", "broker-3").returncode == 0
        assert running(data_dir) == ["controller-1", "broker-1", "broker-2", "broker-3"]

        typo = run("cluster", "restart", "broker-9")
        assert typo.returncode == 1
        assert "no node 'broker-9'" in typo.stderr and "give one of controller-1, broker-1, broker-2, broker-3" in typo.stderr
        assert running(data_dir) == ["controller-1", "broker-1", "broker-2", "broker-3"]
        assert run("cluster", "down").returncode == 0


def test_a_controller_started_short_of_a_quorum_is_not_waited_for_and_the_next_one_serves_reads(tmp_path):
    """With every controller stopped, ``start controller-1`` cannot see it join (no quorum):
    it returns at once naming how many more to start; ``start controller-2`` then waits until
    it serves, and ``quorum describe`` shows both serving reads (caught up since they started)."""
    with detached_cluster(tmp_path, 3, 1) as (_, run):
        for name in ("controller-1", "controller-2", "controller-3"):
            assert run("cluster", "stop", name).returncode == 0
        alone = run("cluster", "start", "controller-1")
        assert alone.returncode == 0, alone.stdout + alone.stderr
        assert "once 2 of the 3 controllers run, and controller-2, controller-3 are down: start 1 of them too" in alone.stdout, alone.stdout
        second = run("cluster", "start", "controller-2")
        assert second.returncode == 0 and "controller-2 is back in" in second.stdout, second.stdout + second.stderr

        def serves_reads() -> dict[int, bool]:
            quorum = json.loads(run("quorum", "describe", "--json").stdout)
            return {c["controller_id"]: c["serves_reads"] for c in quorum["controllers"]}

        wait_for(lambda: serves_reads() == {1: True, 2: True, 3: False}, 30, "controllers 1 and 2 to serve reads")


def test_a_node_that_exits_while_starting_fails_the_wait_at_once_with_the_end_of_its_log(tmp_path):
    """A broker that cannot start (here a mistyped option) fails ``wait_ready`` with its exit
    code and the end of its log, not a 60 s timeout that names a port refusing connections:
    the log is all a CI run keeps of why."""
    from server_common.local_cluster import wait_ready
    from server_common.waiting import GaveUp

    cluster = LocalCluster.create(tmp_path / "cluster", controllers=1, brokers=1)
    cluster.brokers[0].extra_args = ["--no-such-option"]
    try:
        cluster.start()
        with pytest.raises(GaveUp, match=r"(?s)broker-1 exited with code 2 while starting.*unrecognized arguments: --no-such-option"):
            wait_ready(cluster)
    finally:
        for node in cluster.nodes:
            cluster.kill(node)
