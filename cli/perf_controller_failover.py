"""``kraftlog perf failover --controller``: how long the cluster cannot change its metadata
when the active controller is SIGKILLed.

Each round kills the active controller and times, from the signal, a topic creation by
two clients started at the signal: an admin client that was already running (connected to
the victim, as a long-lived tool is) and a fresh ``kraftlog topics create`` process (which
finds the controllers through a broker, as an operator's command does). Meanwhile a probe
asks the surviving controllers for their view of the quorum every few ms, so that the time
splits into where it goes:

- election: until a survivor names a new leader (detecting the loss, then the vote);
- activation: until that leader reports it is active (its term's first entry committed and
  applied: it answers writes);
- client: the rest, the client's retries and backoff (and for the CLI, starting a Python
  process, measured apart as ``cli_start_ms`` by one run against the healthy cluster).

The killed controller is restarted and the round ends when the quorum has all its voters
caught up again.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import grpc

from cli.output import emit, table
from cli.perf_common import percentiles
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc
from metadata_quorum.controller_client import ControllerClient
from server_common.channel_pool import ChannelPool
from server_common.client_security import ClientSecurity
from cli.perf_failover import throwaway_cluster
from server_common.local_cluster import LocalCluster, Node, wait_ready
from server_common.logging_setup import configure_logging
from server_common.waiting import wait_for

PROBE_INTERVAL_S = 0.005
PROBE_RPC_TIMEOUT_S = 0.2


@dataclass(frozen=True)
class QuorumView:
    """One controller's answer to DescribeQuorum, reduced to what a round needs."""

    answering: int
    leader: int
    term: int
    caught_up: bool
    active: bool


@dataclass(frozen=True)
class ControllerRound:
    """One kill of the active controller: a row of the report (ms from the signal)."""

    number: int
    victim: int
    new_leader: int
    elected_ms: float  # a survivor names a new leader
    ready_ms: float  # that leader is active: its term's first entry committed and applied, it answers writes
    admin_ms: float  # the running admin client's topic creation returned
    cli_ms: float  # the fresh CLI process's topic creation exited successfully
    cli_start_ms: float  # one fresh CLI run against the healthy cluster (the process's own cost)


class QuorumProbe:
    """Asks controllers directly, with short deadlines, for their view of the quorum."""

    def __init__(self, controllers: list[Node]) -> None:
        self._addresses = {c.node_id: c.address for c in controllers}
        self._channels = ChannelPool(controller_pb2_grpc.ControllerServiceStub, options=[],
                                     credentials=ClientSecurity.from_environment().channel_credentials())

    def close(self) -> None:
        self._channels.close()

    def view(self, controller_id: int) -> QuorumView | None:
        try:
            answer = self._channels.stub(self._addresses[controller_id]).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=PROBE_RPC_TIMEOUT_S)
        except grpc.RpcError:
            return None
        me = next((m for m in answer.members if m.controller_id == answer.answering_controller_id), None)
        if me is None:
            return None
        return QuorumView(answer.answering_controller_id, answer.leader_id, me.raft_term, me.caught_up, me.active)

    def leader(self) -> QuorumView | None:
        """The view of a controller that names itself leader and is active."""
        for controller_id in self._addresses:
            seen = self.view(controller_id)
            if seen is not None and seen.leader == controller_id and seen.active:
                return seen
        return None

    def watch(self, survivors: list[int], old_term: int, started: float, timeout_s: float) -> tuple[float, float, int]:
        """(elected ms, ready ms, new leader) as the survivors report them; polls until both are seen."""
        elected_ms = ready_ms = -1.0
        new_leader = -1
        while ready_ms < 0 and time.monotonic() - started < timeout_s:
            for controller_id in survivors:
                seen = self.view(controller_id)
                if seen is None or seen.term <= old_term or seen.leader not in survivors:
                    continue
                now_ms = (time.monotonic() - started) * 1000
                if elected_ms < 0:
                    elected_ms, new_leader = now_ms, seen.leader
                if seen.answering == seen.leader and seen.active:
                    ready_ms, new_leader = now_ms, seen.leader
            time.sleep(PROBE_INTERVAL_S)
        return elected_ms, ready_ms, new_leader


def _cli_create(bootstrap: str, topic: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cli", "topics", "create", topic, "--bootstrap", bootstrap],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _timed_cli_create(bootstrap: str, topic: str, started: float, timeout_s: float) -> float:
    """Runs the CLI; ms from ``started`` to its successful exit."""
    proc = _cli_create(bootstrap, topic)
    _, err = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"kraftlog topics create {topic} failed: {err.decode(errors='replace').strip()}")
    return (time.monotonic() - started) * 1000


def _timed_admin_create(admin: ControllerClient, topic: str, started: float) -> float:
    admin.create_topic(topic, 1, 1)
    return (time.monotonic() - started) * 1000


