"""The Kafka door against the gRPC door in one run, on one cluster (docs/kafka.md, "Performance"):

    python -m pytest -m benchmark tests/integration/test_kafka_benchmark.py -s

One controller and three brokers, 3-partition topics at replication factor 3, 100-byte
records, acks=all, lz4:

- produce throughput: confluent-kafka's producer (librdkafka, its default batching, idempotent)
  against kraftlog's Python producer over gRPC; goal: the Kafka door at 70% or more;
- consume throughput, first read: confluent-kafka's consumer against the Python consumer's
  Consume stream over the same records, once for records written through the Kafka door
  (which the door hands out as the client sent them while it remembers them) and once for
  records written through the gRPC door (every batch converted: the door's cost); then
  confluent-kafka again (the door's converted-batch cache warm); goal: 70%;
- one record produced and awaited at a time: librdkafka (``flush`` after each) against the
  Python producer (``send().result()``); goal: the Kafka door's p50 within 1.2x.

Fair by construction, since the machine (2 cores) runs the brokers, both clients and other
work: both doors are warmed up before anything is timed (connections, metadata, the door's
first decode of each request version, the consumer group's coordinator); the doors take turns
going first, round by round (ROUNDS rounds, each compared within itself); each round's reads
are of topics of their own, so no first read finds batches an earlier one converted. Beside
each rate: the brokers' CPU per record (the three brokers' user + system time, from /proc:
the door's conversion shows there) and the client's (this process's CPU, librdkafka's threads included: the clients differ, and they
share the cores with the brokers). The ratio reported is the median of the rounds'.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable, NamedTuple

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from data_plane.client import Consumer, Producer  # noqa: E402
from tests.cluster import TestCluster, cluster_with_topic  # noqa: E402

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

TOPIC = "door-bench"
PARTITIONS = 3
RECORDS = 300_000
WARM_UP_RECORDS = 20_000
LATENCY_SAMPLES = 2_000
ROUNDS = 3
VALUE = bytes(100)


class Cost(NamedTuple):
    """One timed run: records/s, and broker and client CPU µs per record."""

    rate: float
    broker_us: float
    client_us: float

    def __str__(self) -> str:
        return f"{self.rate:>9,.0f} rec/s (broker {self.broker_us:.1f} µs, client {self.client_us:.1f} µs /record)"


def broker_cpu_s(cluster: TestCluster) -> float:
    """User + system CPU seconds the brokers have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for broker in cluster.brokers:
        fields = open(f"/proc/{broker.pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def timed(cluster: TestCluster, run: Callable[[], None], records: int = RECORDS) -> Cost:
    broker_before, client_before, started = broker_cpu_s(cluster), time.process_time(), time.perf_counter()
    run()
    took = time.perf_counter() - started
    return Cost(records / took, (broker_cpu_s(cluster) - broker_before) * 1e6 / records,
                (time.process_time() - client_before) * 1e6 / records)


def in_turns(round_: int, runs: dict[str, Callable[[], Cost]]) -> dict[str, Cost]:
    """``runs`` in their order on even rounds, reversed on odd ones: neither door always
    goes first (into a cooler machine, or behind the other's leftover work)."""
    names = list(runs) if round_ % 2 == 0 else list(reversed(runs))
    return {name: runs[name]() for name in names}


def kafka_produce(cluster: TestCluster, topic: str = TOPIC, records: int = RECORDS) -> None:
    """Failures reported, successes not (``delivery.report.only.error``): the Python producer's
    loop it is compared with does not look at each write's result either, and a Python
    callback per record costs about a microsecond of the client's CPU, on the cores the
    brokers share."""
    failed: list = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all", "compression.type": "lz4",
                                         "enable.idempotence": True, "delivery.report.only.error": True,
                                         "on_delivery": lambda err, _msg: failed.append(err)})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:  # its queue is full: let deliveries drain it
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not failed, failed[:3]


def grpc_produce(cluster: TestCluster, topic: str = TOPIC, records: int = RECORDS) -> None:
    with Producer(cluster.bootstrap, acks="all", compression="lz4") as producer:
        for i in range(records):
            producer.send(topic, VALUE, partition=i % PARTITIONS)
        producer.flush()


# What a user reading a backlog as fast as it comes sets (docs/kafka.md, "Performance"):
# librdkafka stops fetching once ``queued.min.messages`` records wait in the consumer's queue
# (100,000 by default, all partitions together) and then fetches again only after
# ``fetch.queue.backoff.ms`` (1 s): a consumer that falls 100,000 records behind stalls for a
# second. The Python consumer's stream bounds what it holds ahead in messages of stored
# batches, not in records. Raised to a million, librdkafka's queue is bounded by
# ``queued.max.messages.kbytes`` (64 MiB by default) instead.
KAFKA_CONSUMER = {"queued.min.messages": 1_000_000}


