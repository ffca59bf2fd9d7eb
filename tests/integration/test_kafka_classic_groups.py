"""The classic group protocol on the Kafka door (docs/kafka.md), with kafka-python's
``subscribe`` on real processes: three members share a topic's partitions; one is SIGKILLed and
the others take its partitions over; with commits after processing nothing is lost.
DescribeGroups and ListGroups show the group through Kafka's admin client, and kraftlog's own
``groups describe`` and ``groups list`` show it as a classic group with its members' assignments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("kafka", reason="kafka-python is in the test extra: pip install -e '.[test]'")

from kafka import KafkaProducer  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

from server_common.waiting import wait_for  # noqa: E402
from tests.cluster import cluster_with_topic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "classic-groups"
PARTITIONS = 6
GROUP = "classic-three"

# One group member: subscribes, writes each record it processed to its file, then commits.
MEMBER = """
import json, sys
from kafka import KafkaConsumer
bootstrap, topic, group, out = sys.argv[1:]
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                         max_poll_interval_ms=20000, client_id=out.rsplit("/", 1)[-1])
consumer.subscribe([topic])
with open(out, "a") as f:
    while True:
        polled = consumer.poll(timeout_ms=200)
        f.write(json.dumps({"assigned": sorted(tp.partition for tp in consumer.assignment())}) + "\\n")
        for batch in polled.values():
            for r in batch:
                f.write(json.dumps({"partition": r.partition, "offset": r.offset, "value": r.value.decode()}) + "\\n")
        f.flush()
        if polled:
            consumer.commit()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_with_topic(tmp_path_factory.mktemp("kafka-groups"), TOPIC, PARTITIONS) as cluster:
        yield cluster


def _produce(bootstrap: str, values: list[str]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i, value in enumerate(values):
            producer.send(TOPIC, value=value.encode(), partition=i % PARTITIONS)
        producer.flush(timeout=30)
    finally:
        producer.close()


def _kraftlog_json(*args: str):
    out = subprocess.run([sys.executable, "-m", "cli", *args, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _last_assignment(path: Path) -> list[int] | None:
    assigned = [line["assigned"] for line in _lines(path) if "assigned" in line]
    return assigned[-1] if assigned else None


def test_three_kafka_python_members_share_partitions_and_survive_one_killed(cluster, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    files = [tmp_path / f"member-{i}" for i in range(3)]
    members = [subprocess.Popen([sys.executable, "-c", MEMBER, cluster.kafka_bootstrap, TOPIC, GROUP, str(f)], env=env)
               for f in files]
    try:
        def shared_by(live: list[Path]) -> bool:
            assigned = [_last_assignment(f) for f in live]
            return all(assigned) and sorted(p for a in assigned for p in a) == list(range(PARTITIONS))
        wait_for(lambda: shared_by(files), 60, "the three members to share the six partitions")
        first = [f"before-{i}" for i in range(300)]
        _produce(cluster.kafka_bootstrap, first)
        processed = lambda: {line["value"] for f in files for line in _lines(f) if "value" in line}  # noqa: E731
        wait_for(lambda: set(first) <= processed(), 60, "the first records processed")

        victim = members[0]
        victim_partitions = _last_assignment(files[0])
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        wait_for(lambda: shared_by(files[1:]), 60, "the two survivors to take over the killed member's partitions")
        assert set(victim_partitions) <= {p for f in files[1:] for p in _last_assignment(f)}

        second = [f"after-{i}" for i in range(300)]
        _produce(cluster.kafka_bootstrap, second)
        wait_for(lambda: set(second) <= processed(), 60, "every record after the kill processed by the survivors")
        assert set(first) | set(second) == processed()  # nothing lost (a record may be processed twice: at least once)

        admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
        try:
            described = admin.describe_groups([GROUP])[GROUP]
            assert (described["error"], described["group_state"], described["protocol_type"]) == (None, "Stable", "consumer")
            assert len(described["members"]) == 2
            listed = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
            assert listed[GROUP] == "Stable"
        finally:
            admin.close()
        # kraftlog's own CLI shows the classic group, its members and what each was assigned
        mine = _kraftlog_json("groups", "describe", GROUP, "--bootstrap", cluster.bootstrap)
        assert (mine["protocol"], mine["state"], len(mine["members"])) == ("classic", "Stable", 2), mine
        assert sorted(p for m in mine["members"] for p in m["assignment"].get(TOPIC, [])) == list(range(PARTITIONS))
        assert {m["client_id"] for m in mine["members"]} == {f.name for f in files[1:]}
        listed_here = {g["group_id"]: g["protocol"] for g in _kraftlog_json("groups", "list", "--bootstrap", cluster.bootstrap)}
        assert listed_here[GROUP] == "classic"
    finally:
        for member in members:
            if member.poll() is None:
                member.kill()
                member.wait()


def test_librdkafkas_classic_consumers_share_a_topic_and_commit(cluster):
    """librdkafka's default consumer (group.protocol=classic): two members split the
    partitions, read every record once between them and commit what they read."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")
    topic, partitions, count = "classic-librdkafka", 4, 400
    cluster.create_topic(topic, partitions, 3)
    cluster.wait_topic_ready(topic, partitions)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0
    del producer

    members = [confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "classic-librdkafka",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
               for _ in range(2)]
    try:
        for member in members:
            member.subscribe([topic])
        read: list[set] = [set(), set()]
        deadline = time.monotonic() + 60
        while (sum(map(len, read)) < count or not all(m.assignment() for m in members)) and time.monotonic() < deadline:
            for mine, member in zip(read, members):
                messages = member.consume(100, 0.2)
                for message in messages:
                    assert message.error() is None, message.error()
                    mine.add((message.partition(), message.offset()))
                if messages:
                    _commit(confluent_kafka, member)
        assignments = [{tp.partition for tp in m.assignment()} for m in members]
        assert assignments[0] and assignments[1] and assignments[0] | assignments[1] == set(range(partitions))
        assert len(read[0] | read[1]) == count
        for member in members:  # what each read since its last refused commit
            member.commit(offsets=member.position(member.assignment()), asynchronous=False)
        committed = members[0].committed([confluent_kafka.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == {p: count // partitions for p in range(partitions)}
    finally:
        for member in members:
            member.close()


def _commit(confluent_kafka, member) -> None:
    """Commit what ``member`` read; a commit between a rebalance's join and sync is refused,
    as Kafka refuses it (the member's partitions may move: the next owner reads from the last
    commit, so a record is read at least once)."""
    try:
        member.commit(asynchronous=False)
    except confluent_kafka.KafkaException as exc:
        assert exc.args[0].code() == confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS, exc
