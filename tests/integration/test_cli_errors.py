"""The CLI's answers to the first mistakes a user makes, run as a user runs them (a subprocess):
one line on stderr saying what is wrong and what to do, a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from server_common.local_cluster import free_ports
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("cli-errors"), controllers=1, brokers=1) as c:
        yield c


def kraftlog(*args: str, stdin: bytes = b"hi\n") -> subprocess.CompletedProcess:
    # the timeout only guards the test run; a command that waited out max_block_ms (60 s) fails it
    return subprocess.run([sys.executable, "-m", "cli", *args], input=stdin, capture_output=True, timeout=45)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    stderr = done.stderr.decode()
    assert done.returncode != 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_the_line_checker_refuses_a_traceback():
    traceback = subprocess.CompletedProcess([], 1, b"", b"Traceback (most recent call last):\n  ...\nRuntimeError: Event loop is closed\n")
    with pytest.raises(AssertionError):
        one_error_line(traceback)


def test_nothing_listening_is_one_line_naming_the_address():
    (port,) = free_ports(1)
    line = one_error_line(kraftlog("produce", "T", "--bootstrap", f"127.0.0.1:{port}"))
    assert line.startswith("kraftlog produce: ") and f"no broker answered at 127.0.0.1:{port}" in line
    assert "kraftlog cluster up" in line  # what to do next


def test_a_controller_address_is_named_as_a_controller(cluster: TestCluster):
    address = cluster.controllers[0].address
    line = one_error_line(kraftlog("produce", "T", "--bootstrap", address))
    assert f"{address} is a kraftlog controller, not a broker" in line


def test_a_missing_topic_fails_at_once_saying_how_to_create_it(cluster: TestCluster):
    line = one_error_line(kraftlog("produce", "no-such-topic", "--bootstrap", cluster.bootstrap))
    assert "topic 'no-such-topic' does not exist" in line and "kraftlog topics create no-such-topic" in line


def test_an_empty_bootstrap_is_an_error_not_a_fallback(cluster: TestCluster):
    line = one_error_line(kraftlog("topics", "list", "--bootstrap", ""))
    assert "--bootstrap is empty" in line


def test_bootstrap_before_the_command_works(cluster: TestCluster):
    created = kraftlog("--bootstrap", cluster.bootstrap, "topics", "create", "global-opt")
    assert created.returncode == 0, created.stderr.decode()
    produced = kraftlog("--bootstrap", cluster.bootstrap, "produce", "global-opt", stdin=b"a\nb\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kraftlog("--bootstrap", cluster.bootstrap, "consume", "global-opt", "--from-beginning", "--max-messages", "2")
    assert consumed.stdout.decode().split() == ["a", "b"]


def test_records_delete_names_a_missing_topic_or_partition_at_once(cluster: TestCluster):
    line = one_error_line(kraftlog("records", "delete", "--topic", "no-such-topic", "--partition", "0", "--before", "1", "--bootstrap", cluster.bootstrap))
    assert "topic 'no-such-topic' does not exist" in line
    cluster.create_topic("one-partition")
    line = one_error_line(kraftlog("records", "delete", "--topic", "one-partition", "--partition", "3", "--before", "1", "--bootstrap", cluster.bootstrap))
    assert line == "kraftlog records: one-partition has no partition 3; it has partitions 0..0"


def test_leaders_elect_names_a_missing_topic_or_partition(cluster: TestCluster):
    line = one_error_line(kraftlog("leaders", "elect", "--topic", "no-such-topic", "--bootstrap", cluster.bootstrap))
    assert "topic 'no-such-topic' does not exist" in line
    cluster.create_topic("one-partition-elect")
    line = one_error_line(kraftlog("leaders", "elect", "--topic", "one-partition-elect", "--partition", "3", "--bootstrap", cluster.bootstrap))
    assert line == "kraftlog leaders: one-partition-elect has no partition 3; it has partitions 0..0"


def test_a_terminated_group_consumer_leaves_its_group_at_once(cluster: TestCluster):
    """SIGTERM (`timeout`, `kill`) stops `consume --group` as Ctrl-C does: it commits and
    leaves, so the group does not wait out the member's 45 s session."""
    cluster.create_topic("sigterm")
    assert kraftlog("produce", "sigterm", "--bootstrap", cluster.bootstrap, stdin=b"a\nb\n").returncode == 0

    def members() -> list:
        done = kraftlog("groups", "describe", "leaver", "--json", "--bootstrap", cluster.bootstrap)
        return json.loads(done.stdout)["members"] if done.returncode == 0 else []

    consumer = subprocess.Popen([sys.executable, "-m", "cli", "consume", "sigterm", "--group", "leaver", "--from-beginning", "--bootstrap", cluster.bootstrap],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(members, 30, "the consumer in group leaver")
    finally:
        consumer.send_signal(signal.SIGTERM)
        out, err = consumer.communicate(timeout=30)
    assert members() == []  # left with the process, not after its session timeout
    assert consumer.returncode == 130 and b"Traceback" not in err, err  # as after Ctrl-C


def test_the_spark_example_with_a_missing_input_topic_says_so_in_one_line(cluster: TestCluster) -> None:
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "spark_word_count.py"
    done = subprocess.run([sys.executable, str(example), "--bootstrap", cluster.bootstrap, "--input", "no-such-lines"],
                          capture_output=True, timeout=60)
    line = one_error_line(done)
    assert "'no-such-lines' does not exist" in line and "kraftlog topics create no-such-lines" in line, line
