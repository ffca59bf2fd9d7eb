"""Carries out a fault schedule against a ChaosCluster: resolves each step's role to real
processes or links, applies the fault, heals it when its time is up and records it.

Process faults: ``kill`` (SIGKILL, healed by a restart), ``pause`` (SIGSTOP, healed by
SIGCONT), ``graceful-restart`` (SIGTERM, then start again), ``restart`` (one broker, all
of them at once, or the whole cluster with its controllers; SIGTERM or SIGKILL, then
start), ``rolling-restart`` (each broker in
turn), ``kill-leaders-in-turn`` (the leader, then each successor, with replication slowed:
the KIP-101 sequence), ``depose-leader`` (SIGSTOP a leader until metadata names another,
then SIGCONT: a leader change while the old leader lives on), ``kill-leader-while-follower-lags``
(a follower killed, restarted behind a slow replication link, then the leader killed: a
replica outside ISR and ELR is alive when the election comes). Disk faults on one broker:
``disk-full`` (its tmpfs data directory filled: a real ENOSPC) and ``disk-io-error`` (EIO on
appends or segment rolls through the storage fault-injection hook); both are healed by
freeing the disk and restarting the broker, which recovers its offline logs. After each broker restart of ``restart`` and ``rolling-restart`` the
replicas are compared (``chaos.replica_logs.compare_replicas``): every partition must be
back in its full ISR within the step's ``deadline_s`` with identical replicas, and the
comparison goes into the history with the restart's number for the checker. ``power-loss`` (SIGKILL,
then every file of the node cut back to what its last fsyncs made durable, healed by a
restart: ``chaos/power_loss_cut.py``; the records each cut took go into the fault's record).
Network
faults: ``toxic`` (a Toxiproxy toxic on the target links) and ``cut`` (the links' proxies
disabled); in a namespace cluster ``net-partition``, ``net-one-way``, ``net-bridge`` and
``net-shape`` (``chaos.netns_faults``). Clock faults: ``clock-offset`` (one node's wall clock
shifted, ``chaos.clock_skew``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chaos import clock_skew, netns_faults
from chaos.chaos_cluster import ChaosCluster
from chaos.history import FaultOp, History
from chaos.power_loss_cut import UnflushedRange, cut_node
from chaos.netns_faults import NETNS_FAULTS
from chaos.network import client_link, controller_link, replication_link
from chaos.replica_logs import Assignment, compare_replicas, settled_partitions
from chaos.schedule import FaultStep
from chaos.workload.settings import WorkloadSettings
from data_plane.client import Admin, KraftlogError
from data_plane.storage.fault_injection import TRIGGER_FILE, fill_disk
from metadata_quorum.controller_client import ControllerClient, ControllerError
from server_common.errors import ErrorCode
from server_common.local_cluster import Node
from server_common.waiting import wait_for

Heal = Callable[[], None]
FAULTS = (
    "kill", "pause", "graceful-restart", "restart", "rolling-restart", "toxic", "cut", "kill-leaders-in-turn", "depose-leader",
    "disk-full", "disk-io-error", "kill-leader-while-follower-lags", "power-loss",
    *NETNS_FAULTS, "clock-offset",
)
PROCESS_ROLES = ("leader", "follower", "broker", "all-brokers", "cluster", "active-controller", "controller-majority",
                 "replicas", "all-controllers")
LINK_ROLES = (
    "replication-links",
    "client-links",
    "leader-controller-links",
    "leader-client-link",
    "follower-replication-link",
    "active-controller-raft-links",
)
RESTART_DEADLINE_S = 10.0  # after a broker restart, every partition back in its full ISR this soon
RESTART_SIGNALS = ("SIGTERM", "SIGKILL")


class Nemesis(threading.Thread):
    """Runs the steps in time order on its own thread; ``heal_everything`` undoes all."""

    def __init__(self, cluster: ChaosCluster, steps: list[FaultStep], workload: WorkloadSettings, assignment: Assignment, history: History) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.cluster = cluster
        self.steps = steps
        self.workload = workload
        self.assignment = assignment  # each partition's replicas: what a comparison expects to hear from
        self.history = history
        self.restarts = 0  # broker restarts so far, numbering their comparisons
        self.stopping = threading.Event()
        self.current = ""  # the fault in force, for progress lines
        self.error: BaseException | None = None
        self._paused: set[str] = set()
        self._pick = 0  # the running step's pick
        self._unflushed: list[UnflushedRange] = []  # the running power-loss step's cuts
        self._faults = {
            "kill": self._kill,
            "pause": self._pause,
            "graceful-restart": self._graceful_restart,
            "restart": self._restart,
            "rolling-restart": self._rolling_restart,
            "toxic": self._toxic,
            "cut": self._cut,
            "kill-leaders-in-turn": self._kill_leaders_in_turn,
            "depose-leader": self._depose_leader,
            "disk-full": self._disk_full,
            "disk-io-error": self._disk_io_error,
            "kill-leader-while-follower-lags": self._kill_leader_while_follower_lags,
            "power-loss": self._power_loss,
            **{fault: self._netns_fault(fault) for fault in NETNS_FAULTS},
            "clock-offset": self._clock_offset,
        }
        assert tuple(self._faults) == FAULTS

    def run(self) -> None:
        try:
            for step in self.steps:
                if self.stopping.wait(max(step.at_s - self.history.now(), 0)):
                    return
                self._run_step(step)
        except BaseException as error:  # a harness bug: the runner re-raises it after joining
            self.error = error
            raise

    def _run_step(self, step: FaultStep) -> None:
        started = self.history.now()
        self._pick = step.pick
        try:
            targets = self._resolve(step.role, step.pick)
        except (KraftlogError, ControllerError, TimeoutError) as error:
            self.history.add(FaultOp(step.fault, step.role, started, started, f"skipped: no {step.role} ({error})"))
            return
        detail = ", ".join(f"{k}={v}" for k, v in sorted(step.params.items()))
        self.current = f"{step.fault} {', '.join(targets)}"
        heal = self._faults[step.fault](targets, step.params)
        self.stopping.wait(max(step.end_s - self.history.now(), 0))
        heal()
        self.current = ""
        unflushed, self._unflushed = self._unflushed, []
        self.history.add(FaultOp(step.fault, ", ".join(targets), started, self.history.now(), detail, unflushed))

    # ------------------------------------------------------------------ targets

    def _resolve(self, role: str, pick: int) -> list[str]:
        """Node names (``broker-2``, ``controller-1``) or link names for a role."""
        assert role in PROCESS_ROLES + LINK_ROLES, f"unknown role {role}"
        brokers = [b.node_id for b in self.cluster.brokers]
        if role == "broker":
            return [f"broker-{brokers[pick % len(brokers)]}"]
        if role == "all-brokers":
            return [f"broker-{b}" for b in brokers]
        if role == "cluster":
            return [n.name for n in self.cluster.nodes]
        if role in ("active-controller", "controller-majority"):
            return self._controllers(role, pick)
        if role == "all-controllers":
            return [f"controller-{c.node_id}" for c in self.cluster.controllers]
        if role == "active-controller-raft-links":
            active = self._node(self._controllers("active-controller", pick)[0])
            return self.cluster.raft_links_of(active.node_id)
        if role in ("replication-links", "client-links"):
            return self.cluster.network.links(role.split("-")[0] + "-")
        leader, followers = self._leadership(pick)
        follower = followers[pick % len(followers)] if followers else leader
        by_role = {
            "leader": [f"broker-{leader}"],
            "replicas": [f"broker-{b}" for b in sorted([leader, *followers])],
            "follower": [f"broker-{follower}"],
            "leader-controller-links": [controller_link(leader, c.node_id) for c in self.cluster.controllers],
            "leader-client-link": [client_link(leader)],
            "follower-replication-link": [replication_link(follower, leader)],
        }
        return by_role[role]

    def _leadership(self, pick: int, avoid: frozenset[int] = frozenset()) -> tuple[int, list[int]]:
        """(leader, sorted followers) of the partition ``pick`` chooses, asking only brokers
        not in ``avoid`` (a paused broker would eat every request's timeout)."""
        partition = pick % self.workload.partitions
        addresses = self.cluster.client_bootstrap.split(",")
        bootstrap = ",".join(a for b, a in zip(self.cluster.brokers, addresses) if b.node_id not in avoid)
        with Admin(bootstrap, request_timeout_ms=3_000) as admin:
            described = admin.describe_topics([self.workload.topic])[self.workload.topic].partitions[partition]
        if described.leader < 0:
            raise KraftlogError(ErrorCode.LEADER_NOT_AVAILABLE, f"partition {partition} has no leader")
        return described.leader, sorted(r for r in described.replicas if r != described.leader)

    def _controllers(self, role: str, pick: int) -> list[str]:
        with ControllerClient(",".join(c.address for c in self.cluster.controllers), timeout_s=3.0) as client:
            members = client.describe_quorum()
        leaders = [m.controller_id for m in members if m.state == "leader"]
        if not leaders:
            raise ControllerError(ErrorCode.NONE, "no active controller")
        if role == "active-controller":
            return [f"controller-{leaders[0]}"]
        others = sorted(m.controller_id for m in members if m.controller_id != leaders[0])
        majority = len(members) // 2 + 1
        start = pick % len(others)
        chosen = [leaders[0]] + (others[start:] + others[:start])[: majority - 1]
        return [f"controller-{c}" for c in sorted(chosen)]

    def _node(self, name: str) -> Node:
        role, _, node_id = name.rpartition("-")
        return self.cluster.node(role, int(node_id))

    # ------------------------------------------------------------------ faults

    def _kill(self, targets: list[str], params: dict) -> Heal:
        nodes = [self._node(t) for t in targets]
        for node in nodes:
            self.cluster.kill(node)
        return lambda: self._start_stopped(nodes)

    def _power_loss(self, targets: list[str], params: dict) -> Heal:
        """SIGKILL the targets at once, then cut each one's files back to its last fsyncs, as
        if the machines had lost power together; the restart is the heal."""
        nodes = [self._node(t) for t in targets]
        with ThreadPoolExecutor(len(nodes)) as pool:
            list(pool.map(self.cluster.kill, nodes))
        cut_files = 0
        for node in nodes:
            ranges, files = cut_node(self.cluster.data_dir / node.name, node.name, self.workload.topic)
            self._unflushed.extend(ranges)
            cut_files += files
        targets[:] = [f"{', '.join(targets)} ({cut_files} files cut back to their last fsync)"]
        return lambda: self._start_stopped(nodes)

    def _start_stopped(self, nodes: list[Node]) -> None:
        for node in nodes:
            if not self.cluster.is_running(node):
                self.cluster.start_node(node)

    def _pause(self, targets: list[str], params: dict) -> Heal:
        for name in targets:
            self.cluster.signal(self._node(name), signal.SIGSTOP)
            self._paused.add(name)
        return lambda: self._resume(targets)

    def _resume(self, targets: list[str]) -> None:
        for name in targets:
            self.cluster.signal(self._node(name), signal.SIGCONT)
            self._paused.discard(name)

    def _graceful_restart(self, targets: list[str], params: dict) -> Heal:
        for name in targets:
            node = self._node(name)
            self.cluster.stop_node(node)
            self.cluster.start_node(node)
        return lambda: None

    def _restart(self, targets: list[str], params: dict) -> Heal:
        """One restart of the targets together (a broker, or every broker: a full restart),
        then the replicas compared."""
        nodes = [self._node(name) for name in targets]
        self._stop_and_start(nodes, params)
        if len(nodes) == len(self.cluster.nodes):
            what = "the whole cluster"
        else:
            what = "every broker" if len(nodes) == len(self.cluster.brokers) > 1 else ", ".join(targets)
        self._compare_after_restart(f"{params.get('signal', 'SIGTERM')} {what}", params)
        return lambda: None

    def _rolling_restart(self, targets: list[str], params: dict) -> Heal:
        """Each broker in turn, the replicas compared after each."""
        for broker in self.cluster.brokers:
            self._stop_and_start([broker], params)
            self._compare_after_restart(f"{params.get('signal', 'SIGTERM')} {broker.name}, rolling", params)
        return lambda: None

    def _stop_and_start(self, nodes: list[Node], params: dict) -> None:
        """Stops ``nodes`` with the step's signal (SIGTERM: controlled shutdowns in parallel;
        SIGKILL), brokers before controllers as ``cluster down`` does, then starts them,
        controllers first as ``cluster up`` does."""
        how = params.get("signal", "SIGTERM")
        assert how in RESTART_SIGNALS, f"a restart signals SIGTERM or SIGKILL, not {how}"
        stop = self.cluster.kill if how == "SIGKILL" else self.cluster.stop_node
        brokers = [n for n in nodes if n.role == "broker"]
        controllers = [n for n in nodes if n.role == "controller"]
        for group in (brokers, controllers):
            if group:
                with ThreadPoolExecutor(len(group)) as pool:
                    list(pool.map(stop, group))
        for node in controllers + brokers:
            self.cluster.start_node(node)

    def _compare_after_restart(self, what: str, params: dict) -> None:
        """Waits for every replica to come back (full ISR, each holding what the leader held
        once all answered) within the step's deadline and records the comparison under this
        restart's number."""
        self.restarts += 1
        label = f"restart {self.restarts} ({what})"
        self.current = f"{label}: comparing replicas"
        deadline_s = params.get("deadline_s", RESTART_DEADLINE_S)
        ops = compare_replicas(self.cluster.client_bootstrap, self.workload.topic, self.assignment, self.history, deadline_s, quiescent=False, label=label, restart=self.restarts)
        for op in ops:
            self.history.add(op)
        settled, partitions = settled_partitions(ops)
        self.current = f"{label}: {settled} of {partitions} partitions back within {deadline_s:g}s"

    def _kill_leaders_in_turn(self, targets: list[str], params: dict) -> Heal:
        """Slows every replication link, lets followers fall behind, then kills the leader and
        each new leader as soon as metadata names it (``kills`` leaders in all), and keeps them
        down until a survivor leads: the sequence that loses acknowledged writes when a new follower truncates to its HW (KIP-101) or
        when acks=all is answered before followers have the batch."""
        network = self.cluster.network
        latency = {"latency": params["replication_latency_ms"], "jitter": 0}
        slowed = [(link, network.add_toxic(link, "latency", latency)) for link in network.links("replication-")]
        self.stopping.wait(params["lag_build_up_s"])  # let followers fall behind under load
        killed: list[Node] = []
        for _ in range(params["kills"]):
            leader = self._node(targets[0]) if not killed else self._await_new_leader(killed)
            if leader is None:
                break
            self.cluster.kill(leader)
            killed.append(leader)
        self._await_new_leader(killed)  # the killed stay down until a survivor leads
        targets[:] = [n.name for n in killed]

        def heal() -> None:
            for link, name in slowed:
                network.remove_toxic(link, name)
            self._start_stopped(killed)

        return heal

    def _depose_leader(self, targets: list[str], params: dict) -> Heal:
        """Pauses the leader until metadata names another broker (not for a guessed time), so
        the leadership has surely moved while it was stopped; resuming it is the heal. The
        step's target then says who took over (or that nobody did in time)."""
        leader = self._node(targets[0])
        self.cluster.signal(leader, signal.SIGSTOP)
        self._paused.add(targets[0])
        successor = self._await_new_leader([leader], params.get("deadline_s", 15.0))
        targets[:] = [f"{targets[0]} (deposed: broker-{successor.node_id} leads)" if successor else f"{targets[0]} (NOT deposed: no new leader in time)"]
        name = leader.name
        return lambda: self._resume([name])

    def _await_new_leader(self, killed: list[Node], extra_s: float = 5.0) -> Node | None:
        """The broker metadata names as the chosen partition's leader once it is none of
        ``killed``; None when no new leader appears within the session timeout and ``extra_s``."""
        dead = frozenset(n.node_id for n in killed)

        def new_leader() -> int | None:
            leader, _ = self._leadership(self._pick, avoid=dead)
            return leader if leader not in dead else None

        try:
            leader_id = wait_for(new_leader, self.cluster.settings.session_timeout_ms / 1000 + extra_s, "a new leader")
        except TimeoutError:
            return None
        return self.cluster.node("broker", int(leader_id))

    def _disk_full(self, targets: list[str], params: dict) -> Heal:
        """Fills the broker's tmpfs data directory (``ClusterSettings.broker_disk_mb``) with a
        filler file: its next append or roll fails with ENOSPC, its replica goes offline and
        the controller moves the leadership. Healed by deleting the filler and restarting the
        broker (its offline logs are recovered at start)."""
        node = self._node(targets[0])
        filler = fill_disk(self.cluster.data_dir_of(node))
        return lambda: self._free_and_restart(node, filler)

    def _disk_io_error(self, targets: list[str], params: dict) -> Heal:
        """EIO on the broker's appends (``operation`` append) or segment rolls (roll: the
        topic's segment.bytes is lowered to 1024 for the fault, so rolls happen) through the
        storage fault-injection hook (``data_plane/storage/fault_injection.py``). Healed like
        a full disk: the trigger removed, the broker restarted."""
        node = self._node(targets[0])
        operation = params.get("operation", "append")
        if operation == "roll":
            self._set_segment_bytes("1024")
        trigger = self.cluster.data_dir_of(node) / TRIGGER_FILE
        trigger.write_text(operation + "\n")

        def heal() -> None:
            if operation == "roll":
                self._set_segment_bytes(None)
            self._free_and_restart(node, trigger)

        return heal

    def _set_segment_bytes(self, value: str | None) -> None:
        topic = self.workload.topic
        with ControllerClient(",".join(c.address for c in self.cluster.controllers), timeout_s=10.0) as client:
            if value is None:
                client.alter_configs(topic, delete_keys=["segment.bytes"])
            else:
                client.alter_configs(topic, {"segment.bytes": value})

    def _free_and_restart(self, node: Node, path: Path) -> None:
        """The fault's file gone, the broker restarted: its offline logs are recovered at start."""
        path.unlink(missing_ok=True)
        if self.cluster.is_running(node):
            self.cluster.stop_node(node)
        self.cluster.start_node(node)

    def _kill_leader_while_follower_lags(self, targets: list[str], params: dict) -> Heal:
        """Kills a follower and keeps it down for ``down_s`` under load (it leaves the ISR,
        writes go on with the other two), restarts it behind a replication link slowed by
        ``replication_latency_ms``, waits until the controller has unfenced it, then kills the
        leader. The surviving in-sync replica must be elected; the follower, alive but
        outside ISR and ELR and missing acknowledged writes, must not be (the
        ``elect-outside-isr-elr`` negative control elects it)."""
        leader_id, followers = self._leadership(self._pick)
        lagging = self.cluster.node("broker", followers[self._pick % len(followers)])
        leader = self.cluster.node("broker", leader_id)
        self.cluster.kill(lagging)
        self.stopping.wait(params["down_s"])
        network = self.cluster.network
        slowed = network.add_toxic(replication_link(lagging.node_id, leader_id), "latency", {"latency": params["replication_latency_ms"], "jitter": 0})
        self.cluster.start_node(lagging)
        with ControllerClient(",".join(c.address for c in self.cluster.controllers), timeout_s=3.0) as client:

            def unfenced() -> bool:
                return any(b.endpoint.broker_id == lagging.node_id and not b.endpoint.fenced for b in client.describe_cluster().brokers)

            wait_for(unfenced, 30, f"broker {lagging.node_id} unfenced")
        self.cluster.kill(leader)
        successor = self._await_new_leader([leader])
        targets[:] = [f"{lagging.name} lagging, {leader.name} killed" + (f" (broker-{successor.node_id} leads)" if successor else " (no new leader in time)")]

        def heal() -> None:
            network.remove_toxic(replication_link(lagging.node_id, leader_id), slowed)
            self._start_stopped([leader])

        return heal

    def _toxic(self, targets: list[str], params: dict) -> Heal:
        network = self.cluster.network
        toxic = dict(params)
        kind, stream, attributes = toxic.pop("type"), toxic.pop("stream", "downstream"), toxic
        added = [(link, network.add_toxic(link, kind, attributes, stream)) for link in targets]

        def heal() -> None:
            for link, name in added:
                network.remove_toxic(link, name)

        return heal

    def _cut(self, targets: list[str], params: dict) -> Heal:
        for link in targets:
            self.cluster.network.cut(link)

        def heal() -> None:
            for link in targets:
                self.cluster.network.restore(link)

        return heal

    def _netns_fault(self, fault: str) -> Callable[[list[str], dict], Heal]:
        return lambda targets, params: netns_faults.apply(fault, self.cluster, targets, params, self._pick)

    def _clock_offset(self, targets: list[str], params: dict) -> Heal:
        """The targets' wall clocks shifted by one of ``offsets_ms`` (the pick chooses);
        healing sets them back (a jump the other way)."""
        offset_ms = clock_skew.pick_offset(params, self._pick)
        heal = clock_skew.set_offset(self.cluster, [self._node(t) for t in targets], offset_ms)
        targets[:] = [f"{t} clock {offset_ms:+d} ms" for t in targets]
        return heal

    # ------------------------------------------------------------------ healing

    def heal_everything(self) -> None:
        """No toxics, every link up, every process running and resumed."""
        self.cluster.network.heal_all()
        clock_skew.clear_offsets(self.cluster, self.cluster.nodes)
        self._resume(sorted(self._paused))
        self._start_stopped(self.cluster.nodes)