def _round(number: int, cluster: LocalCluster, probe: QuorumProbe, admin: ControllerClient, timeout_s: float) -> ControllerRound:
    leader = wait_for(probe.leader, timeout_s, "an active controller")
    wait_ready(cluster, timeout_s)
    admin.create_topic(f"perf-controller-warm-{number}-{time.time_ns()}", 1, 1)  # the admin client now talks to the leader
    cli_start_ms = _timed_cli_create(cluster.bootstrap, f"perf-controller-cli-warm-{number}-{time.time_ns()}", time.monotonic(), timeout_s)
    victim = cluster.node("controller", leader.answering)
    survivors = [c.node_id for c in cluster.controllers if c.node_id != victim.node_id]
    suffix = time.time_ns()
    with concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix="perf-controller-failover") as pool:
        started = time.monotonic()
        cluster.signal(victim, signal.SIGKILL)
        admin_done = pool.submit(_timed_admin_create, admin, f"perf-controller-admin-{number}-{suffix}", started)
        cli_done = pool.submit(_timed_cli_create, cluster.bootstrap, f"perf-controller-cli-{number}-{suffix}", started, timeout_s)
        elected_ms, ready_ms, new_leader = pool.submit(probe.watch, survivors, leader.term, started, timeout_s).result()
        admin_ms, cli_ms = admin_done.result(), cli_done.result()
    wait_for(lambda: not cluster.is_running(victim), timeout_s, f"{victim.name} to exit")
    cluster.start_node(victim)
    wait_for(lambda: probe.view(victim.node_id) is not None and probe.view(victim.node_id).caught_up, timeout_s, f"{victim.name} to catch up again")
    return ControllerRound(number, victim.node_id, new_leader, round(elected_ms, 1), round(ready_ms, 1), round(admin_ms, 1), round(cli_ms, 1),
                           round(cli_start_ms, 1))


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[LocalCluster]:
    """The cluster of ``--data-dir``, or a throwaway one (3 controllers, 1 broker) whose
    directory is deleted unless the run failed."""
    if args.data_dir is not None:
        yield LocalCluster.load(args.data_dir)
        return
    with throwaway_cluster("kraftlog-controller-failover-", controllers=3, brokers=1) as cluster:
        yield cluster


def run(args: argparse.Namespace) -> int:
    configure_logging(level="WARNING")  # the clients' retries during a failover are expected, not news
    if args.kills < 1:
        raise ValueError("--kills must be positive")
    rounds: list[ControllerRound] = []
    with _cluster(args) as cluster:
        if len(cluster.controllers) < 3:
            raise ValueError("perf failover --controller needs at least 3 controllers: a quorum must survive the kill")
        probe = QuorumProbe(cluster.controllers)
        with contextlib.closing(probe), ControllerClient(cluster.quorum, timeout_s=args.round_timeout_s) as admin:
            for number in range(1, args.kills + 1):
                done = _round(number, cluster, probe, admin, args.round_timeout_s)
                rounds.append(done)
                print(f"  round {number}/{args.kills}: controller {done.victim} killed -> controller {done.new_leader} elected after "
                      f"{done.elected_ms} ms, ready {done.ready_ms} ms; admin client {done.admin_ms} ms, fresh CLI {done.cli_ms} ms "
                      f"(its start {done.cli_start_ms} ms)", file=sys.stderr, flush=True)
    _report(args.json, {
        "mode": "controller-kill",
        "kills": len(rounds),
        **{f"{name}_ms": _p50_max([getattr(r, f"{name}_ms") for r in rounds]) for name in ("elected", "ready", "admin", "cli", "cli_start")},
        "rounds": [asdict(r) for r in rounds],
    })
    return 0


def _p50_max(samples_ms: list[float]) -> dict[str, float]:
    figures = percentiles(samples_ms)
    return {"p50": figures["p50"], "max": figures["max"]}


def _report(as_json: bool, document: dict) -> None:
    columns = ["number", "victim", "new_leader", "elected_ms", "ready_ms", "admin_ms", "cli_ms", "cli_start_ms"]
    rows = [[r[c] for c in columns] for r in document["rounds"]]
    lines = [f"SIGKILL of the active controller, {document['kills']} rounds (ms from the signal):"]
    for name, what in (("elected", "a survivor names a new leader (detection + election)"),
                       ("ready", "the new leader is active (its term's first commit applied)"),
                       ("admin", "a running admin client's topic creation returned"),
                       ("cli", "a fresh `kraftlog topics create` process succeeded"),
                       ("cli_start", "that process against a healthy cluster (its own start-up and work)")):
        figures = document[f"{name}_ms"]
        lines.append(f"  {what}: p50 {figures['p50']} ms, worst {figures['max']} ms")
    human = table(["ROUND", "KILLED", "NEW LEADER", "ELECTED MS", "READY MS", "ADMIN MS", "CLI MS", "CLI START MS"], rows) + "\n" + "\n".join(lines)
    emit(as_json, document, human)
