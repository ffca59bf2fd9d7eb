"""Transactions end to end with real broker processes: the transactional Python producer, the
transaction coordinator (`__transaction_state`, markers through WriteTxnMarkers) and the Python
consumer at both isolation levels.

- a commit is seen by read_committed and read_uncommitted readers;
- an abort is seen only by read_uncommitted readers (never a marker);
- a zombie (same transactional id, older epoch) is fenced once a new producer initializes;
- a producer process SIGKILLed mid-transaction: the next incarnation's init aborts what it left
  open, and read_committed readers move past it; an abandoned transaction is aborted when its
  timeout passes (and its producer fenced);
- the coordinator's broker SIGKILLed after the commit decision and before the markers: the next
  coordinator finishes the transaction; a data partition's leader paused before the commit:
  the markers go to the next leader.
Each reader check has its negative control: the same reader sees the open (or aborted) records
at read_uncommitted, so "read_committed sees none" is not a reader that sees nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from data_plane.client import Admin, Consumer, Producer, ProducerFencedError
from server_common.internal_topics import TRANSACTION_STATE_TOPIC, offsets_partition
from kraftlog_proto import common_pb2, group_pb2, group_pb2_grpc, transaction_pb2, transaction_pb2_grpc
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SESSION_ARGS = ["--session-timeout-ms", "3000"]  # a killed broker is fenced (and leaves every ISR) within 3 s
BROKER_ARGS = ["--transaction-state-partitions", "3", "--offsets-topic-partitions", "1", *SESSION_ARGS]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("transactions"), controllers=1, brokers=3,
                       controller_args=SESSION_ARGS, broker_args=BROKER_ARGS) as c:
        yield c


def producer(cluster: TestCluster, transactional_id: str, timeout_ms: int = 60_000) -> Producer:
    return Producer(cluster.bootstrap, transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, linger_ms=0,
                    max_block_ms=60_000, delivery_timeout_ms=30_000)


def read(cluster: TestCluster, topic: str, partitions: int, level: str, until: int) -> list[bytes]:
    """Every value a fresh consumer at ``level`` reads from the beginning, once it has ``until``."""
    with Consumer(cluster.bootstrap, isolation_level=level, fetch_max_wait_ms=100) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        wait_for(lambda: got.extend(r.value for r in consumer.poll(200)) or len(got) >= until, 60, f"{until} records of {topic} at {level}")
        got.extend(r.value for r in consumer.poll(300))  # anything beyond what we waited for shows up in the assertion
        return got


def end_offsets(cluster: TestCluster, topic: str, partition: int) -> dict[str, int]:
    """Where each isolation level's seek_to_end lands: the LSO for read_committed, the HW otherwise."""
    ends = {}
    for level in ("read_committed", "read_uncommitted"):
        with Consumer(cluster.bootstrap, isolation_level=level, fetch_mode="fetch") as consumer:
            consumer.assign([(topic, partition)])
            consumer.seek_to_end()
            ends[level] = consumer.position((topic, partition))
    return ends


def coordinator_of(cluster: TestCluster, transactional_id: str) -> tuple[int, transaction_pb2_grpc.TransactionCoordinatorStub]:
    """FindCoordinator (key type TRANSACTION) at any broker: (the coordinator's id, a stub to it)."""
    def find():
        for address in cluster.bootstrap.split(","):
            try:
                with grpc.insecure_channel(address) as channel:
                    [answer] = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(group_pb2.FindCoordinatorRequest(
                        keys=[transactional_id], key_type=group_pb2.TRANSACTION), timeout=5).coordinators
            except grpc.RpcError:
                continue
            if answer.error_code == common_pb2.NONE:
                return answer
        return None
    answer = wait_for(find, 30, f"the coordinator of {transactional_id}")
    return answer.node_id, transaction_pb2_grpc.TransactionCoordinatorStub(grpc.insecure_channel(f"{answer.host}:{answer.port}"))


def state_of(cluster: TestCluster, transactional_id: str) -> str | None:
    """The id's state at its coordinator (None while no coordinator answers for it)."""
    try:
        _, stub = coordinator_of(cluster, transactional_id)
        [described] = stub.DescribeTransactions(transaction_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                                                timeout=5).transactions
    except grpc.RpcError:
        return None
    return described.state if described.error_code == common_pb2.NONE else None


def test_a_commit_is_seen_at_both_isolation_levels(cluster: TestCluster) -> None:
    cluster.create_topic("committed", partitions=2, replication_factor=2)
    with producer(cluster, "tx-commit") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send("committed", b"c%d" % i, partition=i % 2)
        p.commit_transaction()
    expected = {b"c%d" % i for i in range(6)}
    assert sorted(read(cluster, "committed", 2, "read_committed", 6)) == sorted(expected)
    assert sorted(read(cluster, "committed", 2, "read_uncommitted", 6)) == sorted(expected)
    wait_for(lambda: state_of(cluster, "tx-commit") == "CompleteCommit", 30, "the coordinator to complete the commit")


