"""librdkafka (confluent-kafka's wheel) against kraftlog's Kafka listener (docs/kafka.md): an
idempotent producer's keyed records with headers come back record by record through an
assigned consumer, read_committed included, and kraftlog's own client reads the same records."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from data_plane.client import Consumer as KraftlogConsumer  # noqa: E402
from tests.cluster import local_cluster  # noqa: E402
from tests.integration import kafka_leader_kill as leader_kill  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "librdkafka"
PARTITIONS = 3
RECORDS = 3_000


def _consume(bootstrap: str, count: int, isolation: str) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "assign-only", "enable.auto.commit": False,
                                         "isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        records: list = []
        deadline = time.monotonic() + 60
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                records.append(message)
        return records
    finally:
        consumer.close()


def test_librdkafka_produces_idempotently_and_reads_back_through_both_doors(tmp_path):
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        cluster.wait_topic_ready(TOPIC, PARTITIONS)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "enable.idempotence": True,
                                             "acks": "all", "linger.ms": 5})
        delivered: dict[tuple[int, int], tuple] = {}
        failures: list = []

        def on_delivery(error, message):
            if error is not None:
                failures.append(error)
            else:
                i = int(message.value().split(b"-")[1])  # delivery reports do not carry the headers: the index does
                delivered[(message.partition(), message.offset())] = (message.key(), message.value(), [("i", b"%d" % i)])

        for i in range(RECORDS):
            producer.produce(TOPIC, key=b"key-%d" % (i % 89), value=b"value-%06d" % i, headers=[("i", b"%d" % i)],
                             on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0
        del producer  # its handle goes now, not after the cluster stops (when it would log connection failures)
        assert failures == [] and len(delivered) == RECORDS

        for isolation in ("read_uncommitted", "read_committed"):
            got = _consume(cluster.kafka_bootstrap, RECORDS, isolation)
            assert len(got) == RECORDS  # each record once: no answer made the client re-read
            assert {(m.partition(), m.offset()): (m.key(), m.value(), m.headers()) for m in got} == delivered

        with KraftlogConsumer(cluster.bootstrap) as consumer:
            consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            read: list = []
            deadline = time.monotonic() + 30
            while len(read) < RECORDS and time.monotonic() < deadline:
                read.extend(consumer.poll(timeout_ms=500))
        assert {(r.partition, r.offset): (r.key, r.value, [tuple(h) for h in r.headers]) for r in read} == delivered


def test_librdkafka_consumers_share_a_topic_through_the_kip_848_group_protocol(tmp_path):
    """Two librdkafka consumers with group.protocol=consumer subscribe: kraftlog's group
    coordinator (the same one kraftlog's clients join) splits the partitions between them,
    they read every record once, and their commits are the group's committed offsets."""
    from data_plane.client.group_admin import GroupAdmin

    topic, group, records = "kip848", "librdkafka-group", 600
    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=["--offsets-topic-partitions", "3", "--group-heartbeat-interval-ms", "300"]) as cluster:
        cluster.create_topic(topic, PARTITIONS, 3)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
        for i in range(records):
            producer.produce(topic, key=b"%d" % i, value=b"%d" % i)
        assert producer.flush(30) == 0
        del producer  # its handle goes now, not after the cluster stops (when it would log connection failures)

        consumers = [confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
                                               "group.protocol": "consumer", "enable.auto.commit": False,
                                               "auto.offset.reset": "earliest"}) for _ in range(2)]
        try:
            for consumer in consumers:
                consumer.subscribe([topic])
            seen: dict[int, list] = {0: [], 1: []}
            deadline = time.monotonic() + 60
            # until every record is read and the second member got its share (the first may
            # have read everything before the coordinator moved a partition to it)
            while (sum(map(len, seen.values())) < records or not all(c.assignment() for c in consumers)) \
                    and time.monotonic() < deadline:
                for n, consumer in enumerate(consumers):
                    seen[n] += [(m.partition(), m.offset()) for m in consumer.consume(1000, 0.1) if m.error() is None]
            everything = seen[0] + seen[1]
            assert len(everything) == len(set(everything)) == records  # each record once
            owned = [{tp.partition for tp in c.assignment()} for c in consumers]
            assert owned[0] | owned[1] == set(range(PARTITIONS)) and not owned[0] & owned[1]
            assert all(owned), "both members hold partitions"
            ends: dict[int, int] = {}
            for partition, offset in everything:
                ends[partition] = max(ends.get(partition, -1), offset + 1)
            for consumer, partitions in zip(consumers, owned):  # each member commits its own partitions' ends
                consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, ends[p]) for p in partitions],
                                asynchronous=False)
        finally:
            for consumer in consumers:
                consumer.close()

        with GroupAdmin(cluster.bootstrap) as admin:
            assert admin.committed_offsets(group) == {(topic, p): end for p, end in ends.items()}


def test_an_idempotent_librdkafka_producer_through_a_leader_sigkill_loses_and_repeats_nothing(tmp_path):
    """The partition leader is SIGKILLed while librdkafka's idempotent producer (acks=all)
    writes: every record it was told is delivered is in the log once, in order, and nothing
    it was not told of sits between them (its retries go to the new leader, whose producer
    state knows the sequences the old one acknowledged)."""
    with leader_kill.cluster_for_a_kill(tmp_path) as cluster:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "enable.idempotence": True,
                                             "acks": "all", "linger.ms": 2, "message.timeout.ms": 60_000})
        delivered: list[int] = []
        failures: list = []
        on_delivery = lambda error, message: failures.append(error) if error else delivered.append(int(message.value()))  # noqa: E731
        for i in range(leader_kill.RECORDS):
            producer.produce(leader_kill.TOPIC, value=b"%d" % i, partition=0, on_delivery=on_delivery)
            producer.poll(0)
            if i == leader_kill.KILL_AT:
                leader_kill.kill_the_leader(cluster)
        assert producer.flush(90) == 0 and failures == []
        del producer
        values = leader_kill.read_back(cluster)
    assert values == list(range(leader_kill.RECORDS)), "duplicates, gaps or reordering after the leader's SIGKILL"
    assert sorted(delivered) == list(range(leader_kill.RECORDS))
