"""The Kafka door against the gRPC door in one run, on one cluster (docs/kafka.md, "Performance"):

    python -m pytest -m benchmark tests/integration/test_kafka_benchmark.py -s

One controller and three brokers, a 3-partition topic at replication factor 3, 100-byte
records, acks=all, lz4:

- produce throughput: confluent-kafka's producer (librdkafka, its default batching, idempotent)
  against kraftlog's Python producer over gRPC; goal: the Kafka door at 70% or more;
- broker CPU per record for each (the three brokers' user + system time, from /proc), so the
  cost of translating at the door is known;
- consume throughput: confluent-kafka's consumer against the Python consumer's Consume stream,
  both from the beginning of the records the produce test wrote, with the broker CPU per record
  of each, and the Kafka door's first read apart (the door caches converted batches; the
  bench group's coordinator is warmed up on another topic first, so the first read times the
  conversion, not the creation of ``__consumer_offsets``);
- one record produced and awaited at a time: librdkafka (``flush`` after each) against the
  Python producer (``send().result()``); goal: the Kafka door's p50 within 1.2x.

Each throughput is the best of ROUNDS runs, printed with the load average: the machine is
shared, so compare the figures of one run with each other.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from data_plane.client import Consumer, Producer  # noqa: E402
from tests.cluster import TestCluster, cluster_with_topic  # noqa: E402

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

TOPIC = "door-bench"
PARTITIONS = 3
RECORDS = 300_000
LATENCY_SAMPLES = 2_000
ROUNDS = 2
VALUE = bytes(100)


def broker_cpu_s(cluster: TestCluster) -> float:
    """User + system CPU seconds the brokers have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for broker in cluster.brokers:
        fields = open(f"/proc/{broker.pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def best(cluster: TestCluster, run: Callable[[], None]) -> tuple[float, float, float]:
    """(records/s of the fastest of ROUNDS runs, broker CPU µs per record over every run,
    records/s of the first run: for reads, the one the door's converted-batch cache has not seen)."""
    took, cpu_before = [], broker_cpu_s(cluster)
    for _ in range(ROUNDS):
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return RECORDS / min(took), (broker_cpu_s(cluster) - cpu_before) * 1e6 / (RECORDS * ROUNDS), RECORDS / took[0]


def kafka_produce(cluster: TestCluster) -> None:
    failed: list = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all", "compression.type": "lz4",
                                         "enable.idempotence": True})
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(TOPIC, VALUE, partition=i % PARTITIONS,
                                 on_delivery=lambda err, _msg: failed.append(err) if err else None)
                break
            except BufferError:  # its queue is full: let deliveries drain it
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not failed, failed[:3]


def grpc_produce(cluster: TestCluster) -> None:
    with Producer(cluster.bootstrap, acks="all", compression="lz4") as producer:
        for i in range(RECORDS):
            producer.send(TOPIC, VALUE, partition=i % PARTITIONS)
        producer.flush()


def kafka_consume(cluster: TestCluster) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "bench", "enable.auto.commit": False})
    # The topic's leaders first, as the Python consumer learns them before it reads: assigned
    # with none known, librdkafka retries its offset query on a 500 ms timer (half a second of
    # a one-second read, whatever the door does).
    consumer.list_topics(TOPIC, timeout=10)
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    try:
        while seen < RECORDS:
            seen += len(consumer.consume(10_000, 1.0))
    finally:
        consumer.close()


def warm_up_the_kafka_consumers_path(cluster: TestCluster) -> None:
    """One record through the door's consumer path on another topic, before anything is timed:
    the bench group's coordinator (its ``__consumer_offsets``, created on a group's first use,
    fifty partitions) and the door's first decode of each request version are then behind
    us, as on any broker that has served Kafka consumers before. The records the timed reads
    fetch stay unconverted: the first read still starts from a cold conversion cache."""
    topic = f"{TOPIC}-warm-up"
    cluster.create_topic(topic, 1, 3)
    cluster.wait_topic_ready(topic, 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all"})
    producer.produce(topic, VALUE, partition=0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    try:
        deadline = time.monotonic() + 60
        while not consumer.consume(1, 1.0) and time.monotonic() < deadline:
            pass
    finally:
        consumer.close()


def grpc_consume(cluster: TestCluster) -> None:
    with Consumer(cluster.bootstrap, fetch_mode="stream") as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        seen = 0
        while seen < RECORDS:
            seen += len(consumer.poll(1000))


def kafka_one_at_a_time(cluster: TestCluster) -> list[float]:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all", "linger.ms": 0,
                                         "enable.idempotence": True})
    samples = []
    for _ in range(LATENCY_SAMPLES):
        started = time.perf_counter()
        producer.produce(TOPIC, VALUE, partition=0)
        assert producer.flush(30) == 0
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def grpc_one_at_a_time(cluster: TestCluster) -> list[float]:
    samples = []
    with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
        for _ in range(LATENCY_SAMPLES):
            started = time.perf_counter()
            producer.send(TOPIC, VALUE, partition=0).result(30)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=1000)[int(q * 1000) - 1]


def test_the_kafka_door_against_the_grpc_door(tmp_path) -> None:
    with cluster_with_topic(tmp_path, TOPIC, PARTITIONS) as cluster:
        kafka_rate, kafka_cpu, _ = best(cluster, lambda: kafka_produce(cluster))
        grpc_rate, grpc_cpu, _ = best(cluster, lambda: grpc_produce(cluster))
        warm_up_the_kafka_consumers_path(cluster)
        kafka_read, kafka_read_cpu, kafka_first_read = best(cluster, lambda: kafka_consume(cluster))
        grpc_read, grpc_read_cpu, _ = best(cluster, lambda: grpc_consume(cluster))
        kafka_lat, grpc_lat = kafka_one_at_a_time(cluster), grpc_one_at_a_time(cluster)
    k50, g50 = percentile(kafka_lat, 0.5), percentile(grpc_lat, 0.5)
    print(f"\nKafka door against gRPC door, 100-byte records, RF=3 acks=all lz4 (load average {os.getloadavg()[0]:.2f}):")
    print(f"  produce  confluent-kafka {kafka_rate:>11,.0f} rec/s ({kafka_cpu:.1f} µs broker CPU/record)   "
          f"Python/gRPC {grpc_rate:>11,.0f} rec/s ({grpc_cpu:.1f} µs)   Kafka door at {kafka_rate / grpc_rate:.0%} (goal >= 70%)")
    print(f"  consume  confluent-kafka {kafka_read:>11,.0f} rec/s ({kafka_read_cpu:.1f} µs; first read, conversion cache cold, "
          f"{kafka_first_read:,.0f} rec/s)   Python Consume stream {grpc_read:>11,.0f} rec/s ({grpc_read_cpu:.1f} µs)   "
          f"Kafka door at {kafka_read / grpc_read:.0%} (goal >= 70%)")
    print(f"  one at a time  librdkafka p50 {k50:.2f} ms p99 {percentile(kafka_lat, 0.99):.2f} ms   "
          f"Python/gRPC p50 {g50:.2f} ms p99 {percentile(grpc_lat, 0.99):.2f} ms   ratio {k50 / g50:.2f}x (goal <= 1.2x)")
    assert kafka_rate > 0 and grpc_rate > 0