def test_an_abort_is_seen_only_at_read_uncommitted(cluster: TestCluster) -> None:
    cluster.create_topic("aborted", partitions=1, replication_factor=2)
    with producer(cluster, "tx-abort") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send("aborted", b"a%d" % i, partition=0)
        p.abort_transaction()
        p.begin_transaction()
        p.send("aborted", b"kept", partition=0)
        p.commit_transaction()
    assert read(cluster, "aborted", 1, "read_committed", 1) == [b"kept"]  # neither the aborted records nor markers
    assert read(cluster, "aborted", 1, "read_uncommitted", 4) == [b"a0", b"a1", b"a2", b"kept"]  # negative control


def test_a_zombie_is_fenced_by_a_new_incarnation(cluster: TestCluster) -> None:
    cluster.create_topic("zombies", partitions=2, replication_factor=2)
    with producer(cluster, "tx-zombie") as zombie, producer(cluster, "tx-zombie") as successor:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send("zombies", b"zombie-0", partition=0)
        zombie.flush()
        successor.init_transactions()  # fences the zombie and aborts its open transaction
        zombie.send("zombies", b"zombie-1", partition=0)  # refused by the leader: the abort marker's epoch is newer
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
        with pytest.raises(ProducerFencedError):
            zombie.send("zombies", b"zombie-2", partition=1)  # fenced for good: refused before it is queued
        successor.begin_transaction()
        successor.send("zombies", b"successor", partition=0)
        successor.commit_transaction()
    assert read(cluster, "zombies", 2, "read_committed", 1) == [b"successor"]
    assert b"zombie-0" in read(cluster, "zombies", 2, "read_uncommitted", 2)  # negative control: it was written, then aborted


PRODUCER_SCRIPT = textwrap.dedent("""
    import sys, threading
    from data_plane.client import Producer
    bootstrap, transactional_id, topic, timeout_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    p = Producer(bootstrap, transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, b"open-%d" % i, partition=0)
    p.flush()
    print("sent", flush=True)
    threading.Event().wait()  # mid-transaction until killed
""")


