"""Kafka's own clients against kraftlog's Kafka listener (docs/kafka.md), on real processes:
kafka-python produces keyed records with headers and reads them back record by record, and
records cross between the two doors (Kafka in, kraftlog's client out, and back) unchanged."""

from __future__ import annotations

import socket
import struct
import time

import pytest

pytest.importorskip("kafka", reason="kafka-python is in the test extra: pip install -e '.[test]'")

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition  # noqa: E402

from data_plane.client import Consumer, Producer  # noqa: E402
from tests.cluster import cluster_with_topic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "kafka-door"
PARTITIONS = 3
RECORDS = 10_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_with_topic(tmp_path_factory.mktemp("kafka"), TOPIC, PARTITIONS) as cluster:
        yield cluster


def _kafka_consume(bootstrap: str, tps: list[TopicPartition], count: int, **options) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, **options)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records: list = []
        deadline = time.monotonic() + 60
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def test_kafka_python_produces_and_consumes_keyed_records_with_headers(cluster):
    sent = []
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    try:
        for i in range(RECORDS):
            key, value = b"key-%d" % (i % 97), b"value-%06d" % i
            headers = [("index", b"%d" % i), ("empty", b"")]
            sent.append((producer.send(TOPIC, value=value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i),
                         key, value, headers))
        producer.flush(timeout=60)
    finally:
        producer.close()
    expected = {}
    for future, key, value, headers in sent:
        meta = future.get(timeout=0)
        expected[(meta.partition, meta.offset)] = (key, value, headers, meta.timestamp)
    assert len(expected) == RECORDS

    got = _kafka_consume(cluster.kafka_bootstrap, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], RECORDS)
    assert len(got) == RECORDS
    for r in got:
        assert (r.key, r.value, r.headers, r.timestamp) == expected[(r.partition, r.offset)]
    for p in range(PARTITIONS):  # offsets dense from 0 on each partition, in order
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets)))


def test_records_cross_between_the_kafka_door_and_kraftlogs_client(cluster):
    topic = "two-doors"
    cluster.create_topic(topic, 1, 3)
    cluster.wait_topic_ready(topic, 1)
    kafka_sent = [(b"k%d" % i if i % 3 else None, b"from-kafka-%d" % i, [("h", b"%d" % i)]) for i in range(200)]
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap, acks="all")
    try:
        for key, value, headers in kafka_sent:
            producer.send(topic, value=value, key=key, headers=headers, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()
    kraftlog_sent = [(b"g%d" % i, b"from-grpc-%d" % i, [("h", b"%d" % i)]) for i in range(200)]
    with Producer(cluster.bootstrap, acks="all") as grpc_producer:
        for key, value, headers in kraftlog_sent:
            grpc_producer.send(topic, value, key=key, headers=headers, partition=0)
        grpc_producer.flush(timeout=30)

    expected = [(key, value, headers) for key, value, headers in kafka_sent + kraftlog_sent]
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        read: list = []
        deadline = time.monotonic() + 30
        while len(read) < len(expected) and time.monotonic() < deadline:
            read.extend(consumer.poll(timeout_ms=500))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in read] == expected
    assert [r.offset for r in read] == list(range(len(expected)))

    got = _kafka_consume(cluster.kafka_bootstrap, [TopicPartition(topic, 0)], len(expected))
    assert [(r.key, r.value, list(r.headers)) for r in got] == expected
    assert [r.offset for r in got] == [r.offset for r in read]
    assert [r.timestamp for r in got] == [r.timestamp_ms for r in read]


def _frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"  # request header v1
    return struct.pack(">i", len(header) + len(body)) + header + body


