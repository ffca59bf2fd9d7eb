"""The consumer-group scenarios of ``kraftlog chaos`` (``group-kills`` and its negative control
``unsafe-group-assign-before-revoke``): a group of member processes reads a topic while
brokers, the group's coordinator and members are killed and the coordinator's links are cut;
then the group checks (``chaos/checker/group_checks.py``) judge the history.

    kraftlog chaos run --scenario group-kills --duration 30 --seed 1

What runs: a ``ChaosCluster`` (1 controller, 3 brokers, every client and replication link
through a Toxiproxy proxy, short group session timeout), a 6-partition RF=3 topic
(min.insync.replicas 2), the chaos workload's idempotent acks=all producers
(``ProducerWorker``), three members (``chaos/workload/group_member.py``, each its own OS
process, auto-commit every 200 ms, spending 500 ms on each poll's records, so a revocation
takes a while, as in a real application) and an observer asking the coordinator for the
group's committed offsets every 0.2 s. A seeded schedule picks, every few seconds, one of
``FAULTS``: SIGKILL the coordinator's broker or another broker (restarted 1-3 s later);
SIGKILL a member (a new one starts in its place) or SIGTERM one (it commits and leaves; a new
one starts); cut the coordinator's client link (every client loses it: members cannot
heartbeat, and a cut longer than the session timeout removes them) or the replication links
into the coordinator's broker (its offsets partition's followers stop fetching, so commits
stall below min.insync.replicas), each for 1-6 s. After ``duration`` everything is healed, the
producers stop, the members read until every acknowledged record is committed or read by a
running member (or ``DRAIN_S``) and close (committing), and the observer takes the final
committed offsets.

Ownership is judged from two records. The coordinator's: a coordinator logs every member's
current assignment it writes (``ownership_events``), across coordinator moves. The members':
each member notes when it took partitions on and when it stopped reading them
(``MemberProcess.ownership_changes``; a SIGKILLed member releases everything at the kill).
The negative control runs the brokers with ``--unsafe-testing assign-before-revoke`` (a
partition handed out before its owner revoked it), which must be caught as ``double-owner``:
the coordinator's record shows no overlap there (it believes the revocation it assumed), the
members' does.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from chaos.chaos_cluster import ChaosCluster
from chaos.checker.group_checks import GroupCheckResult, check_group
from chaos.coordinator_faults import FAULTS as COORDINATOR_FAULTS
from chaos.coordinator_faults import CoordinatorFaults
from chaos.coordinator_run import findings_result, proxied_cluster
from chaos.group_history import CommittedObservation, GroupPoll, MemberOwnershipChange, OwnershipEvent
from chaos.history import History, SendOp
from chaos.workload.producer_worker import ProducerWorker
from chaos.workload.settings import WorkloadSettings
from chaos.run_options import RunOptions, RunResult
from server_common.waiting import wait_for

GROUP = "chaos-group"
MEMBERS = 3
SESSION_TIMEOUT_MS = 4000
GROUP_BROKER_ARGS = ["--group-session-timeout-ms", str(SESSION_TIMEOUT_MS), "--group-heartbeat-interval-ms", "300"]
FAULT_GAP_S = (3.0, 6.0)
DOWN_S = (1.0, 3.0)
CUT_S = (1.0, 6.0)  # some cuts outlast the session timeout
DRAIN_S = 60.0
OBSERVE_INTERVAL_S = 0.2
PROCESS_MS = 500  # each member's work per poll: a revocation waits up to this long, as in a real application
FAULTS = ("kill-coordinator", "kill-broker", "kill-member", "stop-member", "cut-coordinator-clients", "cut-coordinator-replication")
WORKLOAD = WorkloadSettings(topic="chaos-group", partitions=6, single_attempt_producers=0, rate_per_s=50)
ROOT = Path(__file__).resolve().parents[1]


class MemberProcess:
    """One member (chaos/workload/group_member.py) and its events file."""

    def __init__(self, bootstrap: str, topic: str, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chaos.workload.group_member", bootstrap, GROUP, topic, str(path), "", str(PROCESS_MS), str(SESSION_TIMEOUT_MS)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(str(path) + ".log", "ab"),
        )

    def events(self) -> list[dict]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        return [json.loads(line) for line in lines if line.endswith("}")]  # a line cut short by a SIGKILL is left out

    def killed(self) -> None:
        """SIGKILLs the member and notes when: everything it held is released from then on."""
        self.proc.kill()
        self.proc.wait(30)
        with open(self.path, "a") as events:
            events.write("\n" + json.dumps({"killed": True, "at": time.time()}) + "\n")

    def ownership_changes(self, started_at: float) -> list[MemberOwnershipChange]:
        changes, held = [], set()
        for event in self.events():
            at = event["at"] - started_at
            if "gained" in event:
                held |= set(event["gained"])
                changes.append(MemberOwnershipChange(at, self.path.stem, gained=frozenset(event["gained"])))
            elif "released" in event:
                held -= set(event["released"])
                changes.append(MemberOwnershipChange(at, self.path.stem, released=frozenset(event["released"])))
            elif "killed" in event:
                changes.append(MemberOwnershipChange(at, self.path.stem, released=frozenset(held)))
                held = set()
        return changes

    def polls(self) -> list[GroupPoll]:
        polls = []
        for event in self.events():
            if "read" in event:
                reads: dict[int, list] = {}
                for partition, offset, value in event["read"]:
                    reads.setdefault(partition, []).append((offset, value))
                polls.append(GroupPoll(self.path.stem, event["at"], event["at"], reads))
        return polls


class CommittedObserver(threading.Thread):
    """Asks the coordinator for the group's committed offsets, one request after another."""

    def __init__(self, bootstrap: str, topic: str, started_at: float) -> None:
        super().__init__(name="committed-observer", daemon=True)
        self.bootstrap, self.topic, self.started_at = bootstrap, topic, started_at
        self.observations: list[CommittedObservation] = []
        self.stopping = threading.Event()

    def observe(self, admin) -> CommittedObservation:
        offsets = admin.committed_offsets(GROUP)
        return CommittedObservation(time.time() - self.started_at, {p: o for (t, p), o in offsets.items() if t == self.topic})

    def run(self) -> None:
        from data_plane.client import KraftlogError
        from data_plane.client.group_admin import GroupAdmin

        with GroupAdmin(self.bootstrap, request_timeout_ms=3000) as admin:
            while not self.stopping.wait(OBSERVE_INTERVAL_S):
                try:
                    self.observations.append(self.observe(admin))
                except KraftlogError:
                    continue  # the coordinator is moving: the next round asks again