def producer_process(cluster: TestCluster, transactional_id: str, topic: str, timeout_ms: int) -> subprocess.Popen:
    """A producer process that opens a transaction, writes 5 records and waits to be killed."""
    process = subprocess.Popen([sys.executable, "-c", PRODUCER_SCRIPT, cluster.bootstrap, transactional_id, topic, str(timeout_ms)],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert line.strip() == "sent", f"the producer process did not open its transaction (exit {process.poll()})"
    return process


def test_a_killed_producers_transaction_is_aborted_by_its_next_incarnation(cluster: TestCluster) -> None:
    cluster.create_topic("killed", partitions=1, replication_factor=2)
    process = producer_process(cluster, "tx-killed", "killed", 600_000)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    stuck = end_offsets(cluster, "killed", 0)
    assert stuck == {"read_committed": 0, "read_uncommitted": 5}  # the open transaction holds the LSO
    with producer(cluster, "tx-killed") as successor:
        successor.init_transactions()  # aborts the dead incarnation's transaction first
        wait_for(lambda: end_offsets(cluster, "killed", 0)["read_committed"] >= 6, 30, "the LSO to pass the abort marker")
        successor.begin_transaction()
        successor.send("killed", b"after", partition=0)
        successor.commit_transaction()
    assert read(cluster, "killed", 1, "read_committed", 1) == [b"after"]
    assert read(cluster, "killed", 1, "read_uncommitted", 6) == [b"open-%d" % i for i in range(5)] + [b"after"]


def test_an_abandoned_transaction_is_aborted_on_timeout(cluster: TestCluster) -> None:
    cluster.create_topic("abandoned", partitions=1, replication_factor=2)
    process = producer_process(cluster, "tx-abandoned", "abandoned", 2_000)
    try:
        assert end_offsets(cluster, "abandoned", 0)["read_committed"] == 0
        wait_for(lambda: end_offsets(cluster, "abandoned", 0) == {"read_committed": 6, "read_uncommitted": 6}, 60,
                 "the coordinator to abort the transaction past its 2 s timeout")
        wait_for(lambda: state_of(cluster, "tx-abandoned") == "CompleteAbort", 30, "the coordinator to complete the abort")
    finally:
        process.kill()
        process.wait(10)
    assert read(cluster, "abandoned", 1, "read_uncommitted", 5) == [b"open-%d" % i for i in range(5)]
    with Consumer(cluster.bootstrap, isolation_level="read_committed", fetch_max_wait_ms=100) as consumer:
        consumer.assign([("abandoned", 0)])
        consumer.seek_to_beginning()
        got: list = []
        wait_for(lambda: got.extend(consumer.poll(200)) or consumer.position(("abandoned", 0)) == 6, 30,
                 "a read_committed reader to move past the aborted transaction")
        assert got == []


def test_the_next_coordinator_finishes_a_decided_transaction(cluster: TestCluster) -> None:
    """The data partition's only replica is down when the commit is decided, so the markers
    cannot be written; the coordinator's broker is then SIGKILLed. The transaction stays
    PrepareCommit until the next coordinator, once the partition is back, writes its marker."""
    cluster.create_topic("failover", partitions=3, replication_factor=1)
    coordinator_id, _ = coordinator_of(cluster, "tx-failover")
    partition = next(p for p in range(3) if cluster.leader("failover", p) != coordinator_id)
    data_broker = cluster.broker(cluster.leader("failover", partition))
    with producer(cluster, "tx-failover") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("failover", b"decided", partition=partition)
        p.flush()
        cluster.kill(data_broker)
        committing = threading.Thread(target=p.commit_transaction)
        committing.start()
        wait_for(lambda: state_of(cluster, "tx-failover") == "PrepareCommit", 60, "the commit decision to be durable")
        cluster.kill(cluster.broker(coordinator_id))
        cluster.restart(data_broker)
        wait_for(lambda: coordinator_of(cluster, "tx-failover")[0] != coordinator_id, 60, "a new coordinator")
        wait_for(lambda: state_of(cluster, "tx-failover") == "CompleteCommit", 90, "the new coordinator to finish the commit")
        committing.join(60)
        assert not committing.is_alive()
    cluster.restart(cluster.broker(coordinator_id))
    assert read(cluster, "failover", 3, "read_committed", 1) == [b"decided"]


def test_markers_follow_a_leader_change_of_the_data_partition(tmp_path) -> None:
    """Four brokers, so that the data partition's leader is not a replica of the transaction's
    `__transaction_state` partition: pausing it (SIGSTOP: its connections stay open, so metadata
    names it until its session times out) leaves the commit decision unhindered. The
    coordinator's marker write to the paused leader times out and is retried at the new leader,
    where read_committed readers then see the record."""
    with local_cluster(tmp_path, controllers=1, brokers=4, controller_args=SESSION_ARGS, broker_args=BROKER_ARGS) as four:
        coordinator_id, _ = coordinator_of(four, "tx-moving")  # creates __transaction_state
        four.wait_topic_ready(TRANSACTION_STATE_TOPIC, 3)
        with Admin(four.bootstrap) as admin:
            state = admin.describe_topics([TRANSACTION_STATE_TOPIC])[TRANSACTION_STATE_TOPIC]
        outsider = ({1, 2, 3, 4} - set(state.partitions[offsets_partition("tx-moving", 3)].replicas)).pop()
        four.create_topic("moving", partitions=8, replication_factor=2)
        partition = next(p for p in range(8) if four.leader("moving", p) == outsider)
        with producer(four, "tx-moving") as p:
            p.init_transactions()
            p.begin_transaction()
            p.send("moving", b"moved", partition=partition)
            p.flush()
            four.signal(four.broker(outsider), signal.SIGSTOP)
            try:
                p.commit_transaction()
                wait_for(lambda: state_of(four, "tx-moving") == "CompleteCommit", 60, "the markers at the new leader")
                assert four.leader("moving", partition) not in (outsider, -1)
            finally:
                four.signal(four.broker(outsider), signal.SIGCONT)
        assert read(four, "moving", 8, "read_committed", 1) == [b"moved"]


def cli(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def partition_offsets(cluster: TestCluster, topic: str) -> tuple[int, int]:
    """(LSO, HW) of partition 0 as `kraftlog topics describe --json` shows them."""
    out = cli(cluster, "topics", "describe", topic, "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)[0]
    return row["last_stable_offset"], row["high_watermark"]


def test_the_cli_finds_and_aborts_a_hanging_transaction(cluster: TestCluster) -> None:
    cluster.create_topic("hanging", partitions=1, replication_factor=2)
    process = producer_process(cluster, "tx-hanging", "hanging", 600_000)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    assert partition_offsets(cluster, "hanging") == (0, 5)  # topics describe shows the LSO held below the HW
    for level, expected in (("read_uncommitted", 5), ("read_committed", 0)):
        consumed = cli(cluster, "consume", "hanging", "--from-beginning", "--isolation-level", level, "--timeout-ms", "1500")
        assert consumed.returncode == 0 and len(consumed.stdout.splitlines()) == expected, (level, consumed.stdout, consumed.stderr)
    listed = json.loads(cli(cluster, "transactions", "list", "--state", "Ongoing", "--json").stdout)
    assert "tx-hanging" in [t["transactional_id"] for t in listed]
    described = json.loads(cli(cluster, "transactions", "describe", "tx-hanging", "--json").stdout)
    assert (described["state"], described["partitions"]) == ("Ongoing", {"hanging": [0]})
    aborted = cli(cluster, "transactions", "abort", "tx-hanging")
    assert aborted.returncode == 0 and "aborted the open transaction of tx-hanging" in aborted.stdout, aborted.stderr
    wait_for(lambda: partition_offsets(cluster, "hanging") == (6, 6), 30, "the LSO to pass the abort marker")
    assert read(cluster, "hanging", 1, "read_committed", 0) == []
    again = cli(cluster, "transactions", "abort", "tx-hanging")
    assert again.returncode == 0 and "nothing to abort" in again.stdout
