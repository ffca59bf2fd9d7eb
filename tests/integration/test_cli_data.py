"""``kraftlog produce`` and ``kraftlog consume`` as a user runs them (subprocesses against a
real cluster): what a group consumer has saved when it is killed, and what the commands say
and print at the edges."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys

import pytest

from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

F_SETPIPE_SZ = 1031  # Linux: the pipe's capacity


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    # a killed member's partitions go to the next one after the session timeout: short here
    broker_args = ["--group-session-timeout-ms", "3000", "--group-heartbeat-interval-ms", "500"]
    with local_cluster(tmp_path_factory.mktemp("cli-data"), controllers=1, brokers=1, broker_args=broker_args) as c:
        yield c


def kraftlog(cluster: TestCluster, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], input=stdin, capture_output=True, timeout=60)


def test_a_group_consumer_killed_while_working_through_a_backlog_re_reads_about_one_interval(cluster: TestCluster) -> None:
    """A backlog arrives in stream messages of ~40,000 small records; ``consume --group``
    committed once per poll, and a poll handed all of them out, so a reader slower than the
    broker saw no commit at all for tens of thousands of records and a crash re-read them all.
    Now a poll hands out at most 500 and what was printed is committed every interval.

    The reader here reads 10 lines, then asks the group's committed offset (its pace: about a
    thousand lines per 100 ms interval); what the consumer printed but the restart reads
    again is at most one interval's worth, one poll (500) and the pipe (4 KiB, ~585 lines)."""
    from data_plane.client import Consumer, Producer

    total, read_before_kill, bound = 50_000, 20_000, 4_000
    cluster.create_topic("backlog")
    with Producer(cluster.bootstrap) as producer:
        for i in range(total):
            producer.send("backlog", b"%06d" % i, partition=0)
    member = subprocess.Popen([sys.executable, "-m", "cli", "consume", "backlog", "--group", "crash", "--from-beginning",
                               "--commit-interval-ms", "100", "--bootstrap", cluster.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fcntl.fcntl(member.stdout.fileno(), F_SETPIPE_SZ, 4096)
    committed_seen = []
    try:
        with Consumer(cluster.bootstrap, group_id="crash") as asker:
            read = 0
            while read < read_before_kill:
                for _ in range(10):
                    assert int(member.stdout.readline()) == read
                    read += 1
                found = asker.committed([("backlog", 0)])[("backlog", 0)]
                committed_seen.append(-1 if found is None else found.offset)
    finally:
        member.send_signal(signal.SIGKILL)
        # Through the reader, not communicate(): communicate reads the pipe's descriptor and
        # would miss what readline already took into the reader's buffer but did not return.
        rest = member.stdout.read()
        member.communicate(timeout=30)
    printed = read + len(rest.split())  # what it wrote to the pipe before it died is printed
    restarted = kraftlog(cluster, "consume", "backlog", "--group", "crash", "--from-beginning", "--max-messages", "1")
    assert restarted.returncode == 0, restarted.stderr.decode()
    resumed_at = int(restarted.stdout)
    assert committed_seen[-1] > 0, "no commit while the consumer worked through the backlog"
    assert 0 <= printed - resumed_at <= bound, (printed, resumed_at, committed_seen[-20:])


def test_produce_sends_a_tombstone_for_the_null_marker_and_consume_prints_it_apart_from_an_empty_value(cluster: TestCluster) -> None:
    """``kraftlog produce`` had no way to send a null value, and ``consume`` printed a null
    value as an empty one."""
    cluster.create_topic("tombstones")
    produced = kraftlog(cluster, "produce", "tombstones", "--key-separator", ":", "--null-marker", "NULL",
                        stdin=b"k1:v1\nk1:NULL\nk2:\nNULL:v3\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kraftlog(cluster, "consume", "tombstones", "--from-beginning", "--print-key", "--max-messages", "4")
    assert consumed.stdout.decode().splitlines() == ["k1\tv1", "k1\tnull", "k2\t", "null\tv3"]
    from data_plane.client import Consumer

    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("tombstones", 0)])
        records = []
        wait_for(lambda: records.extend(consumer.poll(500)) or len(records) == 4, 30, "the four records")
    assert [(r.key, r.value) for r in records] == [(b"k1", b"v1"), (b"k1", None), (b"k2", b""), (None, b"v3")]


def test_a_record_over_max_request_size_is_refused_with_advice_on_that_limit(cluster: TestCluster) -> None:
    """MESSAGE_TOO_LARGE advised raising the topic's max.message.bytes and the client's
    batch_size when the limit hit was the client's max_request_size, which produce could not set."""
    cluster.create_topic("sized")
    refused = kraftlog(cluster, "produce", "sized", "--max-request-size", "1000", stdin=b"x" * 2000 + b"\n")
    [line] = refused.stderr.decode().strip().splitlines()
    assert refused.returncode == 1 and "max_request_size=1000" in line and "--max-request-size" in line and "batch_size" not in line
    accepted = kraftlog(cluster, "produce", "sized", "--max-request-size", "4000", stdin=b"x" * 2000 + b"\n")
    assert accepted.returncode == 0, accepted.stderr.decode()
