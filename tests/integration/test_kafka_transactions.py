"""Transactions through the Kafka door with librdkafka (confluent-kafka), docs/kafka.md: a
transactional producer commits, aborts and commits again under one producer epoch (Kafka's
transaction version 1, which EndTxn v0-4 clients expect); read_committed sees exactly the
committed records, through the door and through kraftlog's own client; a consume-transform-
produce loop commits its group's offsets inside the transaction."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from data_plane.client import Consumer as KraftlogConsumer  # noqa: E402
from tests.cluster import TestCluster  # noqa: E402
from tests.integration.kafka_transactional import transactional_cluster  # noqa: E402

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with transactional_cluster(tmp_path_factory.mktemp("kafka-txn"), ("txn", "source", "sink")) as running:
        yield running


def _read(bootstrap: str, topic: str, isolation: str, count: int, idle_s: float = 3.0) -> list[bytes]:
    """Values of ``topic`` from the start, until ``count`` are read and nothing more came for ``idle_s``."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "enable.auto.commit": False,
                                         "isolation.level": isolation})
    values: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline, last = time.monotonic() + 60, time.monotonic()
        while time.monotonic() < deadline and (len(values) < count or time.monotonic() - last < idle_s):
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                values.append(message.value())
                last = time.monotonic()
    finally:
        consumer.close()
    return values


def test_commit_abort_and_commit_again_under_one_epoch_and_read_committed_sees_only_the_committed(cluster: TestCluster) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "door-txn"})
    producer.init_transactions(30)
    for name, commit in (("first", True), ("second", False), ("third", True)):
        producer.begin_transaction()
        for i in range(50):
            producer.produce("txn", value=b"%s-%d" % (name.encode(), i))
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # written, then aborted (an abort drops what is still queued)
            producer.abort_transaction(30)
    expected = [b"first-%d" % i for i in range(50)] + [b"third-%d" % i for i in range(50)]
    assert _read(cluster.kafka_bootstrap, "txn", "read_committed", 100) == expected
    assert len(_read(cluster.kafka_bootstrap, "txn", "read_uncommitted", 150)) == 150
    with KraftlogConsumer(cluster.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as own:
        own.assign([("txn", 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 100 and time.monotonic() < deadline:
            values.extend(r.value for r in own.poll(500))
    assert values == expected


def test_consume_transform_produce_commits_the_groups_offsets_in_the_transaction(cluster: TestCluster) -> None:
    source = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    for i in range(100):
        source.produce("source", value=b"%d" % i)
    assert source.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "transformers",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "transformer-1"})
    producer.init_transactions(30)
    consumer.subscribe(["source"])
    done, deadline = 0, time.monotonic() + 60
    try:
        while done < 100 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(20, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce("sink", value=b"x" + message.value())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(batch)
        assert done == 100
        committed = consumer.committed([confluent_kafka.TopicPartition("source", 0)], 30)
        assert committed[0].offset == 100
    finally:
        consumer.close()
    assert _read(cluster.kafka_bootstrap, "sink", "read_committed", 100) == [b"x%d" % i for i in range(100)]
