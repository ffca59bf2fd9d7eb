"""The three-broker cluster the Kafka door's transaction tests share (librdkafka, kafka-python,
aiokafka): small ``__transaction_state`` and ``__consumer_offsets`` topics so they are created
in moments, and the tests' topics of one partition, replicated three times, ready."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.cluster import TestCluster, local_cluster

ARGS = ["--transaction-state-partitions", "3", "--offsets-topic-partitions", "3"]


@contextmanager
def transactional_cluster(directory: Path, topics: tuple[str, ...] = ("txn",)) -> Iterator[TestCluster]:
    with local_cluster(directory, controllers=1, brokers=3, broker_args=ARGS) as running:
        for topic in topics:
            running.create_topic(topic, 1, 3)
            running.wait_topic_ready(topic, 1)
        yield running
