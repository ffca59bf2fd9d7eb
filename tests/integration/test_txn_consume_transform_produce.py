"""Consume-transform-produce exactly once (KIP-447) with real broker processes: a group
consumer reads an input topic, a transactional producer writes the transformed records and
commits the consumer's offsets with `send_offsets_to_transaction` in the same transaction.

- commit: a read_committed reader sees the output, and the group's committed offset (read
  with OffsetFetch require_stable, which waits for the transaction's marker) moved;
- abort (the negative side): neither the output nor the committed offset changes, while a
  read_uncommitted reader does see the aborted output (so "unchanged" is not a reader that
  sees nothing); the group's next member starts at the committed offset and reads the aborted
  input again."""

from __future__ import annotations

from typing import Iterator

import pytest

from data_plane.client import Consumer, Producer
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_transactions import read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BROKER_ARGS = ["--transaction-state-partitions", "1", "--offsets-topic-partitions", "1", "--group-heartbeat-interval-ms", "200"]
SOURCE, SINK, GROUP = "orders", "orders-upper", "upper-app"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("txn-ctp"), controllers=1, brokers=2, broker_args=BROKER_ARGS) as c:
        c.create_topic(SOURCE, partitions=1, replication_factor=2)
        c.create_topic(SINK, partitions=1, replication_factor=2)
        yield c


def produce_input(cluster: TestCluster, values: list[bytes]) -> None:
    with Producer(cluster.bootstrap, linger_ms=0) as plain:
        for value in values:
            plain.send(SOURCE, value, partition=0)
        plain.flush()


def poll_until(consumer: Consumer, count: int) -> list:
    """The next ``count`` records the group member reads."""
    got: list = []
    wait_for(lambda: got.extend(consumer.poll(100)) or len(got) >= count, 30, f"{count} records of {SOURCE}")
    assert len(got) == count, [r.value for r in got]
    return got


def transform(producer: Producer, consumer: Consumer, records: list, commit: bool) -> None:
    """One transaction: the records upper-cased to SINK and the consumer's position after them."""
    producer.begin_transaction()
    for record in records:
        producer.send(SINK, record.value.upper(), partition=0)
    producer.send_offsets_to_transaction({(SOURCE, 0): records[-1].offset + 1}, consumer.group_metadata())
    producer.commit_transaction() if commit else producer.abort_transaction()


def member(cluster: TestCluster) -> Consumer:
    return Consumer(cluster.bootstrap, group_id=GROUP, isolation_level="read_committed", auto_offset_reset="earliest",
                    enable_auto_commit=False, fetch_max_wait_ms=100)


def test_offsets_move_with_a_committed_transaction_and_not_with_an_aborted_one(cluster: TestCluster) -> None:
    produce_input(cluster, [b"a0", b"a1", b"a2"])
    with member(cluster) as consumer, \
            Producer(cluster.bootstrap, transactional_id="upper-app-0", linger_ms=0, max_block_ms=30_000) as producer:
        consumer.subscribe([SOURCE])
        producer.init_transactions()
        transform(producer, consumer, poll_until(consumer, 3), commit=True)
        assert read(cluster, SINK, 1, "read_committed", 3) == [b"A0", b"A1", b"A2"]
        assert consumer.committed([(SOURCE, 0)])[(SOURCE, 0)].offset == 3  # require_stable: after the commit marker

        produce_input(cluster, [b"b3", b"b4"])
        transform(producer, consumer, poll_until(consumer, 2), commit=False)
        assert consumer.committed([(SOURCE, 0)])[(SOURCE, 0)].offset == 3  # the abort marker dropped offset 5
        assert read(cluster, SINK, 1, "read_committed", 3) == [b"A0", b"A1", b"A2"]
        assert read(cluster, SINK, 1, "read_uncommitted", 5) == [b"A0", b"A1", b"A2", b"B3", b"B4"]  # negative control
    with member(cluster) as successor:
        successor.subscribe([SOURCE])
        assert [r.value for r in poll_until(successor, 2)] == [b"b3", b"b4"]  # resumed at 3, not at 5
