"""Consume and produce throughput, 100-byte records, one broker (and one controller):

    python -m pytest -m benchmark tests/integration/test_consume_benchmark.py -s

``test_streaming_against_polling``: one consumer reading RECORDS_STREAMED records already
committed, with Consume streams (``fetch_mode="stream"``) against Fetch long polls
(``fetch_mode="fetch"``) in the same run, each through ``poll_batches`` (the batch format,
decoded columns, no per-record objects) and ``poll`` (a ConsumerRecord per record); plus a
stub-level Consume stream that only counts batch bytes (what the broker can push). Goal:
>= 1.5M records/s streaming with the batch format.

``test_stub_client_against_python_batch_path``: a client made of generated stubs only
(``stub_client.py``: Produce, Fetch and Consume on the plain-records path) against the
Python client's batch path (Producer, Consumer) in the same run.

Every figure is the best of ROUNDS runs, printed with the machine's load average (the
machine is shared: compare figures of one run with each other).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterator

import pytest

from data_plane.client import Consumer, Producer
from kraftlog_proto import broker_pb2
from tests.cluster import TestCluster, local_cluster
from tests.integration import stub_client

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

RECORD_BYTES = 100
RECORDS_STREAMED = 1_000_000
RECORDS_STUB = 200_000
ROUNDS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("consume-bench"), controllers=1, brokers=1) as c:
        yield c


def best_rate(count: int, run: Callable[[], object]) -> float:
    """Records per second of the fastest of ROUNDS runs of ``run`` (each handles ``count``)."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return count / best


def python_produce(cluster: TestCluster, topic: str, count: int) -> None:
    value = bytes(RECORD_BYTES)
    with Producer(cluster.bootstrap, acks=1) as producer:
        for _ in range(count):
            producer.send(topic, value=value, partition=0)
        producer.flush()


def python_consume(cluster: TestCluster, topic: str, count: int, mode: str, per_record: bool) -> None:
    """Read offsets [0, count) of partition 0 with the Python consumer."""
    tp = (topic, 0)
    with Consumer(cluster.bootstrap, fetch_mode=mode) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        seen = 0
        while seen < count:
            if per_record:
                seen += len(consumer.poll(1000))
            else:
                seen += sum(b.header.record_count for batches in consumer.poll_batches(1000).values() for b in batches)
    assert seen >= count, (seen, count)  # the last poll may run past: the topic can hold more


def report(title: str, rates: dict[str, float]) -> None:
    print(f"\n{title} (load average {os.getloadavg()[0]:.1f}):")
    for name, rate in rates.items():
        print(f"  {name:<58} {rate / 1e6:6.2f} M records/s  {rate * RECORD_BYTES / 2**20:7.1f} MiB/s")


def test_streaming_against_polling(cluster: TestCluster) -> None:
    topic = "bench-stream"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    python_produce(cluster, topic, RECORDS_STREAMED)
    address = stub_client.leader_address(cluster.bootstrap, topic, 0)
    n = RECORDS_STREAMED
    rates = {
        "Consume stream, batches undecoded (stub)": best_rate(n, lambda: stub_client.consume(address, topic, 0, 0, n, broker_pb2.BATCHES)),
        "Consumer fetch_mode=stream, poll_batches": best_rate(n, lambda: python_consume(cluster, topic, n, "stream", False)),
        "Consumer fetch_mode=fetch, poll_batches": best_rate(n, lambda: python_consume(cluster, topic, n, "fetch", False)),
        "Consumer fetch_mode=stream, poll (a ConsumerRecord each)": best_rate(n, lambda: python_consume(cluster, topic, n, "stream", True)),
        "Consumer fetch_mode=fetch, poll (a ConsumerRecord each)": best_rate(n, lambda: python_consume(cluster, topic, n, "fetch", True)),
    }
    report(f"one consumer, {n:,} records of {RECORD_BYTES} bytes, best of {ROUNDS}", rates)


def test_stub_client_against_python_batch_path(cluster: TestCluster) -> None:
    n = RECORDS_STUB
    values = [bytes(RECORD_BYTES)] * n
    topics = {"stub": "bench-stub", "python": "bench-python"}
    for name in topics.values():
        cluster.create_topic(name, partitions=1, replication_factor=1)
    address = stub_client.leader_address(cluster.bootstrap, topics["stub"], 0)
    produce = {
        "produce: stub client, records path (5,000 per request, 4 in flight)":
            best_rate(n, lambda: stub_client.produce(address, topics["stub"], 0, values, per_request=5_000)),
        "produce: Python Producer, batch path (acks=1)": best_rate(n, lambda: python_produce(cluster, topics["python"], n)),
    }
    consume = {
        "consume: stub client, records-path Fetch polls": best_rate(n, lambda: stub_client.fetch(address, topics["stub"], 0, 0, n)),
        "consume: stub client, records-path Consume stream": best_rate(n, lambda: stub_client.consume(address, topics["stub"], 0, 0, n)),
        "consume: Python Consumer (stream), poll_batches": best_rate(n, lambda: python_consume(cluster, topics["python"], n, "stream", False)),
        "consume: Python Consumer (stream), poll": best_rate(n, lambda: python_consume(cluster, topics["python"], n, "stream", True)),
    }
    report(f"{n:,} records of {RECORD_BYTES} bytes, best of {ROUNDS}", {**produce, **consume})