def kafka_consume(cluster: TestCluster, topic: str, records: int = RECORDS) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "bench", "enable.auto.commit": False,
                                         **KAFKA_CONSUMER})
    # The topic's leaders first, as the Python consumer learns them before it reads: assigned
    # with none known, librdkafka retries its offset query on a 500 ms timer (half a second of
    # a one-second read, whatever the door does).
    consumer.list_topics(topic, timeout=10)
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    try:
        while seen < records:
            seen += len(consumer.consume(10_000, 1.0))
    finally:
        consumer.close()


def grpc_consume(cluster: TestCluster, topic: str, records: int = RECORDS) -> None:
    with Consumer(cluster.bootstrap, fetch_mode="stream") as consumer:
        tps = [(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        seen = 0
        while seen < records:
            seen += len(consumer.poll(1000))


def new_topic(cluster: TestCluster, name: str) -> str:
    cluster.create_topic(name, PARTITIONS, 3)
    cluster.wait_topic_ready(name, PARTITIONS)
    return name


def warm_up(cluster: TestCluster) -> None:
    """Some records through each door's producer and consumer on a topic of their own, before
    anything is timed: connections, metadata, each process's first use of its code paths
    (the door's first decode of each request version), and the bench group's coordinator
    (``__consumer_offsets``, created on a group's first use, fifty partitions) are then
    behind us, as on a broker that has served clients before. The timed topics' records
    stay unconverted: each round's first Kafka read starts from a cold conversion cache."""
    topic = new_topic(cluster, f"{TOPIC}-warm-up")
    kafka_produce(cluster, topic, WARM_UP_RECORDS)
    grpc_produce(cluster, topic, WARM_UP_RECORDS)
    kafka_consume(cluster, topic, 2 * WARM_UP_RECORDS)
    grpc_consume(cluster, topic, 2 * WARM_UP_RECORDS)


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
    produced: list[dict[str, Cost]] = []
    read: dict[str, list[dict[str, Cost]]] = {"Kafka": [], "gRPC": []}  # by the door the records were written through
    with cluster_with_topic(tmp_path, TOPIC, PARTITIONS) as cluster:
        warm_up(cluster)
        for round_ in range(ROUNDS):
            produced.append(in_turns(round_, {"kafka": lambda: timed(cluster, lambda: kafka_produce(cluster)),
                                              "grpc": lambda: timed(cluster, lambda: grpc_produce(cluster))}))
            for writer, fill in (("Kafka", kafka_produce), ("gRPC", grpc_produce)):
                topic = new_topic(cluster, f"{TOPIC}-{writer.lower()}-written-{round_}")
                fill(cluster, topic)
                reads = in_turns(round_, {"kafka": lambda: timed(cluster, lambda: kafka_consume(cluster, topic)),
                                          "grpc": lambda: timed(cluster, lambda: grpc_consume(cluster, topic))})
                reads["kafka again"] = timed(cluster, lambda: kafka_consume(cluster, topic))
                read[writer].append(reads)
        kafka_lat, grpc_lat = kafka_one_at_a_time(cluster), grpc_one_at_a_time(cluster)
    k50, g50 = percentile(kafka_lat, 0.5), percentile(grpc_lat, 0.5)

    def ratios(rounds: list[dict[str, Cost]], kafka: str) -> list[float]:
        return [r[kafka].rate / r["grpc"].rate for r in rounds]

    print(f"\nKafka door against gRPC door, 100-byte records, RF=3 acks=all lz4 (load average {os.getloadavg()[0]:.2f}):")
    for round_, p in enumerate(produced):
        print(f"  round {round_ + 1} ({'Kafka' if round_ % 2 == 0 else 'gRPC'} door first)")
        print(f"    produce    confluent-kafka {p['kafka']}   Python/gRPC {p['grpc']}   {p['kafka'].rate / p['grpc'].rate:.0%}")
        for writer, rounds in read.items():
            r = rounds[round_]
            print(f"    first read of {writer}-written records  confluent-kafka {r['kafka']}   Python Consume {r['grpc']}   "
                  f"{r['kafka'].rate / r['grpc'].rate:.0%};  again {r['kafka again']}")
    lines = [("produce", ratios(produced, "kafka"))]
    for writer, rounds in read.items():
        lines += [(f"first read, {writer}-written", ratios(rounds, "kafka")), (f"read again, {writer}-written", ratios(rounds, "kafka again"))]
    for what, values in lines:
        print(f"  {what:<27} Kafka door / gRPC door: median {statistics.median(values):.0%} "
              f"(rounds {', '.join(f'{v:.0%}' for v in values)}; goal >= 70%)")
    print(f"  one at a time  librdkafka p50 {k50:.2f} ms p99 {percentile(kafka_lat, 0.99):.2f} ms   "
          f"Python/gRPC p50 {g50:.2f} ms p99 {percentile(grpc_lat, 0.99):.2f} ms   ratio {k50 / g50:.2f}x (goal <= 1.2x)")
    assert all(c.rate > 0 for r in produced + read["Kafka"] + read["gRPC"] for c in r.values())