def ownership_events(log_dir: Path, group: str, topic: str) -> list[OwnershipEvent]:
    """The coordinators' ownership history of ``group`` on ``topic`` from every broker's JSON
    log: each ``group assignment`` line is a member's current assignment as the coordinator
    wrote it (after the write reached the offsets partition's HW): the partitions it may own
    (``assigned``) and those it has yet to give up (``pending_revocation``); it holds both.
    A removed member's line holds nothing. Lines are ordered by their timestamp, then by
    their place in their broker's log."""
    found: list[tuple[str, int, int, dict]] = []
    for file_index, path in enumerate(sorted(log_dir.glob("broker-*.log"))):
        for line_index, line in enumerate(path.read_text(errors="replace").splitlines()):
            if '"group assignment"' not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a SIGKILL
            if entry.get("group") == group:
                found.append((entry.get("timestamp", ""), file_index, line_index, entry))
    events = []
    for seq, (_, _, _, entry) in enumerate(sorted(found, key=lambda f: f[:3])):
        held = set(entry.get("assigned", {}).get(topic, [])) | set(entry.get("pending_revocation", {}).get(topic, []))
        events.append(OwnershipEvent(seq, entry["member"], "assigned", frozenset(held), int(entry.get("member_epoch", -1))))
    return events


def run_group(options: RunOptions) -> RunResult:
    """One group scenario run; writes ``group-report.json`` in the report directory."""
    with proxied_cluster(options, GROUP_BROKER_ARGS) as cluster:
        run = _GroupRun(cluster, random.Random(options.seed), options.report_dir, options.progress)
        try:
            anomalies = run.play(options.duration_s)
        finally:
            run.kill_everything()
    acked, read = sum(map(len, run.acked.values())), sum(len(rs) for poll in run.polls for rs in poll.reads.values())
    return findings_result(options, GroupCheckResult(anomalies), run.faults,
                           {"acked": acked, "records_read": read, "ownership_events": run.ownership},
                           f"{acked} acknowledged, {read} read by the group, {run.ownership} ownership events", "group-report.json")


