"""The client library against a real controller and broker: 100,000 records through
send() and send_batch() over 3 partitions come back complete and in order per partition."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (Path(__file__).parents[1] / "cluster.py").exists(),
        reason="tests/cluster.py (the lead's local_cluster fixture) is not in this checkout yet",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("metadata_quorum.controller_client") is None,
        reason="metadata_quorum/controller_client.py (needed by local_cluster.create_topic) is not in this checkout yet",
    ),
]

TOPIC = "client-it"
PARTITIONS = 3
SEND_RECORDS = 40_000
BULK_BATCHES = 30
BULK_RECORDS = 2_000  # 30 x 2,000 + 40,000 = 100,000


def test_produce_with_send_and_send_batch_then_consume_everything_in_order(tmp_path):
    from data_plane.client import Admin, Consumer, Producer
    from tests.cluster import local_cluster

    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 1)
        sent: list[tuple[object, bytes]] = []  # (future, value) in call order
        with Producer(cluster.bootstrap, acks="all", linger_ms=5, compression="lz4") as producer:
            for i in range(SEND_RECORDS):
                value = b"send-%06d" % i
                key = b"key-%d" % (i % 101) if i % 2 else None  # keyed and sticky records
                sent.append((producer.send(TOPIC, value, key=key), value))
                n, rest = divmod(i, SEND_RECORDS // BULK_BATCHES)
                if rest == 0 and n < BULK_BATCHES:
                    values = [b"bulk-%02d-%05d" % (n, j) for j in range(BULK_RECORDS)]
                    sent.append((producer.send_batch(TOPIC, n % PARTITIONS, values), values))
            producer.flush(timeout=120)

        expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for future, value in sent:
            metadata = future.result(0)
            if isinstance(value, list):
                assert metadata.offset == len(expected[metadata.partition])
                expected[metadata.partition].extend(value)
            else:
                assert metadata.offset == len(expected[metadata.partition])
                expected[metadata.partition].append(value)
        total = sum(map(len, expected.values()))
        assert total == SEND_RECORDS + BULK_BATCHES * BULK_RECORDS == 100_000
        assert all(expected.values()), "sticky and keyed sends should reach every partition"

        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        with Admin(cluster.bootstrap) as admin:
            ends = admin.list_offsets({tp: -1 for tp in tps})
        assert {tp[1]: ends[tp].offset for tp in tps} == {p: len(v) for p, v in expected.items()}

        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        with Consumer(cluster.bootstrap) as consumer:
            consumer.assign(tps)
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            received = 0
            while received < total and time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=500):
                    got[record.partition].append(record.value)
                    offsets[record.partition].append(record.offset)
                    received += 1
            assert consumer.poll(timeout_ms=200) == []
        for p in range(PARTITIONS):
            assert offsets[p] == list(range(len(expected[p])))
            assert got[p] == expected[p]


def test_admin_reads_brokers_and_delegates_topic_changes_to_the_controllers(tmp_path):
    from data_plane.client import Admin
    from tests.cluster import local_cluster

    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            assert len(admin.controller_endpoints()) == 1
            admin.create_topics([("admin-it", 2, 1)])
            cluster.wait_topic_ready("admin-it", 2)
            assert sorted(admin.describe_topics(["admin-it"])["admin-it"].partitions) == [0, 1]
            offsets = admin.list_offsets({("admin-it", 0): -2, ("admin-it", 1): -1})
            assert [offsets[("admin-it", p)].offset for p in (0, 1)] == [0, 0]  # empty log
            logs = admin.describe_logs()
            assert {(p.topic, p.partition) for state in logs.values() for p in state.partitions} >= {("admin-it", 0), ("admin-it", 1)}
            assert admin.describe_quorum()
            admin.delete_topics(["admin-it"])
