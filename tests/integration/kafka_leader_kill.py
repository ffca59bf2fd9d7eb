"""The leader-SIGKILL check every Kafka client's idempotent producer goes through (librdkafka,
kafka-python, aiokafka): a three-broker cluster whose one partition's leader is SIGKILLed while
``RECORDS`` values ``0..RECORDS-1`` are in flight, then the partition read back with kraftlog's
own client (no group: nothing waits on a coordinator). The caller asserts the values are exactly
``0..RECORDS-1`` in order: no duplicates, no gaps, no reordering."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from data_plane.client import Consumer as KraftlogConsumer
from tests.cluster import TestCluster, local_cluster

TOPIC = "through-a-kill"
RECORDS = 6_000
KILL_AT = 2_000  # the index after which the leader dies, with records in flight


@contextmanager
def cluster_for_a_kill(directory: Path) -> Iterator[TestCluster]:
    with local_cluster(directory, controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        cluster.wait_topic_ready(TOPIC, 1)
        yield cluster


def kill_the_leader(cluster: TestCluster) -> None:
    cluster.kill(cluster.broker(cluster.leader(TOPIC, 0)))


def read_back(cluster: TestCluster) -> list[int]:
    """Every value of the partition, and then one more poll: anything past ``RECORDS`` would be a duplicate."""
    with KraftlogConsumer(cluster.bootstrap, auto_offset_reset="earliest") as reader:
        reader.assign([(TOPIC, 0)])
        values: list[int] = []
        deadline = time.monotonic() + 60
        while len(values) < RECORDS and time.monotonic() < deadline:
            values.extend(int(r.value) for r in reader.poll(500))
        values.extend(int(r.value) for r in reader.poll(500))
    return values
