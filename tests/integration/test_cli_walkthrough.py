"""The CLI as a new user meets it: the README's "Using it" commands run exactly as written
against a real cluster of three brokers; with a broker killed, a write that no broker can
take now (acks=all below min.insync.replicas) is refused at once in one line saying what to
do, instead of after the producer's two-minute delivery timeout, and a read of a topic with
a partition left without a leader reads the others and says which one it left out, instead
of failing whole after the consumer's 30 s request timeout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_cli_errors import kraftlog, one_error_line

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
# the commands of "Using it" that talk to a running cluster; perf, chaos and cluster
# commands are long runs or change the cluster itself, and are exercised by their own tests
CLIENT_COMMANDS = {"topics", "produce", "consume", "groups", "transactions", "records", "quorum", "leaders", "partitions"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("cli-walkthrough"), controllers=1, brokers=3) as c:
        yield c


def readme_client_commands() -> list[str]:
    """The lines of README's "Using it" block whose kraftlog command is in CLIENT_COMMANDS, in order."""
    section = README.read_text().split("## Using it", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)[1]
    return [line for line in block.splitlines()
            if (m := re.search(r"\bkraftlog (\S+)", line)) and m[1] in CLIENT_COMMANDS]


def test_the_readme_commands_run_as_written(cluster: TestCluster, tmp_path: Path) -> None:
    commands = readme_client_commands()
    assert commands[0].startswith("kraftlog topics create events") and any(c.startswith("kraftlog records delete") for c in commands)
    env = {**os.environ, "KRAFTLOG_BOOTSTRAP": cluster.bootstrap, "KRAFTLOG_DATA_DIR": str(tmp_path / "no-local-cluster")}
    for command in commands:
        done = subprocess.run(["bash", "-c", f'kraftlog() {{ "{sys.executable}" -m cli "$@"; }}\nset -o pipefail\n{command}'],
                              env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, f"{command}\n{done.stdout.decode()}{done.stderr.decode()}"
        if command.startswith("kraftlog consume events --from-beginning"):
            assert done.stdout.decode().split() == ["a", "b", "c"]


def test_with_a_broker_killed_produce_and_consume_say_at_once_what_they_cannot_do(cluster: TestCluster) -> None:
    from data_plane.client import Admin

    cluster.create_topic("guarded", partitions=1, replication_factor=2, configs={"min.insync.replicas": "2"})
    cluster.create_topic("spread", partitions=6, replication_factor=1)
    keyed = b"".join(b"k%d:v\n" % i for i in range(30))  # keys spread the records over the partitions
    assert kraftlog("produce", "spread", "--key-separator", ":", "--bootstrap", cluster.bootstrap, stdin=keyed).returncode == 0
    leader = cluster.broker(cluster.leader("guarded", 0))
    with Admin(cluster.bootstrap) as admin:
        orphans = sorted(p.partition for p in admin.describe_topics(["spread"])["spread"].partitions.values() if p.leader == leader.node_id)
    assert orphans  # six partitions over three brokers: the killed one leads some
    cluster.kill(leader)
    try:
        def isr_shrunk() -> bool:
            with Admin(cluster.bootstrap) as admin:
                partition = admin.describe_topics(["guarded"])["guarded"].partitions[0]
            return partition.leader not in (-1, leader.node_id) and len(partition.isr) == 1

        wait_for(isr_shrunk, 30, "the killed leader's replica out of the ISR of guarded-0")
        started = time.monotonic()
        line = one_error_line(kraftlog("produce", "guarded", "--bootstrap", cluster.bootstrap))
        assert time.monotonic() - started < 20  # not the producer's 120 s delivery timeout
        assert "guarded-0 has 1 in-sync replica(s)" in line and "fewer than min.insync.replicas=2" in line
        assert "kraftlog cluster up" in line and "--acks 1" in line  # what to do
        accepted = kraftlog("produce", "guarded", "--acks", "1", "--bootstrap", cluster.bootstrap)
        assert accepted.returncode == 0, accepted.stderr.decode()

        wait_for(lambda: cluster.leader("spread", orphans[0]) == -1, 30, f"spread-{orphans[0]} without a leader")
        started = time.monotonic()
        read = kraftlog("consume", "spread", "--from-beginning", "--timeout-ms", "2000", "--bootstrap", cluster.bootstrap)
        assert time.monotonic() - started < 20 and read.returncode == 0, read.stderr.decode()
        left_out = "; ".join(f"spread-{p} has no leader" for p in orphans)
        assert read.stdout and read.stderr.decode().startswith(f"kraftlog consume: warning: {left_out}: not read by this command")
        line = one_error_line(kraftlog("consume", "spread", "--partition", str(orphans[0]), "--bootstrap", cluster.bootstrap))
        assert line.startswith(f"kraftlog consume: nothing can be read now: spread-{orphans[0]} has no leader")
    finally:
        cluster.restart(leader)
        cluster.wait_ready()



def test_consume_from_beginning_reads_the_other_partitions_while_one_leader_hangs(cluster: TestCluster) -> None:
    """A leader that takes requests but never answers (SIGSTOPped: the metadata still names
    it) held up every partition of ``consume --from-beginning`` without ``--group``: their
    starts were resolved all at once, and the command failed after the 30 s request timeout
    having printed nothing. Now each leader's partitions start on their own: the others'
    records are printed while the hung leader's partitions wait for it."""
    from data_plane.client import Admin, Consumer

    cluster.create_topic("hung", partitions=6, replication_factor=1)
    keyed = b"".join(b"k%d:v%d\n" % (i, i) for i in range(60))  # keys spread the records over the partitions
    assert kraftlog("produce", "hung", "--key-separator", ":", "--bootstrap", cluster.bootstrap, stdin=keyed).returncode == 0
    with Admin(cluster.bootstrap) as admin:
        partitions = list(admin.describe_topics(["hung"])["hung"].partitions.values())
    hung_id = max(p.leader for p in partitions)  # not the first bootstrap address: metadata still comes at once
    others = [p.partition for p in partitions if p.leader != hung_id]
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as counter:
        counter.assign([("hung", p) for p in others])
        counter.seek_to_end()
        readable = sum(counter.position(("hung", p)) for p in others)
    assert 0 < readable < 60, readable
    node = cluster.broker(hung_id)
    cluster.signal(node, signal.SIGSTOP)
    try:
        started = time.monotonic()
        read = subprocess.run([sys.executable, "-m", "cli", "consume", "hung", "--from-beginning", "--max-messages", str(readable),
                               "--bootstrap", cluster.bootstrap], capture_output=True, timeout=60)
        took = time.monotonic() - started
    finally:
        cluster.signal(node, signal.SIGCONT)
    assert read.returncode == 0, read.stderr.decode()
    assert len(read.stdout.split()) == readable, (read.stdout, took)