class _GroupRun:
    """The cluster, producers, members and observer of one run, and the faults played on them."""

    def __init__(self, cluster: ChaosCluster, rng: random.Random, report_dir: Path, progress) -> None:
        self.cluster, self.rng, self.report_dir, self.progress = cluster, rng, report_dir, progress
        self.members: list[MemberProcess] = []
        self.producers: list[ProducerWorker] = []
        self.broker_faults = CoordinatorFaults(cluster, rng, self._coordinator, DOWN_S, CUT_S)
        self.faults: list[tuple[float, str]] = []
        self.acked: dict[int, dict[int, str]] = {}
        self.polls: list[GroupPoll] = []
        self.ownership = 0

    def play(self, duration_s: float) -> list:
        from data_plane.client import Admin
        from data_plane.client.group_admin import GroupAdmin

        cluster, settings = self.cluster, WORKLOAD
        cluster.start_and_wait()
        bootstrap = self.bootstrap = cluster.client_bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topics([(settings.topic, settings.partitions, settings.replication_factor)], settings.topic_configs())
        history = History()
        started_at = time.time() - history.now()
        producers = self.producers = [ProducerWorker(f"producer-{i}", bootstrap, settings, history, single_attempt=False)
                                      for i in range(settings.producers)]
        for p in producers:
            p.start()
        self.members = [MemberProcess(bootstrap, settings.topic, self.report_dir / f"member-{i}.jsonl") for i in range(MEMBERS)]
        observer = CommittedObserver(bootstrap, settings.topic, started_at)
        observer.start()
        self.progress(f"{MEMBERS} members of group {GROUP} reading {settings.topic}; faults for {duration_s:.0f}s")
        self.faults = self.broker_faults.play(duration_s, FAULT_GAP_S, FAULTS, self._inject, history.now, self.progress)
        self.progress("faults healed; the group reads what was acknowledged")
        for p in producers:
            p.stopping.set()
        for p in producers:
            p.join(settings.delivery_timeout_ms / 1000 + 5)
        for op in history.ops:
            if isinstance(op, SendOp) and op.outcome == "ok":
                self.acked.setdefault(op.partition, {})[op.offset] = op.value

        def all_read() -> bool:
            """Every acknowledged record below the committed offset last observed, or read by a
            member still running (it commits what it read when it closes). A record read only
            by a member since SIGKILLed or stopped, past the offset that member committed, is
            read again by the partition's next owner once the group has rebalanced: ending
            before that would leave the final commit behind a read through no fault of the
            cluster's."""
            committed = observer.observations[-1].offsets if observer.observations else {}
            read = {(p, o) for m in self.members if m.proc.poll() is None
                    for poll in m.polls() for p, rs in poll.reads.items() for o, _ in rs}
            return all(o < committed.get(p, 0) or (p, o) in read for p, offsets in self.acked.items() for o in offsets)

        try:
            wait_for(all_read, DRAIN_S, "the group to read every acknowledged record")
        except TimeoutError as err:
            self.progress(str(err))
        for m in self.members:
            if m.proc.poll() is None:
                m.proc.terminate()
        for m in self.members:
            m.proc.wait(30)
        observer.stopping.set()
        observer.join(10)
        with GroupAdmin(bootstrap, request_timeout_ms=30_000) as admin:
            final = observer.observe(admin)
        self.polls = [poll for m in self.members for poll in m.polls()]
        cluster.stop()
        ownership = ownership_events(cluster.data_dir / "logs", GROUP, settings.topic)
        self.ownership = len(ownership)
        member_changes = [c for m in self.members for c in m.ownership_changes(started_at)]
        return check_group(self.acked, self.polls, observer.observations, final, ownership, member_changes)

    def kill_everything(self) -> None:
        for p in self.producers:
            p.stopping.set()
        for m in self.members:
            if m.proc.poll() is None:
                m.proc.kill()
        self.cluster.kill_all()

    def _coordinator(self) -> int:
        """The group coordinator's broker id as the cluster says now (-1: unknown)."""
        from data_plane.client import KraftlogError
        from data_plane.client.group_admin import GroupAdmin

        try:
            with GroupAdmin(self.bootstrap, request_timeout_ms=2000) as admin:
                link = admin.link(GROUP)
                link.find(2.0)
                return link.coordinator_id
        except KraftlogError:
            return -1

    def _inject(self, fault: str) -> str:
        """Carries out one fault; returns what was done."""
        if fault in COORDINATOR_FAULTS:
            return self.broker_faults.inject(fault)
        rng = self.rng
        old = rng.choice([m for m in self.members if m.proc.poll() is None])
        if fault == "kill-member":
            old.killed()
        else:
            old.proc.terminate()
            old.proc.wait(30)
        self.members.append(MemberProcess(self.bootstrap, WORKLOAD.topic, self.report_dir / f"member-{len(self.members)}.jsonl"))
        return f"{fault}: {'SIGKILL' if fault == 'kill-member' else 'SIGTERM'} {old.path.stem}, started {self.members[-1].path.stem}"
