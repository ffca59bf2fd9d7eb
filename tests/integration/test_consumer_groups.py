"""Consumer groups on real processes: one controller, three brokers, members in their own
OS processes (chaos/workload/group_member.py) where the fault is a SIGKILL.

Checks: three members share a 6-partition topic two each, and a member joining, leaving and
being SIGKILLed each ends in a stable split (joining and leaving well within the session
timeout; the killed member's partitions move once its session expires), with every produced
record read by the group; a consumer restarted with the same group resumes exactly at the
committed offsets; a SIGKILL of the coordinator's broker moves the group to the new leader of
its offsets partition with every committed offset intact; the CLI's reset-offsets plans
without changing anything, is refused while the group has members, and then commits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from data_plane.client import Consumer, Producer
from data_plane.client.group_admin import GroupAdmin
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_TIMEOUT_MS = 4000
GROUP_BROKER_ARGS = [
    "--group-session-timeout-ms", str(SESSION_TIMEOUT_MS),
    "--group-heartbeat-interval-ms", "300",
]
PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("groups"), controllers=1, brokers=3, broker_args=GROUP_BROKER_ARGS) as c:
        yield c


class Member:
    """A member process and what it reported (chaos/workload/group_member.py)."""

    def __init__(self, cluster: TestCluster, group: str, topic: str, path: Path, instance_id: str = "") -> None:
        self.path = path
        args = [sys.executable, "-m", "chaos.workload.group_member", cluster.bootstrap, group, topic, str(path), instance_id, "0", str(SESSION_TIMEOUT_MS)]
        self.proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdout=subprocess.DEVNULL, stderr=open(str(path) + ".log", "w"))

    def events(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.endswith("}")]

    def owned(self) -> set[int]:
        owned = [e["owned"] for e in self.events() if "owned" in e]
        return set(owned[-1]) if owned else set()

    def reads(self) -> list[tuple[int, int, str]]:
        return [tuple(r) for e in self.events() if "read" in e for r in e["read"]]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0, (self.path, open(str(self.path) + ".log").read()[-3000:])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def split(members: list[Member]) -> bool:
    """Every partition owned by exactly one of ``members``, shares differing by at most one."""
    owned = [m.owned() for m in members]
    flat = [p for o in owned for p in o]
    return sorted(flat) == list(range(PARTITIONS)) and max(map(len, owned)) - min(map(len, owned)) <= 1


def produce(cluster: TestCluster, topic: str, count: int, tag: str) -> set[tuple[int, int, str]]:
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(topic, f"{tag}-{i}".encode(), partition=i % PARTITIONS) for i in range(count)]
        producer.flush(30)
    return {(m.partition, m.offset, f"{tag}-{i}") for i, m in enumerate(f.result() for f in futures)}


def timed_split(members: list[Member], timeout_s: float, what: str, started: float | None = None) -> float:
    """Waits for ``split``; returns the seconds since ``started`` (default: now)."""
    started = time.monotonic() if started is None else started
    wait_for(lambda: split(members), timeout_s, what)
    return time.monotonic() - started


def test_members_join_leave_and_die_and_the_group_reads_everything(cluster, tmp_path):
    topic = "groups-share"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    sent = produce(cluster, topic, 300, "a")
    a = Member(cluster, "g-share", topic, tmp_path / "a.jsonl")
    b = Member(cluster, "g-share", topic, tmp_path / "b.jsonl")
    members = [a, b]
    try:
        timed_split([a, b], 60, "two members splitting 6 partitions")  # includes process start-up
        c = Member(cluster, "g-share", topic, tmp_path / "c.jsonl")
        members.append(c)
        wait_for(lambda: c.events(), 60, "the third member to start")
        join_s = timed_split([a, b, c], SESSION_TIMEOUT_MS / 1000, "a rebalance to 2+2+2 after a member joined")
        sent |= produce(cluster, topic, 120, "b")
        stopped = time.monotonic()
        c.stop()
        leave_s = timed_split([a, b], SESSION_TIMEOUT_MS / 1000, "a rebalance to 3+3 after a member left", stopped)
        killed = time.monotonic()
        b.kill()
        kill_s = timed_split([a], SESSION_TIMEOUT_MS / 1000 + 15, "the survivor owning everything after a SIGKILL", killed)
        sent |= produce(cluster, topic, 60, "c")
        wait_for(lambda: sent <= {r for m in members for r in m.reads()}, 60, "every produced record read by the group")
        print(f"rebalance: join {join_s:.2f}s, leave {leave_s:.2f}s, SIGKILL {kill_s:.2f}s (session timeout {SESSION_TIMEOUT_MS} ms)")
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()


def test_a_restarted_consumer_resumes_at_the_committed_offsets(cluster, tmp_path):
    topic = "groups-resume"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    produce(cluster, topic, 120, "x")
    with Consumer(cluster.bootstrap, group_id="g-resume", auto_offset_reset="earliest", enable_auto_commit=False) as first:
        first.subscribe([topic])
        read: dict[int, int] = {}
        wait_for(lambda: [read.update({r.partition: r.offset}) for r in first.poll(100)] is not None and len(read) == PARTITIONS, 30, "records of every partition")
        committed = {tp: o.offset for tp, o in first.commit().items()}
        assert committed == {(topic, p): read[p] + 1 for p in range(PARTITIONS)}
    produce(cluster, topic, 60, "y")  # every partition has records past its committed offset
    with Consumer(cluster.bootstrap, group_id="g-resume", auto_offset_reset="earliest") as second:
        second.subscribe([topic])
        first_read: dict[int, int] = {}
        wait_for(lambda: [first_read.setdefault(r.partition, r.offset) for r in second.poll(100)] is not None
                 and len(first_read) == PARTITIONS, 30, "records of every partition again")
    assert first_read == {p: committed[(topic, p)] for p in range(PARTITIONS)}


def test_the_coordinators_broker_dies_and_committed_offsets_survive(cluster, tmp_path):
    topic = "groups-coordinator"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    produce(cluster, topic, 60, "z")
    offsets = {(topic, p): 3 + p for p in range(PARTITIONS)}
    with Consumer(cluster.bootstrap, group_id="g-coord", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.subscribe([topic])
        wait_for(lambda: c.poll(50) is not None and len(c.assignment()) == PARTITIONS, 30, "the member owning every partition")
        c.commit(offsets)
        coordinator = c.group.link.coordinator_id
    assert coordinator >= 0
    victim = cluster.broker(coordinator)
    cluster.kill(victim)
    try:
        with GroupAdmin(cluster.bootstrap, request_timeout_ms=60_000) as admin:
            assert admin.committed_offsets("g-coord") == offsets
            assert admin.link("g-coord").find(30) != victim.address
        with Consumer(cluster.bootstrap, group_id="g-coord") as resumed:
            resumed.subscribe([topic])
            first_read: dict = {}
            wait_for(lambda: [first_read.setdefault((r.topic, r.partition), r.offset) for r in resumed.poll(50)] is not None
                     and len(first_read) == PARTITIONS, 60, "the group served by the new coordinator")
            assert first_read == offsets
    finally:
        cluster.start_node(victim)
        cluster.wait_ready()


def cli(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_cli_describe_and_reset_offsets_dry_run_then_execute(cluster, tmp_path):
    topic = "groups-cli"
    cluster.create_topic(topic, 2, replication_factor=3)
    produce_two = [(p, 10 * (p + 1)) for p in range(2)]
    with Producer(cluster.bootstrap) as producer:
        for p, n in produce_two:
            for i in range(n):
                producer.send(topic, b"v", partition=p)
        producer.flush(30)
    member = Consumer(cluster.bootstrap, group_id="g-cli", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        member.subscribe([topic])
        wait_for(lambda: member.poll(50) is not None and len(member.assignment()) == 2, 30, "the member owning both partitions")
        member.commit({(topic, 0): 4, (topic, 1): 5})
        described = json.loads(cli(cluster, "groups", "describe", "g-cli", "--json").stdout)
        assert len(described["members"]) == 1 and described["members"][0]["client_id"] == "kraftlog-consumer"
        assert {(p["partition"], p["committed"], p["log_end"], p["lag"]) for p in described["partitions"]} == {(0, 4, 10, 6), (1, 5, 20, 15)}
        assert "g-cli" in cli(cluster, "groups", "list").stdout
        refused = cli(cluster, "groups", "reset-offsets", "g-cli", "--topic", topic, "--to-earliest", "--execute")
        assert refused.returncode == 1 and "has 1 member: stop its consumers" in refused.stderr
    finally:
        member.close()
    wait_for(lambda: not json.loads(cli(cluster, "groups", "describe", "g-cli", "--json").stdout)["members"], 30, "the member gone")
    dry = cli(cluster, "groups", "reset-offsets", "g-cli", "--topic", topic, "--shift-by", "-2", "--json")
    assert dry.returncode == 0, dry.stderr
    assert [(s["partition"], s["current"], s["target"]) for s in json.loads(dry.stdout)["plan"]] == [(0, 4, 2), (1, 5, 3)]
    with GroupAdmin(cluster.bootstrap) as admin:
        assert admin.committed_offsets("g-cli") == {(topic, 0): 4, (topic, 1): 5}  # a dry run changes nothing
    done = cli(cluster, "groups", "reset-offsets", "g-cli", "--topic", topic, "--to-latest", "--execute")
    assert done.returncode == 0, done.stderr
    with GroupAdmin(cluster.bootstrap) as admin:
        assert admin.committed_offsets("g-cli") == {(topic, 0): 10, (topic, 1): 20}
    assert cli(cluster, "groups", "delete", "g-cli").returncode == 0
    assert "g-cli" not in cli(cluster, "groups", "list").stdout


def test_a_static_member_back_within_its_session_keeps_its_partitions_without_a_rebalance(cluster):
    topic = "groups-static"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)

    def member(instance_id: str = "") -> Consumer:
        c = Consumer(cluster.bootstrap, group_id="g-static", group_instance_id=instance_id, auto_offset_reset="earliest")
        c.subscribe([topic])
        return c

    def settled(consumers) -> bool:
        for c in consumers:
            c.poll(20)
        owned = [p for c in consumers for p in c.assignment()]
        return len(owned) == len(set(owned)) == PARTITIONS and all(c.assignment() for c in consumers)

    dynamic, static = member(), member("worker-1")
    try:
        wait_for(lambda: settled([dynamic, static]), 30, "two members splitting the partitions")
        kept, static_owned, epoch = dynamic.assignment(), static.assignment(), dynamic.group.member_epoch
        static.close()  # member epoch -2: the coordinator keeps its partitions for it
        static = member("worker-1")
        wait_for(lambda: settled([dynamic, static]), 30, "the static member back")
        assert static.assignment() == static_owned
        assert dynamic.assignment() == kept and dynamic.group.member_epoch == epoch  # no rebalance
    finally:
        dynamic.close()
        static.close()


def test_consume_group_commits_what_it_printed_and_the_next_run_continues(cluster):
    topic = "groups-console"
    cluster.create_topic(topic, 2, replication_factor=3)
    with Producer(cluster.bootstrap) as producer:
        for i in range(10):
            producer.send(topic, f"r{i}".encode(), partition=i % 2)
        producer.flush(30)
    first = cli(cluster, "consume", topic, "--group", "g-console", "--from-beginning", "--max-messages", "4")
    second = cli(cluster, "consume", topic, "--group", "g-console", "--from-beginning", "--timeout-ms", "3000")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    printed = first.stdout.split() + second.stdout.split()
    assert len(first.stdout.split()) == 4 and sorted(printed) == sorted(f"r{i}" for i in range(10))  # nothing twice, nothing lost