def _answer(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    return sock.recv(size, socket.MSG_WAITALL)


def test_unserved_versions_get_unsupported_version_and_a_malformed_frame_closes_only_its_connection(cluster):
    host, port = cluster.kafka_bootstrap.split(",")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock, \
            socket.create_connection((host, int(port)), timeout=10) as other:
        sock.sendall(_frame(18, 99, 7))  # ApiVersions v99: answered in v0, error 35 and the versions served
        answer = _answer(sock)
        correlation_id, error = struct.unpack_from(">ih", answer)
        assert (correlation_id, error) == (7, 35)
        assert struct.unpack_from(">i", answer, 6)[0] >= 6  # the served APIs are listed
        sock.sendall(_frame(57, 0, 8))  # UpdateFeatures: not served, the connection stays open
        assert struct.unpack(">ih", _answer(sock)) == (8, 35)
        sock.sendall(_frame(18, 0, 9))  # ApiVersions v0 on the same connection
        assert struct.unpack_from(">ih", _answer(sock)) == (9, 0)

        sock.sendall(struct.pack(">i", 3) + b"abc")  # shorter than any header: this connection closes
        assert sock.recv(1) == b""
        other.sendall(_frame(18, 0, 10))  # the other one still answers
        assert struct.unpack_from(">ih", _answer(other)) == (10, 0)


def test_offsets_committed_through_the_kafka_door_are_the_group_coordinators(cluster):
    """kafka-python's simple consumer (assign, then commit under a group id) commits through
    FindCoordinator and OffsetCommit; kraftlog's own group admin reads the same offsets, and a
    new Kafka consumer of the group starts where they say."""
    from data_plane.client.group_admin import GroupAdmin

    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap, group_id="kafka-door-group", enable_auto_commit=False)
    try:
        consumer.assign(tps)
        consumer.commit({tp: OffsetAndMetadata(10 + tp.partition, "from kafka-python", -1) for tp in tps})
        assert {tp.partition: consumer.committed(tp) for tp in tps} == {p: 10 + p for p in range(PARTITIONS)}
    finally:
        consumer.close()

    with GroupAdmin(cluster.bootstrap) as admin:
        assert admin.committed_offsets("kafka-door-group") == {(TOPIC, p): 10 + p for p in range(PARTITIONS)}

    again = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap, group_id="kafka-door-group", enable_auto_commit=False)
    try:
        again.assign([TopicPartition(TOPIC, 0)])
        first = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            first = [r for batch in again.poll(timeout_ms=500).values() for r in batch]
        assert first[0].offset == 10
    finally:
        again.close()


def test_kafka_admin_creates_and_deletes_topics_through_the_controllers(cluster):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from data_plane.client import Admin
    from server_common.waiting import wait_for

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        admin.create_topics([NewTopic("made-by-kafka-admin", num_partitions=2, replication_factor=3,
                                      topic_configs={"retention.ms": "3600000"})])
        cluster.wait_topic_ready("made-by-kafka-admin", 2)  # kraftlog's own metadata has it
        with cluster.controller_client() as controller:
            configs = {c.key: c.value for c in controller.describe_configs(["made-by-kafka-admin"])["made-by-kafka-admin"]}
        assert configs["retention.ms"] == "3600000"
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("made-by-kafka-admin", num_partitions=2, replication_factor=3)])
        admin.delete_topics(["made-by-kafka-admin"])
    finally:
        admin.close()
    with Admin(cluster.bootstrap) as kraftlog_admin:
        wait_for(lambda: "made-by-kafka-admin" not in kraftlog_admin.describe_topics(), 30, "the topic deleted")


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_kafka_consumer_reads_kraftlog_transactions_at_its_isolation_level(cluster, isolation):
    """Transactions written through kraftlog's client: read_committed Kafka consumers get the
    committed ones only (the aborted transactions list and the markers as control batches
    do it), read_uncommitted ones get everything; neither sees a marker as a record."""
    topic = f"transactions-{isolation}"
    cluster.create_topic(topic, 1, 3)
    with Producer(cluster.bootstrap, acks="all", transactional_id=f"kafka-door-{isolation}") as producer:
        producer.init_transactions()
        for n, outcome in enumerate(["commit", "abort", "commit"]):
            producer.begin_transaction()
            for i in range(5):
                producer.send(topic, b"%s-%d-%d" % (outcome.encode(), n, i), partition=0)
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    expected = [b"%s-%d-%d" % (outcome, n, i) for n, outcome in enumerate([b"commit", b"abort", b"commit"]) for i in range(5)
                if isolation == "read_uncommitted" or outcome == b"commit"]

    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list = []
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            got.extend(r.value for batch in consumer.poll(timeout_ms=500).values() for r in batch)
    finally:
        consumer.close()
    assert got == expected
