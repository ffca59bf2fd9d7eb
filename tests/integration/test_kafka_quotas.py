"""Client quotas on the Kafka door (docs/kafka.md, docs/quotas.md), with librdkafka: a
producer and a consumer held to their byte-rate quotas by the broker (librdkafka does not
back off on its own: the broker holds its next requests), each told the throttle time through
``throttle_cb``, one measure for a client id whichever door it comes through, and the user
of a client without SASL being ANONYMOUS.

The cluster, the windows and the way rates are measured are test_quotas.py's.
"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from server_common.waiting import wait_for  # noqa: E402
from tests.cluster import TestCluster  # noqa: E402
from tests.integration.test_quotas import KIB, QUOTA, RECORD, Traffic, cluster, fill, raw_produce, set_quota, wait_committed  # noqa: E402,F401

pytestmark = pytest.mark.integration


def test_a_kafka_producer_is_held_to_its_byte_rate_and_told_the_throttle_time(cluster: TestCluster) -> None:
    topic, client_id = "kafka-produce-quota", "kafka-quota-producer"
    cluster.create_topic(topic)
    set_quota(cluster, (None, client_id), producer_byte_rate=QUOTA)
    wait_committed(cluster, client_id)
    acked, throttles = Traffic(), []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.kafka_bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 0,
        "batch.size": 16 * KIB, "queue.buffering.max.kbytes": 64, "throttle_cb": lambda event: throttles.append(event)})

    def on_delivery(error, message) -> None:
        if error is None:
            acked.add(len(message.value()))

    while not acked.measured():
        try:
            producer.produce(topic, RECORD, partition=0, on_delivery=on_delivery)
        except BufferError:  # the 64 KiB queue is full: the broker is holding the producer
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(30) == 0
    del producer
    rate = acked.rate()
    assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, f"{rate / KIB:.0f} KiB/s against a quota of {QUOTA / KIB:.0f} KiB/s"
    assert any(t.throttle_time > 0 for t in throttles), [t.throttle_time for t in throttles]  # also told when it ends (0)
    # one measure whichever door: the same client id through the gRPC door is over its quota too,
    # another client id is not
    wait_for(lambda: raw_produce(cluster, topic, client_id, 64 * KIB).throttle_time_ms > 0, 15, "the gRPC door throttles it too")
    assert raw_produce(cluster, topic, "kafka-someone-else", 64 * KIB).throttle_time_ms == 0


def test_a_kafka_consumer_is_held_to_its_byte_rate_and_told_the_throttle_time(cluster: TestCluster) -> None:
    topic, client_id = "kafka-fetch-quota", "kafka-quota-consumer"
    fill(cluster, topic)
    set_quota(cluster, (None, client_id), consumer_byte_rate=QUOTA)
    wait_committed(cluster, client_id)
    received, throttles = Traffic(), []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.kafka_bootstrap, "client.id": client_id, "group.id": "kafka-quota", "enable.auto.commit": False,
        "fetch.max.bytes": 64 * KIB, "message.max.bytes": 64 * KIB, "max.partition.fetch.bytes": 64 * KIB,
        # a full local queue would postpone fetching by a whole second, slower than the quota
        "queued.max.messages.kbytes": 256, "fetch.queue.backoff.ms": 10, "throttle_cb": lambda event: throttles.append(event)})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        while not received.measured():
            messages = consumer.consume(1000, 0.5)
            assert all(m.error() is None for m in messages), [m.error() for m in messages if m.error()]
            size = sum(len(m.value()) for m in messages)
            if size:
                received.add(size)
    finally:
        consumer.close()
    rate = received.rate()
    assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, f"{rate / KIB:.0f} KiB/s against a quota of {QUOTA / KIB:.0f} KiB/s"
    assert any(t.throttle_time > 0 for t in throttles), [t.throttle_time for t in throttles]  # also told when it ends (0)


def test_a_kafka_client_without_sasl_is_measured_as_the_anonymous_user(cluster: TestCluster) -> None:
    """The user dimension on this door is the connection's principal: ANONYMOUS without SASL
    (a user and client id quota, the most specific entity, names it)."""
    topic, client_id = "kafka-anonymous-quota", "kafka-anonymous"
    cluster.create_topic(topic)
    set_quota(cluster, ("ANONYMOUS", client_id), producer_byte_rate=QUOTA)
    wait_committed(cluster, client_id)
    throttles: list = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "client.id": client_id, "acks": 1,
                                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for _ in range(1024):  # 1 MiB: twice what the quota allows over the measured window
        producer.produce(topic, RECORD, partition=0)
    assert producer.flush(30) == 0
    wait_for(lambda: producer.poll(0.1) is not None and any(t > 0 for t in throttles), 15, "a throttle time reported to librdkafka")
    del producer
