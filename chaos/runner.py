"""Runs one scenario end to end: cluster and proxies up, workload and faults, heal, final
read, replica comparison, check, report.

Phases, in order (the history records what happened in each):
1. a fresh local cluster behind Toxiproxy (or, with ``bootstrap``, an existing cluster and
   no faults), and the RF=3, min.insync.replicas=2 topic;
2. the workload, with the nemesis running the seeded schedule for ``duration_s``;
3. every fault healed, then ``recovery_s`` more of workload so retries settle;
4. the replica comparison: every partition back in its full ISR with every replica holding
   the leader's HW within HEAL_DEADLINE_S, each replica's broker asked on its own (what
   stands at the deadline is recorded; a broker that does not answer is an anomaly);
5. the final read of every partition, the replicas' records from the segment files of the
   stopped brokers, the checker and the report files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict

from chaos.chaos_cluster import ChaosCluster
from chaos.checker import check, judge
from chaos.history import History, PollOp, ReplicaOp, SendOp
from chaos.nemesis import Nemesis
from chaos.netns_cluster import netns_cluster
from chaos.netns_emulated import fabric_unavailable_reason
from chaos.network import Network
from chaos.replica_logs import Assignment, compare_replicas, read_replica_files, replica_assignment, settled_partitions
from chaos.report import summary, write_report
from chaos.run_options import RunOptions, RunResult
from chaos.schedule import FaultStep, generate
from chaos.toxiproxy import start_toxiproxy
from chaos.workload import Workload, WorkloadSettings
from chaos.workload.final_read import final_reads, wait_for_leaders
from data_plane.client import Admin
from server_common.client_security import CLIENT_CONFIG_ENV
from server_common.local_cluster import READY_TIMEOUT_S

FINAL_READ_S = 30.0
HEAL_DEADLINE_S = 30.0  # after the workload stops, every replica back in the ISR and caught up this soon
PROGRESS_EVERY_S = 2.0


def replay_command(options: RunOptions) -> str:
    """The command that runs the same scenario with the same schedule and workload again."""
    w, defaults = options.workload, WorkloadSettings()
    flags = [f"--scenario {options.scenario.name}", f"--seed {options.seed}", f"--duration {options.duration_s:g}"]
    for flag, value, default in (
        ("--partitions", w.partitions, defaults.partitions),
        ("--replication-factor", w.replication_factor, defaults.replication_factor),
        ("--min-insync-replicas", w.min_insync_replicas, defaults.min_insync_replicas),
        ("--rate", w.rate_per_s, defaults.rate_per_s),
    ):
        if value != default:
            flags.append(f"{flag} {value}")
    if options.bootstrap:
        flags.append(f"--bootstrap {options.bootstrap}")
    return "kraftlog chaos run " + " ".join(flags)


def schedule_for(options: RunOptions) -> list[FaultStep]:
    """The run's fault steps: none against someone else's cluster."""
    return [] if options.bootstrap else generate(options.scenario.specs, options.seed, options.duration_s)


def run(options: RunOptions) -> RunResult:
    """Runs the scenario and writes its report; the verdict is in the result."""
    if options.scenario.workload != "records":
        if options.bootstrap:
            raise ValueError(f"scenario {options.scenario.name} starts its own cluster: run it without --bootstrap")
        from chaos.group_run import run_group
        from chaos.quorum_run import run_quorum
        from chaos.txn_run import run_txn

        return {"group": run_group, "txn": run_txn, "quorum": run_quorum}[options.scenario.workload](options)
    steps = schedule_for(options)
    options.report_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if options.bootstrap:
            bootstrap, cluster = options.bootstrap, None
        else:
            cluster = stack.enter_context(_local_cluster(options))
            bootstrap = cluster.client_bootstrap
        _create_topic(bootstrap, options.workload)
        assignment = replica_assignment(bootstrap, options.workload.topic)
        history = History()  # time 0: the workload starts, the schedule's clock with it
        options.progress(f"topic {options.workload.topic} ready; {len(steps)} fault steps over {options.duration_s:.0f}s (seed {options.seed})")
        workload = Workload(bootstrap, options.workload, history, cluster.kafka_bootstrap if cluster else "")
        nemesis = Nemesis(cluster, steps, options.workload, assignment, history) if cluster else None
        workload.start()
        if nemesis:
            nemesis.start()
        _report_progress(options, history, nemesis, options.duration_s)
        if nemesis:
            nemesis.stopping.set()
            nemesis.join()
            nemesis.heal_everything()
            options.progress("faults healed; letting the workload recover")
        _report_progress(options, history, nemesis, options.duration_s + options.recovery_s)
        workload.stop()
        if nemesis and nemesis.error is not None:
            raise RuntimeError(f"the nemesis failed: {nemesis.error!r}") from nemesis.error
        _read_back(options, bootstrap, cluster, assignment, history)
    result = check(history.ops)
    verdict = judge(result, options.scenario.expected)
    title = f"kraftlog chaos: {options.scenario.name}, seed {options.seed}, {options.duration_s:.0f}s"
    info = {
        "scenario": options.scenario.name,
        "seed": options.seed,
        "replay": replay_command(options),
        "duration_s": options.duration_s,
        "bootstrap": options.bootstrap,
        "workload": asdict(options.workload),
        "cluster": asdict(options.scenario.cluster),
        "expected_anomalies": sorted(options.scenario.expected),
        "steps": [asdict(s) for s in steps],
    }
    report = write_report(options.report_dir, title, info, history, result, verdict)
    return RunResult(result, verdict, report, summary(title, result, verdict), steps)


@contextmanager
def _local_cluster(options: RunOptions) -> Iterator[ChaosCluster]:
    """Toxiproxy and a ChaosCluster for the run; every process stopped on the way out."""
    scenario = options.scenario
    if scenario.cluster.namespaces:
        reason = fabric_unavailable_reason(scenario.cluster.link_emulator)
        if reason:
            raise ValueError(f"scenario {scenario.name}: {reason}")
        with netns_cluster(options.report_dir / "cluster", scenario.cluster, options.progress) as cluster:
            yield cluster
        return
    missing = ChaosCluster.missing_flags(scenario.cluster, scenario.needs_proxied_clients)
    if missing:
        raise ValueError(f"scenario {scenario.name} needs broker flags this broker lacks: {', '.join(missing)}")
    directory = options.report_dir
    with open(directory / "toxiproxy.log", "ab") as log, start_toxiproxy(log_file=log) as proxy:
        cluster = ChaosCluster.build(directory / "cluster", scenario.cluster, Network(proxy))
        options.progress(f"starting {len(cluster.controllers)} controllers and {len(cluster.brokers)} brokers in {directory / 'cluster'}"
                         + (" (mutual TLS)" if cluster.secure else ""))
        try:
            with _client_config(cluster):
                if scenario.cluster.broker_disk_mb:
                    cluster.mount_broker_disks()
                cluster.start_and_wait()
                yield cluster
        finally:
            for node in cluster.nodes:
                cluster.kill(node)
            if scenario.cluster.broker_disk_mb:
                cluster.unmount_broker_disks()


@contextmanager
def _client_config(cluster: ChaosCluster) -> Iterator[None]:
    """For a secure cluster, every client of the run (workload, nemesis, checks) takes the
    cluster's client config (``KRAFTLOG_CLIENT_CONFIG``), restored afterwards."""
    if not cluster.secure:
        yield
        return
    previous = os.environ.get(CLIENT_CONFIG_ENV)
    os.environ[CLIENT_CONFIG_ENV] = str(cluster.client_config_path.resolve())
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CLIENT_CONFIG_ENV, None)
        else:
            os.environ[CLIENT_CONFIG_ENV] = previous


