"""aiokafka (an asyncio Kafka client) against kraftlog's Kafka listener (docs/kafka.md), on real
processes: keyed records with headers come back record by record, and two members of a
classic-protocol group share the partitions, read every record once between them and commit;
three members in their own processes survive one SIGKILLed (``kafka_group_kill.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra: pip install -e '.[test]'")

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

from tests.cluster import cluster_with_topic  # noqa: E402
from tests.integration import kafka_group_kill as group_kill  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "aiokafka"
PARTITIONS = 4
RECORDS = 2_000
DEADLINE_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_with_topic(tmp_path_factory.mktemp("aiokafka"), TOPIC, PARTITIONS) as cluster:
        yield cluster


async def _produce(bootstrap: str) -> dict[tuple[int, int], tuple]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        sent = []
        for i in range(RECORDS):
            key, value, headers = b"key-%d" % (i % 31), b"value-%06d" % i, [("i", b"%d" % i)]
            sent.append((await producer.send(TOPIC, value, key=key, headers=headers), key, value, headers))
        return {(m.partition, m.offset): (key, value, headers)
                for m, key, value, headers in [(await future, k, v, h) for future, k, v, h in sent]}
    finally:
        await producer.stop()


def test_aiokafka_produces_and_consumes_and_shares_a_group(cluster):
    async def run() -> None:
        expected = await _produce(cluster.kafka_bootstrap)
        assert len(expected) == RECORDS

        reader = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap, enable_auto_commit=False)
        await reader.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            reader.assign(tps)
            await reader.seek_to_beginning(*tps)
            got: dict[tuple[int, int], tuple] = {}
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < RECORDS and time.monotonic() < deadline:
                for batch in (await reader.getmany(timeout_ms=500)).values():
                    got.update({(r.partition, r.offset): (r.key, r.value, list(r.headers)) for r in batch})
        finally:
            await reader.stop()
        assert got == expected

        members = [AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.kafka_bootstrap, group_id="aiokafka-group",
                                    enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10_000,
                                    heartbeat_interval_ms=500) for _ in range(2)]
        for member in members:
            await member.start()
        try:
            read: dict[int, set] = {0: set(), 1: set()}
            deadline = time.monotonic() + DEADLINE_S
            while (sum(map(len, read.values())) < RECORDS or not all(m.assignment() for m in members)) \
                    and time.monotonic() < deadline:
                for i, member in enumerate(members):
                    polled = await member.getmany(timeout_ms=200)
                    for batch in polled.values():
                        read[i].update((r.partition, r.offset) for r in batch)
                    if polled:
                        await member.commit()
            assignments = [{tp.partition for tp in m.assignment()} for m in members]
            assert assignments[0] and assignments[1] and not assignments[0] & assignments[1]
            assert assignments[0] | assignments[1] == set(range(PARTITIONS))
            assert read[0] | read[1] == set(expected)
            ends = await members[0].end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            for member, mine in zip(members, assignments):
                for p in mine:
                    assert await member.committed(TopicPartition(TOPIC, p)) == ends[TopicPartition(TOPIC, p)]
        finally:
            for member in members:
                await member.stop()
    asyncio.run(run())


def test_three_aiokafka_members_share_partitions_and_survive_one_killed(cluster, tmp_path):
    """Three members in their own processes, one SIGKILLed: the other two take its partitions
    over, every record is processed at least once and no committed offset goes back."""
    topic, partitions = "aiokafka-kill", 6
    cluster.create_topic(topic, partitions, 3)
    cluster.wait_topic_ready(topic, partitions)
    with group_kill.group_with_one_killed(cluster, "aiokafka", topic, partitions, "aiokafka-three", tmp_path) as run:
        group_kill.assert_survived(run)
