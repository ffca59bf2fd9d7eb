"""The transactional scenarios of ``kraftlog chaos`` (``txn-kills`` and its negative controls
``unsafe-txn-read-past-lso`` and ``unsafe-txn-markers-before-decision``): transactional
producers write to a topic while brokers, the transactions' coordinators and their links
fail, read_committed readers record what they see, and the transaction checks
(``chaos/checker/txn_checks.py``) judge the history.

    kraftlog chaos run --scenario txn-kills --duration 30 --seed 1

What runs: a ``ChaosCluster`` (1 controller, 3 brokers, every client and replication link
through a Toxiproxy proxy), a 4-partition RF=3 topic (min.insync.replicas 2), ``PRODUCERS``
transactional producers (``chaos/workload/txn_producer.py``: a transaction is three values to
random partitions and 50 ms of work, a quarter aborted on purpose), two read_committed
readers of every partition (``ConsumerWorker``), two consume-transform-produce group members
(``chaos/workload/txn_transformer.py``: what they read, transformed into ``chaos-txn-out``
with their offsets in the same transaction) and, every few seconds, one of
``chaos/coordinator_faults.py``'s faults aimed at the broker coordinating the most of the
producers' transactional ids (FindCoordinator key_type TRANSACTION): SIGKILL it or another
broker, cut its client link, cut the replication links into it (most cuts run past the replica
lag time, so the coordinator's writes fall below min.insync.replicas and its decisions are
refused), or stall those links for a second or two and then SIGKILL it (its decisions not yet
replicated are lost with it; drawn twice as often as each other fault, since a decision
durable before its markers is what a transaction's atomicity rests on). After ``duration``
everything heals, the producers finish their transactions, the readers read until they have
every committed value (or ``DRAIN_S``), and every partition is read read_committed from its
log start.

The negative controls run the brokers with ``--unsafe-testing read-committed-past-lso``
(read_committed served up to the HW, aborted transactions unlisted: caught as ``G1a`` and
``G1b``) or ``--unsafe-testing markers-before-decision`` (the coordinator starts the markers
before its decision is durable: when the decision is then refused or lost, the producer
aborts a transaction whose commit markers already landed, caught as ``G1a``, or ``G1b`` when
only some landed).
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Callable

from chaos.chaos_cluster import ChaosCluster
from chaos.checker.txn_checks import TxnCheckResult, check_txns
from chaos.coordinator_faults import FAULTS, STALL_AND_KILL, CoordinatorFaults
from chaos.coordinator_run import findings_result, proxied_cluster
from chaos.history import History, PollOp
from chaos.txn_history import TxnOp, TxnPoll, save_history, txn_final_reads, txn_polls
from chaos.workload.consumer_worker import ConsumerWorker
from chaos.workload.final_read import final_reads, wait_for_leaders
from chaos.workload.settings import WorkloadSettings
from chaos.workload.txn_producer import SETTLE_S, TxnProducerWorker
from chaos.workload.txn_transformer import TxnTransformerWorker
from chaos.run_options import RunOptions, RunResult
from server_common.local_cluster import READY_TIMEOUT_S
from server_common.waiting import wait_for
from server_common.errors import ErrorCode

PRODUCERS = 9
TRANSFORMERS = 2
CTP_GROUP = "chaos-txn-transform"
SINK = "chaos-txn-out"
FAULT_GAP_S = (2.0, 4.0)
DOWN_S = (1.0, 3.0)
CUT_S = (2.0, 6.0)  # most outlast the replica lag time (3 s): the coordinator's writes are refused
DRAIN_S = 30.0
GATE_WAIT_S = 3.0  # how long a stall waits for its coordinator's producers to reach their commit
FINAL_READ_S = 30.0
# One reader of each fetch mode (`reader_modes`): the Consume stream and Fetch requests pass
# markers and aborted batches by different code.
WORKLOAD = WorkloadSettings(topic="chaos-txn", partitions=4, producers=0, single_attempt_producers=0, consumers=2,
                            isolation_level="read_committed", fetch_mode="fetch")
# stall-and-kill drawn twice as often as each other fault: it tests the rule a transaction's
# atomicity rests on (the decision durable before any marker).
TXN_FAULTS = (*FAULTS, STALL_AND_KILL, STALL_AND_KILL)


def reader_modes(readers: int) -> list[str]:
    """The fetch mode of each read_committed reader: Fetch and the Consume stream in turn."""
    return ["fetch" if i % 2 == 0 else "stream" for i in range(readers)]


def run_txn(options: RunOptions) -> RunResult:
    """One transactional scenario run; writes ``txn-report.json`` in the report directory."""
    with proxied_cluster(options, []) as cluster:
        run = _TxnRun(cluster, random.Random(options.seed), options.seed, options.scenario.faults or TXN_FAULTS, options.report_dir,
                      options.progress)
        try:
            anomalies = run.play(options.duration_s)
        finally:
            run.stop_everything()
    txns = run.txns
    counts = {o: sum(1 for t in txns if t.outcome == o) for o in ("committed", "aborted", "unknown")}
    counts["records_read"] = sum(len(rs) for p in run.polls for rs in p.reads.values())
    counts["partitions_read_to_end"] = run.read_to_end
    counts["transforms_committed"] = sum(1 for w in run.transformers for t in w.txns if t.outcome == "committed")
    headline = (f"{len(txns)} transactions ({counts['committed']} committed, {counts['aborted']} aborted, {counts['unknown']} unknown), "
                f"{counts['transforms_committed']} of them transforms, {counts['records_read']} records read read_committed, "
                f"{run.read_to_end} of {2 * WORKLOAD.partitions} partitions read to the end")
    return findings_result(options, TxnCheckResult(anomalies), run.faults, {"transactions": len(txns), **counts}, headline, "txn-report.json")


class _TxnRun:
    """The cluster, producers, transformers and readers of one run, and the faults played on them."""

    def __init__(self, cluster: ChaosCluster, rng: random.Random, seed: int, faults: tuple[str, ...], report_dir: Path, progress) -> None:
        self.cluster, self.rng, self.seed, self.fault_mix, self.report_dir, self.progress = cluster, rng, seed, faults, report_dir, progress
        self.broker_faults = CoordinatorFaults(cluster, rng, self._coordinator, DOWN_S, CUT_S, self._hold_commits)
        self.producers: list[TxnProducerWorker] = []
        self.readers: list[ConsumerWorker] = []
        self.transformers: list[TxnTransformerWorker] = []
        self.faults: list[tuple[float, str]] = []
        self.txns: list[TxnOp] = []
        self.polls: list[TxnPoll] = []
        self.read_to_end = 0  # partitions the final read got to the end of: the only ones it judges

    def play(self, duration_s: float) -> list:
        from data_plane.client import Admin

        cluster, settings, sink = self.cluster, WORKLOAD, replace(WORKLOAD, topic=SINK)
        cluster.start_and_wait()
        bootstrap = self.bootstrap = cluster.client_bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topics([(t.topic, t.partitions, t.replication_factor) for t in (settings, sink)], settings.topic_configs())
        for topic in (settings, sink):
            wait_for_leaders(bootstrap, topic, READY_TIMEOUT_S)
        history = History()
        self.producers = [TxnProducerWorker(f"txn-{i}", bootstrap, settings.topic, settings.partitions, history.now, self.seed * 100 + i)
                          for i in range(PRODUCERS)]
        self.transformers = [TxnTransformerWorker(f"ctp-{i}", bootstrap, settings.topic, SINK, CTP_GROUP, settings.partitions, history.now)
                             for i in range(TRANSFORMERS)]
        self.readers = [ConsumerWorker(f"reader-{i}", bootstrap, replace(settings, fetch_mode=mode), history)
                        for i, mode in enumerate(reader_modes(settings.consumers))]
        for worker in [*self.producers, *self.transformers, *self.readers]:
            worker.start()
        self.progress(f"{PRODUCERS} transactional producers, {TRANSFORMERS} consume-transform-produce members and "
                      f"{len(self.readers)} read_committed readers on {settings.topic}; faults for {duration_s:.0f}s")
        self.faults = self.broker_faults.play(duration_s, FAULT_GAP_S, self.fault_mix, self.broker_faults.inject, history.now, self.progress)
        self.progress("faults healed; the producers finish their transactions")
        for p in self.producers:
            p.stopping.set()
        for p in self.producers:
            p.join(SETTLE_S + 15)
        self.progress(f"[{history.now():6.1f}s] producers stopped")
        committed = {w.value for p in self.producers for t in p.txns if t.outcome == "committed" for w in t.writes}

        def drained() -> bool:
            read = {v for op in history.ops if isinstance(op, PollOp) for rs in op.reads.values() for _, v in rs}
            taken = {v for w in self.transformers for poll in w.polls for rs in poll.reads.values() for _, v in rs}
            return committed <= read and committed <= taken

        try:
            wait_for(drained, DRAIN_S, "the readers and the group to read every committed value")
        except TimeoutError as err:
            self.progress(str(err))
        self.progress(f"[{history.now():6.1f}s] readers and group caught up")
        self._stop(self.readers)
        self._stop(self.transformers)
        self.progress(f"[{history.now():6.1f}s] readers and transformers stopped")
        finals = txn_final_reads(final_reads(bootstrap, settings, history, FINAL_READ_S))
        finals += [replace(f, partition=settings.partitions + f.partition)
                   for f in txn_final_reads(final_reads(bootstrap, sink, history, FINAL_READ_S))]
        self.read_to_end = sum(1 for f in finals if f.complete)
        self.txns = [t for w in [*self.producers, *self.transformers] for t in w.txns]
        self.polls = txn_polls(history.ops) + [p for w in self.transformers for p in w.polls]
        self.progress(f"[{history.now():6.1f}s] {len(self.txns)} transactions; final read taken")
        save_history(self.report_dir / "txn-history.json", self.txns, self.polls, finals)
        return check_txns(self.txns, self.polls, finals)

    @staticmethod
    def _stop(workers: list) -> None:
        for w in workers:
            w.stopping.set()
        for w in workers:
            w.join(SETTLE_S + 15)

    def stop_everything(self) -> None:
        for worker in [*self.producers, *self.transformers, *self.readers]:
            worker.stopping.set()
        self.cluster.kill_all()

    def _coordinator(self) -> int:
        """The broker coordinating the most of the producers' transactional ids (ties drawn at
        random), as FindCoordinator (key_type TRANSACTION) answers the producers (-1: unknown)."""
        leaders = list(self._coordinators().values())
        if not leaders:
            return -1
        most = max(map(leaders.count, leaders))
        return self.rng.choice(sorted({n for n in leaders if leaders.count(n) == most}))

    def _coordinators(self) -> dict[str, int]:
        """Each producer's transactional id and its coordinator's broker, as FindCoordinator
        (key_type TRANSACTION) answers; empty when no broker answered."""
        import grpc

        from kraftlog_proto import group_pb2, group_pb2_grpc

        request = group_pb2.FindCoordinatorRequest(keys=[p.name for p in self.producers], key_type=group_pb2.TRANSACTION)
        for address in self.bootstrap.split(","):
            try:
                with grpc.insecure_channel(address) as channel:
                    answer = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(request, timeout=1.0)
            except grpc.RpcError:
                continue  # that broker is down or cut off: ask the next
            found = {c.key: c.node_id for c in answer.coordinators if c.error_code == ErrorCode.NONE}
            if found:
                return found
        return {}

    def _hold_commits(self, coordinator: int) -> Callable[[], None]:
        """Holds every producer ``coordinator`` serves just before its next commit and waits
        (up to ``GATE_WAIT_S``) until all are held: then nothing of theirs reaches the
        coordinator until the release, and what they send first after it is a commit. A
        producer still recovering from a failure may miss the wait; the fault goes on with the
        others. Returns what releases them."""
        served = {name for name, node in self._coordinators().items() if node == coordinator}
        gates = [p.gate for p in self.producers if p.name in served]
        for gate in gates:
            gate.request()
        try:
            wait_for(lambda: all(g.holding.is_set() for g in gates), GATE_WAIT_S, f"broker {coordinator}'s producers at their commit")
        except TimeoutError:
            held = sum(1 for g in gates if g.holding.is_set())
            self.progress(f"{held} of {len(gates)} producers of broker {coordinator} held before their commit")

        def release() -> None:
            for gate in gates:
                gate.release()
        return release
