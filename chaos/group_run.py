"""The consumer-group chaos run: a group of member processes reads a topic while brokers,
the group's coordinator and members are killed; then the group checks
(``chaos/checker/group_checks.py``) judge the history.

    python -m chaos.group_run --duration 30 --seed 1 --report ./group-report [--unsafe]

What runs: a local cluster (1 controller, 3 brokers, short group session timeout), a
6-partition RF=3 topic (min.insync.replicas 2), the chaos workload's idempotent acks=all
producers (``ProducerWorker``), three members (``chaos/workload/group_member.py``, each its
own OS process, auto-commit every 200 ms, spending 500 ms on each poll's records, so a
revocation takes a while, as in a real application) and an observer asking the coordinator for the
group's committed offsets every 0.2 s. A seeded schedule picks, every few seconds, one of:
SIGKILL the coordinator's broker (restarted 1-3 s later), SIGKILL another broker (the
same), SIGKILL a member (a new one starts in its place), SIGTERM a member (it commits and
leaves; a new one starts). After ``duration`` every broker is started again, the producers
stop, the members read until they have every acknowledged record (or ``DRAIN_S``), and
close (committing), and the observer takes the final committed offsets.

Ownership is judged from two records. The coordinator's: a coordinator logs every member's
current assignment it writes (``ownership_events``), across coordinator moves. The members':
each member notes when it took partitions on and when it stopped reading them
(``MemberProcess.ownership_changes``; a SIGKILLed member releases everything at the kill).
With ``--unsafe`` the brokers run the coordinator's negative control (``--unsafe-testing
assign-before-revoke``: a partition handed out before its owner revoked it), which the run
must catch as ``double-owner``: the coordinator's record shows no overlap there (it believes
the revocation it assumed), the members' does.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.checker.group_checks import GroupAnomaly, check_group
from chaos.group_history import CommittedObservation, GroupPoll, MemberOwnershipChange, OwnershipEvent
from chaos.history import History, SendOp
from chaos.workload.producer_worker import ProducerWorker
from chaos.workload.settings import WorkloadSettings
from server_common.local_cluster import LocalCluster, Node, wait_ready
from server_common.logging_setup import configure_logging
from server_common.waiting import wait_for

GROUP = "chaos-group"
MEMBERS = 3
SESSION_TIMEOUT_MS = 4000
GROUP_BROKER_ARGS = ["--group-session-timeout-ms", str(SESSION_TIMEOUT_MS), "--group-heartbeat-interval-ms", "300"]
FAULT_GAP_S = (3.0, 6.0)
DOWN_S = (1.0, 3.0)
DRAIN_S = 60.0
OBSERVE_INTERVAL_S = 0.2
PROCESS_MS = 500  # each member's work per poll: a revocation waits up to this long, as in a real application
FAULTS = ("kill-coordinator", "kill-broker", "kill-member", "stop-member")
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class GroupRunResult:
    anomalies: list[GroupAnomaly]
    faults: list[tuple[float, str]]
    acked: int
    read: int
    ownership_events: int
    report: Path
    expected: frozenset[str] = field(default_factory=frozenset)

    @property
    def verdict(self) -> str:
        """passed / failed for a safe run; caught / missed for the negative control."""
        found = {a.kind for a in self.anomalies}
        if self.expected:
            return "caught" if found & self.expected else "missed"
        return "failed" if found else "passed"


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


def run(duration_s: float, seed: int, report_dir: Path, unsafe: str = "", progress=print) -> GroupRunResult:
    """One run; writes ``report_dir/group-report.json`` and returns the result."""
    from data_plane.client import Admin
    from data_plane.client.group_admin import GroupAdmin

    rng = random.Random(seed)
    settings = WorkloadSettings(topic="chaos-group", partitions=6, single_attempt_producers=0, rate_per_s=50)
    report_dir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster.create(report_dir / "cluster", controllers=1, brokers=3)
    for node in cluster.brokers:
        node.extra_args = [*GROUP_BROKER_ARGS, *(["--unsafe-testing", unsafe] if unsafe else [])]
    faults: list[tuple[float, str]] = []
    members: list[MemberProcess] = []
    try:
        cluster.start()
        wait_ready(cluster)
        bootstrap = cluster.bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topics([(settings.topic, settings.partitions, settings.replication_factor)], settings.topic_configs())
        history = History()
        started_at = time.time() - history.now()
        producers = [ProducerWorker(f"producer-{i}", bootstrap, settings, history, single_attempt=False) for i in range(settings.producers)]
        for p in producers:
            p.start()
        members = [MemberProcess(bootstrap, settings.topic, report_dir / f"member-{i}.jsonl") for i in range(MEMBERS)]
        observer = CommittedObserver(bootstrap, settings.topic, started_at)
        observer.start()
        down: dict[str, tuple[Node, float]] = {}
        next_fault = time.monotonic() + rng.uniform(*FAULT_GAP_S)
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            for name, (node, until) in list(down.items()):
                if time.monotonic() >= until:
                    cluster.start_node(node)
                    del down[name]
            if time.monotonic() >= next_fault:
                fault = rng.choice(FAULTS)
                faults.append((round(history.now(), 3), _inject(fault, rng, cluster, members, down, bootstrap, settings.topic, report_dir)))
                progress(f"[{history.now():6.1f}s] {faults[-1][1]}")
                next_fault = time.monotonic() + rng.uniform(*FAULT_GAP_S)
            time.sleep(0.1)  # the fault loop's tick: nothing waits on it
        for node, _ in down.values():
            cluster.start_node(node)
        wait_ready(cluster)
        for p in producers:
            p.stopping.set()
        for p in producers:
            p.join(settings.delivery_timeout_ms / 1000 + 5)
        acked = {}
        for op in history.ops:
            if isinstance(op, SendOp) and op.outcome == "ok":
                acked.setdefault(op.partition, {})[op.offset] = op.value

        def all_read() -> bool:
            read = {(p, o) for m in members for poll in m.polls() for p, rs in poll.reads.items() for o, _ in rs}
            return all((p, o) in read for p, offsets in acked.items() for o in offsets)

        try:
            wait_for(all_read, DRAIN_S, "the group to read every acknowledged record")
        except TimeoutError as err:
            progress(str(err))
        for m in members:
            if m.proc.poll() is None:
                m.proc.terminate()
        for m in members:
            m.proc.wait(30)
        observer.stopping.set()
        observer.join(10)
        with GroupAdmin(bootstrap, request_timeout_ms=30_000) as admin:
            final = observer.observe(admin)
        polls = [poll for m in members for poll in m.polls()]
        cluster.stop()
        ownership = ownership_events(cluster.data_dir / "logs", GROUP, settings.topic)
        member_changes = [c for m in members for c in m.ownership_changes(started_at)]
        anomalies = check_group(acked, polls, observer.observations, final, ownership, member_changes)
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()
        cluster.kill_all()
    result = GroupRunResult(
        anomalies, faults, sum(map(len, acked.values())), sum(len(rs) for poll in polls for rs in poll.reads.values()),
        len(ownership), report_dir / "group-report.json", frozenset({"double-owner"}) if unsafe else frozenset(),
    )
    result.report.write_text(json.dumps({
        "verdict": result.verdict, "seed": seed, "duration_s": duration_s, "unsafe": unsafe, "faults": faults,
        "acked": result.acked, "records_read": result.read, "ownership_events": result.ownership_events,
        "anomalies": [{"kind": a.kind, "partition": a.partition, "message": a.message, **a.details} for a in anomalies[:50]],
    }, indent=2, default=str))
    return result


def _inject(fault: str, rng: random.Random, cluster: LocalCluster, members: list[MemberProcess], down: dict,
            bootstrap: str, topic: str, report_dir: Path) -> str:
    """Carries out one fault; returns what was done."""
    from data_plane.client import KraftlogError
    from data_plane.client.group_admin import GroupAdmin

    if fault in ("kill-coordinator", "kill-broker"):
        up = [b for b in cluster.brokers if b.name not in down]
        coordinator = -1
        try:
            with GroupAdmin(bootstrap, request_timeout_ms=2000) as admin:
                link = admin.link(GROUP)
                link.find(2.0)
                coordinator = link.coordinator_id
        except KraftlogError:
            pass
        candidates = [b for b in up if (b.node_id == coordinator) == (fault == "kill-coordinator")] or up
        if len(up) < 2:
            return f"{fault}: skipped (only {len(up)} broker up)"
        victim = rng.choice(candidates)
        cluster.kill(victim)
        down[victim.name] = (victim, time.monotonic() + rng.uniform(*DOWN_S))
        return f"{fault}: SIGKILL {victim.name} (coordinator was broker {coordinator})"
    old = rng.choice([m for m in members if m.proc.poll() is None])
    if fault == "kill-member":
        old.killed()
    else:
        old.proc.terminate()
        old.proc.wait(30)
    members.append(MemberProcess(bootstrap, topic, report_dir / f"member-{len(members)}.jsonl"))  # the old one's history stays
    return f"{fault}: {'SIGKILL' if fault == 'kill-member' else 'SIGTERM'} {old.path.stem}, started {members[-1].path.stem}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.group_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", type=Path, default=Path("group-chaos-report"))
    parser.add_argument("--unsafe", action="store_const", const="assign-before-revoke", default="",
                        help="the negative control: brokers hand partitions over before they are revoked (--unsafe-testing assign-before-revoke)")
    args = parser.parse_args(argv)
    configure_logging(level="WARNING")
    result = run(args.duration, args.seed, args.report, args.unsafe)
    print(f"verdict: {result.verdict}; {result.acked} acknowledged, {result.read} read, {len(result.faults)} faults, "
          f"{result.ownership_events} ownership events; anomalies: {sorted({a.kind for a in result.anomalies}) or 'none'} ({result.report})")
    return {"passed": 0, "caught": 0, "failed": 1, "missed": 2}[result.verdict]


if __name__ == "__main__":
    sys.exit(main())
