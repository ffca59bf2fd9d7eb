"""End to end on a real cluster: 3 controller and 3 broker processes on loopback.

One module-scoped cluster serves the happy-path tests (starting one costs seconds); the
tests that kill processes restart what they killed and wait for the cluster to be whole
again before they return.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import grpc
import pytest

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("e2e"), controllers=3, brokers=3) as c:
        yield c


def kraftlog(cluster: TestCluster, *args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap],
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 60) -> dict[int, list[bytes]]:
    """Every record of each partition, from its start to the log end it has when this starts
    (at least ``expected`` records in all)."""
    from data_plane.client import Admin, Consumer

    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    tps = [(topic, p) for p in range(partitions)]
    with Admin(bootstrap) as admin:  # each partition is read to its end, not to a count: the log may
        ends = {tp: found.offset for tp, found in admin.list_offsets({tp: -1 for tp in tps}).items()}  # hold unacknowledged writes too
    with Consumer(bootstrap) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        deadline = time.monotonic() + timeout_s
        received = 0
        while (received < expected or any(consumer.position(tp) < end for tp, end in ends.items())) and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=500):
                values[record.partition].append(record.value)
                received += 1
    return values


def test_client_produces_100k_and_reads_every_record_in_order(cluster: TestCluster) -> None:
    from data_plane.client import Producer

    cluster.create_topic("e2e-client", partitions=3, replication_factor=1)
    count = 100_000
    with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
        futures = [producer.send("e2e-client", str(i).encode(), partition=i % 3) for i in range(count)]
        producer.flush(timeout=120)
    assert all(f.exception() is None for f in futures)
    values = read_all(cluster.bootstrap, "e2e-client", 3, count)
    for p in range(3):
        assert values[p] == [str(i).encode() for i in range(p, count, 3)], f"partition {p} lost or reordered records"


def test_cli_produces_100k_lines_and_consumes_them_back(cluster: TestCluster) -> None:
    cluster.create_topic("e2e-cli", partitions=1, replication_factor=1)
    lines = [f"line-{i}" for i in range(100_000)]
    produced = kraftlog(cluster, "produce", "e2e-cli", stdin=("\n".join(lines) + "\n").encode())
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kraftlog(cluster, "consume", "e2e-cli", "--from-beginning", "--max-messages", "100000", "--timeout-ms", "20000")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == lines


def test_sigkill_and_restart_a_broker_keeps_its_data(cluster: TestCluster) -> None:
    from data_plane.client import Producer

    cluster.create_topic("e2e-restart", partitions=3, replication_factor=1)
    with Producer(cluster.bootstrap, acks="all") as producer:
        futures = [producer.send("e2e-restart", f"v{i}".encode(), partition=i % 3) for i in range(3000)]
        producer.flush(timeout=60)
    assert all(f.exception() is None for f in futures)
    for broker in cluster.brokers:
        cluster.kill(broker)
        cluster.restart(broker)
    cluster.wait_ready()
    cluster.wait_topic_ready("e2e-restart", 3)
    values = read_all(cluster.bootstrap, "e2e-restart", 3, 3000)
    assert sum(len(v) for v in values.values()) == 3000
    for p in range(3):
        assert values[p] == [f"v{i}".encode() for i in range(p, 3000, 3)]


def test_metadata_survives_sigkill_of_every_controller(cluster: TestCluster) -> None:
    cluster.create_topic("e2e-survivor", partitions=4, replication_factor=1)
    for controller in cluster.controllers:
        cluster.kill(controller)
    for controller in cluster.controllers:
        cluster.restart(controller)
    def described():
        with cluster.controller_client() as client:
            return next((t for t in client.describe_cluster().topics if t.name == "e2e-survivor"), None)

    topic = wait_for(described, 30, "the topic to be described after restart")
    assert len(topic.partitions) == 4
    cluster.wait_ready()


def test_new_active_controller_creates_topics_within_seconds(cluster: TestCluster) -> None:
    with cluster.controller_client() as client:
        active = next(m.controller_id for m in client.describe_quorum() if m.state == "leader")
    cluster.kill(cluster.controller(active))
    started = time.monotonic()
    with cluster.controller_client() as client:
        wait_for(lambda: client.create_topic("e2e-after-failover", 1, 1, {}) or True, 15, "a topic create on the new active controller")
    took = time.monotonic() - started
    print(f"topic created {took:.2f}s after the active controller was killed")
    assert took < 10
    cluster.restart(cluster.controller(active))
    cluster.wait_topic_ready("e2e-after-failover", 1)


def test_cli_bad_input_gets_clear_errors(cluster: TestCluster) -> None:
    unknown = kraftlog(cluster, "topics", "describe", "no-such-topic")
    assert unknown.returncode != 0 and b"does not exist" in unknown.stderr and b"Traceback" not in unknown.stderr
    bad_name = kraftlog(cluster, "topics", "create", "bad/name")
    assert bad_name.returncode != 0 and b"Traceback" not in bad_name.stderr and bad_name.stderr.strip()
    too_many = kraftlog(cluster, "topics", "create", "rf-too-big", "--replication-factor", "7")
    assert too_many.returncode != 0 and b"replication factor" in too_many.stderr.lower()
    bad_config = kraftlog(cluster, "topics", "create", "bad-config", "--config", "retention.ms=soon")
    assert bad_config.returncode != 0 and b"retention.ms" in bad_config.stderr
    typo = kraftlog(cluster, "topics", "craete", "x")
    assert typo.returncode == 2 and b"invalid choice" in typo.stderr


def test_grpc_bad_input_gets_invalid_argument_or_error_codes(cluster: TestCluster) -> None:
    with grpc.insecure_channel(cluster.brokers[0].address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        with pytest.raises(grpc.RpcError) as bad_acks:
            stub.Produce(broker_pb2.ProduceRequest(acks=5), timeout=5)
        assert bad_acks.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "acks" in bad_acks.value.details()
        corrupt = stub.Produce(
            broker_pb2.ProduceRequest(
                acks=1,
                timeout_ms=1000,
                topics=[broker_pb2.TopicProduceData(topic="e2e-client", partitions=[broker_pb2.PartitionProduceData(partition=0, batches=os.urandom(200))])],
            ),
            timeout=5,
        )
        answer = corrupt.topics[0].partitions[0]
        assert answer.error_code in (common_pb2.CORRUPT_MESSAGE, common_pb2.NOT_LEADER_OR_FOLLOWER)
        unknown = stub.Fetch(
            broker_pb2.FetchRequest(max_wait_ms=0, topics=[broker_pb2.FetchTopic(topic="nope", partitions=[broker_pb2.FetchPartition(partition=0)])]),
            timeout=5,
        )
        assert unknown.topics[0].partitions[0].error_code == common_pb2.UNKNOWN_TOPIC_OR_PARTITION
        assert "create" in unknown.topics[0].partitions[0].error_message


def test_simple_records_path_round_trips(cluster: TestCluster) -> None:
    cluster.create_topic("e2e-simple", partitions=1, replication_factor=1)
    from data_plane.client import Admin

    with Admin(cluster.bootstrap) as admin:
        leader = admin.describe_topics(["e2e-simple"])["e2e-simple"].partitions[0].leader
    address = cluster.broker(leader).address
    with grpc.insecure_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        records = [common_pb2.Record(key=b"k1", value=b"hello", headers=[common_pb2.Header(key="h", value=b"v")]), common_pb2.Record(value=b"world")]
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=5000, topics=[broker_pb2.TopicProduceData(topic="e2e-simple", partitions=[broker_pb2.PartitionProduceData(partition=0, records=records)])])
        # the leader named by metadata may not have applied the new topic yet: it answers
        # UNKNOWN_TOPIC_OR_PARTITION (retriable, nothing written), and a client retries
        def accepted() -> bool:
            code = stub.Produce(request, timeout=10).topics[0].partitions[0].error_code
            assert code in (common_pb2.NONE, common_pb2.UNKNOWN_TOPIC_OR_PARTITION, common_pb2.NOT_LEADER_OR_FOLLOWER), code
            return code == common_pb2.NONE

        wait_for(accepted, 10, "the leader to accept the produce")
        fetched = stub.Fetch(
            broker_pb2.FetchRequest(max_wait_ms=1000, min_bytes=1, format=broker_pb2.RECORDS, topics=[broker_pb2.FetchTopic(topic="e2e-simple", partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=0, current_leader_epoch=-1)])]),
            timeout=10,
        )
        got = fetched.topics[0].partitions[0].records
        assert [(r.offset, r.key, r.value) for r in got] == [(0, b"k1", b"hello"), (1, b"", b"world")]
        assert not got[1].HasField("key") and got[0].headers[0].value == b"v"
