"""kill -9 in the middle of a produce load, then a torn and corrupt tail on disk: after the
restart every acknowledged batch is intact, offsets continue without a gap, and the broker
has cut the damaged tail rather than serving it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from data_plane.record_batch import encode_batch
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_cluster_e2e import read_all

pytestmark = pytest.mark.integration


@pytest.fixture()
def cluster(tmp_path: Path) -> TestCluster:
    with local_cluster(tmp_path, controllers=1, brokers=1) as c:
        yield c


def produce_until_killed(cluster: TestCluster, topic: str, acked: dict[int, bytes], enough: threading.Event) -> None:
    """Send batches of 100 records with acks=1 and keep (offset -> value) of every acknowledged one."""
    from data_plane.client import Producer

    lock = threading.Lock()
    with Producer(cluster.bootstrap, acks=1, delivery_timeout_ms=3000, request_timeout_ms=1000, retries=0) as producer:
        for batch_no in range(10_000):
            values = [f"b{batch_no}-r{i}".encode() for i in range(100)]

            def done(future, values=values) -> None:
                if future.exception() is None:
                    with lock:
                        for i, value in enumerate(values):
                            acked[future.result().offset + i] = value
                        if len(acked) >= 20_000:
                            enough.set()

            producer.send_batch(topic, 0, values).add_done_callback(done)
            if not cluster.is_running(cluster.broker(1)):
                break
        producer.flush(timeout=10)


def test_kill9_mid_load_then_corrupt_tail_keeps_every_acknowledged_batch(cluster: TestCluster) -> None:
    cluster.create_topic("recovery", partitions=1, replication_factor=1)
    acked: dict[int, bytes] = {}
    enough = threading.Event()
    producer = threading.Thread(target=produce_until_killed, args=(cluster, "recovery", acked, enough))
    producer.start()
    assert enough.wait(60), "the producer never got 20,000 acknowledgements"
    broker = cluster.broker(1)
    cluster.kill(broker)  # SIGKILL while batches are still in flight
    producer.join(60)
    assert not producer.is_alive()

    segments = sorted((cluster.data_dir / broker.name / "recovery-0").glob("*.log"))
    assert segments, "no segment files found for recovery-0"
    torn = encode_batch([b"torn" * 50] * 10)
    with open(segments[-1], "ab") as tail:
        tail.write(torn[: len(torn) // 2])  # a batch cut off mid-write
        tail.write(os.urandom(333))  # and garbage after it

    cluster.restart(broker)
    cluster.wait_ready()
    cluster.wait_topic_ready("recovery", 1)
    snapshot = dict(acked)
    highest = max(snapshot)
    values = read_all(cluster.bootstrap, "recovery", 1, highest + 1)[0]
    assert len(values) >= highest + 1, f"only {len(values)} records after recovery, expected at least {highest + 1}"
    lost = [o for o, v in snapshot.items() if values[o] != v]
    assert not lost, f"{len(lost)} acknowledged records changed or vanished, first at offset {lost[0]}"

    # The log is writable after recovery and offsets continue right after the surviving data.
    from data_plane.client import Producer

    with Producer(cluster.bootstrap, acks=1) as producer:
        metadata = producer.send("recovery", b"after-restart", partition=0).result(timeout=30)
    assert metadata.offset == len(values)
    wait_for(lambda: read_all(cluster.bootstrap, "recovery", 1, len(values) + 1)[0][-1] == b"after-restart", 30, "the new record")
