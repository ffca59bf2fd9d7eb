"""The demo's idempotent producer across full cluster restarts (every broker and controller
down, then up): every partition moves again after each restart (no sequence livelock), per
partition the stored values rise strictly (no reordering, no duplicate), every acknowledged
record is there, and every record's outcome is counted."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cli.demo import DEMO_PRODUCER_SETTINGS, Progress, produce_numbered
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS = "demo", 3


def stored_numbers(cluster: TestCluster) -> dict[int, list[int]]:
    """Every partition read from the start up to its high watermark."""
    from data_plane.client import Consumer

    numbers: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(cluster.bootstrap) as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ends = {p: consumer.high_watermark((TOPIC, p)) for p in range(PARTITIONS)}
        wait_for(
            lambda: [numbers[r.partition].append(int(r.value)) for r in consumer.poll(200)] is not None
            and all(len(numbers[p]) >= ends[p] for p in range(PARTITIONS)),
            60,
            "every stored record read back",
        )
    return numbers


def first_misordering(values: list[int]) -> tuple[int, int, int] | None:
    """(index, value before, value) of the first value not above the one before it."""
    for i in range(1, len(values)):
        if values[i] <= values[i - 1]:
            return i, values[i - 1], values[i]
    return None


def test_first_misordering_finds_a_reorder_and_a_duplicate():
    assert first_misordering([0, 1, 2, 5]) is None
    assert first_misordering([0, 581174, 398250]) == (2, 581174, 398250)
    assert first_misordering([3, 4, 4]) == (2, 4, 4)


def test_the_demo_producer_across_full_restarts_neither_reorders_nor_duplicates(tmp_path: Path) -> None:
    from data_plane.client import Producer

    with local_cluster(tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"})
        progress = Progress(PARTITIONS)
        stop = threading.Event()
        # the demo's settings; a smaller buffer only bounds the backlog built while the cluster is down
        producer = Producer(cluster.bootstrap, **DEMO_PRODUCER_SETTINGS, buffer_memory=4 * 1024 * 1024)
        thread = threading.Thread(target=produce_numbered, args=(producer, TOPIC, PARTITIONS, progress, stop), daemon=True)
        thread.start()
        try:
            wait_for(lambda: progress.acked >= 20_000, 60, "20,000 acknowledged records")
            for restart in ("graceful", "kill -9"):
                if restart == "graceful":
                    cluster.stop()
                else:
                    for node in cluster.brokers + cluster.controllers:
                        cluster.kill(node)
                cluster.start()
                cluster.wait_ready()
                before = list(progress.acked_by_partition)
                wait_for(
                    lambda: all(now >= then + 5_000 for now, then in zip(progress.acked_by_partition, before)),
                    120,
                    f"5,000 more acknowledged records on every partition after the {restart} restart",
                )
        finally:
            stop.set()
            thread.join(90)
            producer.flush(150)
            producer.close()
        numbers = stored_numbers(cluster)
    for p, values in numbers.items():
        assert first_misordering(values) is None, f"partition {p}: (index, before, value) = {first_misordering(values)}"
        assert len(values) >= progress.acked_by_partition[p], f"partition {p} lost acknowledged records"
    assert progress.produced == progress.acked + progress.failed + progress.unknown
    assert sum(map(len, numbers.values())) <= progress.acked + progress.unknown  # failed ones were not written
