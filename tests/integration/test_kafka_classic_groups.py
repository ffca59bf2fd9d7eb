"""The classic group protocol on the Kafka door (docs/kafka.md), with kafka-python's
``subscribe`` on real processes: three members share a topic's partitions; one is SIGKILLed and
the others take its partitions over; with commits after processing nothing is lost and no
committed offset goes back (``kafka_group_kill.py``'s checker; librdkafka's classic members
go through the same check).
DescribeGroups and ListGroups show the group through Kafka's admin client, and kraftlog's own
``groups describe`` and ``groups list`` show it as a classic group with its members' assignments."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("kafka", reason="kafka-python is in the test extra: pip install -e '.[test]'")

from kafka.admin import KafkaAdminClient  # noqa: E402

from tests.cluster import cluster_with_topic  # noqa: E402
from tests.integration import kafka_group_kill as group_kill  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "classic-groups"
PARTITIONS = 6
GROUP = "classic-three"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_with_topic(tmp_path_factory.mktemp("kafka-groups"), TOPIC, PARTITIONS) as cluster:
        yield cluster


def _kraftlog_json(*args: str):
    out = subprocess.run([sys.executable, "-m", "cli", *args, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_three_kafka_python_members_share_partitions_and_survive_one_killed(cluster, tmp_path):
    with group_kill.group_with_one_killed(cluster, "kafka-python", TOPIC, PARTITIONS, GROUP, tmp_path) as run:
        group_kill.assert_survived(run)

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
        assert {m["client_id"] for m in mine["members"]} == {f.name for f in run.files[1:]}
        listed_here = {g["group_id"]: g["protocol"] for g in _kraftlog_json("groups", "list", "--bootstrap", cluster.bootstrap)}
        assert listed_here[GROUP] == "classic"


def test_three_librdkafka_members_share_partitions_and_survive_one_killed(cluster, tmp_path):
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")
    topic = "classic-librdkafka-kill"
    cluster.create_topic(topic, PARTITIONS, 3)
    cluster.wait_topic_ready(topic, PARTITIONS)
    with group_kill.group_with_one_killed(cluster, "librdkafka", topic, PARTITIONS, "librdkafka-three", tmp_path) as run:
        group_kill.assert_survived(run)


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
        everything = {p: count // partitions for p in range(partitions)}
        every_partition = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        committed: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while committed != everything and time.monotonic() < deadline:
            for mine, member in zip(read, members):
                messages = member.consume(100, 0.2)
                for message in messages:
                    assert message.error() is None, message.error()
                    mine.add((message.partition(), message.offset()))
                if messages:
                    _commit(confluent_kafka, member)
            if sum(map(len, read)) >= count and all(m.assignment() for m in members):
                for member in members:  # what each read since a commit a rebalance refused
                    read_to = [tp for tp in member.position(member.assignment()) if tp.offset >= 0]
                    if read_to:
                        _commit(confluent_kafka, member, read_to)
                committed = {tp.partition: tp.offset for tp in members[0].committed(every_partition, timeout=10)}
        assignments = [{tp.partition for tp in m.assignment()} for m in members]
        assert assignments[0] and assignments[1] and assignments[0] | assignments[1] == set(range(partitions))
        assert len(read[0] | read[1]) == count
        assert committed == everything
    finally:
        for member in members:
            member.close()


def _commit(confluent_kafka, member, offsets=None) -> None:
    """Commit what ``member`` read; a commit between a rebalance's join and sync is refused,
    as Kafka refuses it (the member's partitions may move: the next owner reads from the last
    commit, so a record is read at least once)."""
    try:
        member.commit(offsets=offsets, asynchronous=False)  # None: the offsets stored for what it consumed
    except confluent_kafka.KafkaException as exc:
        assert exc.args[0].code() == confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS, exc