def _create_topic(bootstrap: str, settings: WorkloadSettings) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([(settings.topic, settings.partitions, settings.replication_factor)], settings.topic_configs())
    wait_for_leaders(bootstrap, settings, READY_TIMEOUT_S)


def _report_progress(options: RunOptions, history: History, nemesis: Nemesis | None, until_s: float) -> None:
    """Prints counts every PROGRESS_EVERY_S until the run's clock reaches ``until_s``."""
    while history.now() < until_s:
        time.sleep(min(PROGRESS_EVERY_S, max(until_s - history.now(), 0)))  # a progress ticker: nothing waits on it
        ops = history.ops
        sends = [op for op in ops if isinstance(op, SendOp)]
        outcomes = {o: sum(1 for s in sends if s.outcome == o) for o in ("ok", "failed", "unknown")}
        polled = sum(len(r) for op in ops if isinstance(op, PollOp) for r in op.reads.values())
        fault = f" | {nemesis.current}" if nemesis and nemesis.current else ""
        options.progress(f"[{history.now():6.1f}s] acked {outcomes['ok']} failed {outcomes['failed']} unknown {outcomes['unknown']} polled {polled}{fault}")


def _read_back(options: RunOptions, bootstrap: str, cluster: ChaosCluster | None, assignment: Assignment, history: History) -> None:
    """The replica comparison after healing, the final read and the replicas' records, into
    the history."""
    settings = options.workload
    comparison = compare_replicas(bootstrap, settings.topic, assignment, history, HEAL_DEADLINE_S, quiescent=True)
    settled, partitions = settled_partitions(comparison)
    if settled < partitions:
        options.progress(f"{partitions - settled} of {partitions} partitions not back in their full ISR, caught up, {HEAL_DEADLINE_S:.0f}s after healing: the checker reports them")
    for op in final_reads(bootstrap, settings, history, FINAL_READ_S):
        history.add(op)
    if cluster is not None:
        cluster.stop()
        comparison = read_replica_files(comparison, {b.node_id: cluster.data_dir / b.name for b in cluster.brokers}, settings.topic)
    for op in comparison:
        history.add(op)
    compared = sum(1 for op in comparison if isinstance(op, ReplicaOp))
    options.progress(f"final read taken; {compared} of {sum(map(len, assignment.values()))} replicas compared")
