"""The controller-quorum scenarios of ``kraftlog chaos`` (``quorum-changes`` and its negative
control ``unsafe-quorum-join-before-caught-up``): controllers are added and removed while
brokers run, a client creates topics one after another and a producer writes, and the quorum
checks (``chaos/checker/quorum_checks.py``) judge what every controller served.

    kraftlog chaos run --scenario quorum-changes --duration 20 --seed 1

What runs: a local cluster of three controllers and two brokers (no proxies: the faults are
membership changes, not links), and three client threads:

- the **writer** creates ``q-00000``, ``q-00001``, ... (one partition, RF 1) one after another
  through a ControllerClient that knows only the first voters (it follows hints to the others),
  each only once the previous one was acknowledged (a lost answer is asked again: "already
  exists" counts as acknowledged), recording when each was;
- a **reader** per controller process, from the moment it is started until it is removed,
  asks it for DescribeCluster directly (no retry elsewhere) again and again, recording the
  ``q-`` topics it served (a refusal while catching up records nothing);
- the **producer** writes acks=all to a topic of the brokers; its acknowledged values must all
  be read back after the run (``lost-write``).

Every 2-4 s (seeded) one change: with three voters a controller is added (a new process with
the next id and free ports, started as an observer, made a voter by AddController once caught
up); with five one is removed (a random voter, the active one included: it hands over first;
then its process is stopped; the active one half the time); with four either. After the run every voter of the final
quorum is read until it holds every acknowledged creation (``FINAL_S`` at most), and that read
is judged as final.

The negative control runs the controllers with ``--unsafe-testing join-before-caught-up``: a
controller counts as caught up from its first tick, so a joining one serves reads from the
part of the log it has received and is made a voter at once; the reader catches its first
answers missing creations acknowledged before it started (``stale-read``).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time

import grpc

from chaos.checker.quorum_checks import MetadataRead, QuorumAnomaly, QuorumCheckResult, check_quorum
from chaos.coordinator_run import findings_result
from chaos.run_options import RunOptions, RunResult
from server_common.local_cluster import LocalCluster, Node, wait_ready
from server_common.waiting import wait_for

CHANGE_GAP_S = (2.0, 4.0)
VOTERS = (3, 5)  # the fewest and most voters the changes keep
CATCH_UP_TIMEOUT_S = 30.0
READ_INTERVAL_S = 0.01
# A reader's channel dials again within 10 ms of a refused connection (gRPC's default backoff
# starts at 1 s): a joining controller is asked from its first moment of serving.
RECONNECT_AT_ONCE = [("grpc.initial_reconnect_backoff_ms", 10), ("grpc.min_reconnect_backoff_ms", 10), ("grpc.max_reconnect_backoff_ms", 50)]
FINAL_S = 30.0
DATA_TOPIC = "quorum-chaos-data"
PREFIX = "q-"


def run_quorum(options: RunOptions) -> RunResult:
    """One quorum scenario run; writes ``quorum-report.json`` in the report directory."""
    options.report_dir.mkdir(parents=True, exist_ok=True)
    run = _QuorumRun(options)
    try:
        result = run.play(options.duration_s)
    finally:
        run.stop_everything()
    counts = {"creations_acked": len(run.acked_at), "reads": len(run.reads), "records_acked": len(run.produced),
              "voters_at_end": len(run.finals)}
    headline = (f"{len(run.acked_at)} topic creations acknowledged, {len(run.reads)} reads of {run.processes} controller processes, "
                f"{len(run.produced)} records acknowledged, {len(run.finals)} voters at the end")
    return findings_result(options, result, run.faults, counts, headline, "quorum-report.json")


class _QuorumRun:
    def __init__(self, options: RunOptions) -> None:
        settings = options.scenario.cluster
        self.options, self.rng, self.progress = options, random.Random(options.seed), options.progress
        self.cluster = LocalCluster.create(options.report_dir / "cluster", settings.controllers, settings.brokers)
        self.controller_args = [f"--session-timeout-ms={settings.session_timeout_ms}"]
        if settings.controller_unsafe:
            self.controller_args.append(f"--unsafe-testing={settings.controller_unsafe}")
        for node in self.cluster.nodes:
            node.extra_args = list(self.controller_args) if node.role == "controller" else [f"--session-timeout-ms={settings.session_timeout_ms}"]
        self.cluster.save()
        self.t0 = time.monotonic()
        self.stopping = threading.Event()
        self.running: dict[int, tuple[Node, float]] = {}  # controller id -> (node, when its process started): each has a reader
        self.acked_at: dict[int, float] = {}
        self.reads: list[MetadataRead] = []
        self.finals: list[MetadataRead] = []
        self.produced: list[bytes] = []
        self.faults: list[tuple[float, str]] = []
        self.processes = 0
        self.threads: list[threading.Thread] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def play(self, duration_s: float) -> QuorumCheckResult:
        from data_plane.client import Admin

        cluster = self.cluster
        cluster.start()
        wait_ready(cluster)
        started = self.now()
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([(DATA_TOPIC, 1, 2)], {})
        for node in cluster.controllers:
            self._watch(node, 0.0)
        for name, target in (("writer", self._write), ("producer", self._produce)):
            self.threads.append(threading.Thread(target=target, name=name, daemon=True))
            self.threads[-1].start()
        self.progress(f"[{started:6.1f}s] 3 controllers, {len(cluster.brokers)} brokers; a writer, a reader and a producer; "
                      f"controllers added and removed for {duration_s:.0f}s")
        end = time.monotonic() + duration_s
        next_change = time.monotonic() + self.rng.uniform(*CHANGE_GAP_S)
        while time.monotonic() < end:
            if time.monotonic() >= next_change:
                self.faults.append((round(self.now(), 3), self._change()))
                self.progress(f"[{self.faults[-1][0]:6.1f}s] {self.faults[-1][1]}")
                next_change = time.monotonic() + self.rng.uniform(*CHANGE_GAP_S)
            self.stopping.wait(0.1)  # the change loop's tick: nothing waits on it
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        self.progress(f"[{self.now():6.1f}s] clients stopped; final reads")
        return self._judge()

    # ---------------------------------------------------------------- membership changes

    def _voters(self) -> list[Node]:
        return [c for c in self.cluster.controllers if not c.joining]

    def _change(self) -> str:
        count = len(self._voters())
        add = count < VOTERS[1] and (count <= VOTERS[0] or self.rng.random() < 0.5)
        try:
            return self._add() if add else self._remove()
        except Exception as error:  # noqa: BLE001 - a refused change is part of the history, not the end of the run
            return f"{'add' if add else 'remove'}-controller: failed ({type(error).__name__}: {error})"

    def _add(self) -> str:
        from metadata_quorum.controller_client import ControllerClient, ControllerError

        cluster = self.cluster
        node = cluster.new_controller()
        node.extra_args = list(self.controller_args)
        cluster.save()
        self._watch(node, self.now())  # before it starts: asked from its first answer
        cluster.start_node(node)
        began = time.monotonic()
        try:
            with ControllerClient(self._endpoints(), timeout_s=CATCH_UP_TIMEOUT_S + 30) as client:
                client.add_controller(node.node_id, node.host, node.raft_port, node.port, CATCH_UP_TIMEOUT_S)
        except ControllerError:
            self._retire(node)
            with contextlib.suppress(ControllerError), ControllerClient(self._endpoints(), timeout_s=10) as client:
                client.remove_controller(node.node_id)
            raise
        cluster.joined(node)
        return f"add-controller: {node.name} a voter after {time.monotonic() - began:.1f}s"

    def _remove(self) -> str:
        from metadata_quorum.controller_client import ControllerClient

        voters = self._voters()
        with ControllerClient(self._endpoints(), timeout_s=30) as client:
            active = next((m.controller_id for m in client.describe_quorum() if m.state == "leader"), -1)
        leading = [v for v in voters if v.node_id == active]
        victim = leading[0] if leading and self.rng.random() < 0.5 else self.rng.choice(voters)  # the active one half the time
        with ControllerClient(self._endpoints(exclude=victim), timeout_s=30) as client:
            client.remove_controller(victim.node_id)
        self._retire(victim)
        return f"remove-controller: {victim.name}{' (the active one)' if victim.node_id == active else ''} removed and stopped"

    def _watch(self, node: Node, started_at: float) -> None:
        self.running[node.node_id] = (node, started_at)
        self.processes += 1
        reader = threading.Thread(target=self._read_node, args=(node, started_at), name=f"reader-{node.name}", daemon=True)
        self.threads.append(reader)
        reader.start()

    def _retire(self, node: Node) -> None:
        self.running.pop(node.node_id, None)
        if self.cluster.is_running(node):
            self.cluster.stop_node(node)
        self.cluster.forget(node)

    def _endpoints(self, exclude: Node | None = None) -> str:
        return ",".join(f"{c.node_id}@{c.host}:{c.raft_port}:{c.port}" for c in self._voters() if c is not exclude)

    # ---------------------------------------------------------------- clients

    def _write(self) -> None:
        from metadata_quorum.controller_client import ControllerClient, ControllerError

        seq = 0
        with ControllerClient(self._endpoints(), timeout_s=10) as client:
            while not self.stopping.is_set():
                try:
                    client.create_topic(f"{PREFIX}{seq:05d}", 1, 1)
                except ControllerError as error:
                    if error.code_name != "TOPIC_ALREADY_EXISTS":
                        self.stopping.wait(0.1)  # asked again: the same name, until acknowledged
                        continue
                self.acked_at[seq] = self.now()
                seq += 1

    def _read_node(self, node: Node, started_at: float) -> None:
        """Ask one controller process for DescribeCluster directly (no retry elsewhere), again
        and again from its start until it leaves or the run ends: a thread per process, so a
        joining one is asked from its first answer on, however many others there are."""
        from kraftlog_proto import controller_pb2 as pb, controller_pb2_grpc

        with grpc.insecure_channel(node.address, options=RECONNECT_AT_ONCE) as channel:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            while not self.stopping.is_set() and node.node_id in self.running:
                try:
                    answer = stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=2)
                except grpc.RpcError:
                    self.stopping.wait(READ_INTERVAL_S)  # catching up, not started yet, stopping: nothing served
                    continue
                self.reads.append(MetadataRead(node.node_id, started_at, self.now(), _seqs(answer)))

    def _produce(self) -> None:
        from data_plane.client import KraftlogError, Producer

        with Producer(self.cluster.bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=20_000) as producer:
            i = 0
            while not self.stopping.is_set():
                value = b"v%06d" % i
                try:
                    producer.send(DATA_TOPIC, value, partition=0).result(timeout=30)
                except KraftlogError:
                    continue
                self.produced.append(value)
                i += 1

    # ---------------------------------------------------------------- after the run

    def _judge(self) -> QuorumCheckResult:
        from kraftlog_proto import controller_pb2 as pb, controller_pb2_grpc

        acked = set(self.acked_at)

        def final_of(node: Node) -> MetadataRead | None:
            with grpc.insecure_channel(node.address) as channel:
                try:
                    answer = controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
                except grpc.RpcError:
                    return None
            return MetadataRead(node.node_id, self.running[node.node_id][1], self.now(), _seqs(answer))

        for node in self._voters():
            try:
                read = wait_for(lambda: (r := final_of(node)) is not None and acked <= r.seqs and r, FINAL_S, f"{node.name} to hold every creation")
            except TimeoutError:
                read = final_of(node) or MetadataRead(node.node_id, 0.0, self.now(), frozenset())
            self.finals.append(read)
        self._save_history()
        result = check_quorum(self.acked_at, self.reads, self.finals)
        lost = self._lost_writes()
        if lost:
            result.anomalies.append(QuorumAnomaly("lost-write", 0, f"{len(lost)} acknowledged record(s) of {DATA_TOPIC} not read back: "
                                                  f"{[v.decode() for v in lost[:5]]}", {"missing": [v.decode() for v in lost[:20]]}))
        return result

    def _save_history(self) -> None:
        """``quorum-history.json``: when each creation was acknowledged, and each read as
        [controller id, its process's start, when answered, creations held, the highest]."""
        reads = [[r.controller_id, round(r.started_at, 3), round(r.at, 3), len(r.seqs), max(r.seqs, default=-1)]
                 for r in [*self.reads, *self.finals]]
        history = {"acked_at": {str(s): round(at, 3) for s, at in self.acked_at.items()}, "reads": reads, "finals": len(self.finals)}
        (self.options.report_dir / "quorum-history.json").write_text(json.dumps(history))

    def _lost_writes(self) -> list[bytes]:
        from data_plane.client import Consumer

        wanted, got = set(self.produced), set()
        with Consumer(self.cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(DATA_TOPIC, 0)])
            with contextlib.suppress(TimeoutError):
                wait_for(lambda: got.update(r.value for r in consumer.poll(timeout_ms=200)) or wanted <= got, FINAL_S, "every acknowledged record")
        return sorted(wanted - got)

    def stop_everything(self) -> None:
        self.stopping.set()
        self.cluster.kill_all()


def _seqs(answer) -> frozenset[int]:
    return frozenset(int(t.name[len(PREFIX):]) for t in answer.topics if t.name.startswith(PREFIX) and t.name[len(PREFIX):].isdigit())

