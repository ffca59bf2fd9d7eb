"""Kafka's admin clients against kraftlog's Kafka listener (docs/kafka.md): confluent-kafka's
AdminClient (librdkafka), kafka-python's KafkaAdminClient and aiokafka's AIOKafkaAdminClient
create a topic, describe and alter its configs, add partitions, describe the cluster or list
and describe groups, and delete the topic, and kraftlog's own admin client sees each change."""

from __future__ import annotations

import asyncio
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,  # noqa: E402
                                   NewTopic)
from kafka.admin import KafkaAdminClient, NewPartitions as KafkaPythonNewPartitions  # noqa: E402
from kafka.admin import ConfigResource as KafkaPythonConfigResource, ConfigResourceType  # noqa: E402

from kio.schema.offset_for_leader_epoch.v4.request import (OffsetForLeaderEpochRequest, OffsetForLeaderPartition,  # noqa: E402
                                                           OffsetForLeaderTopic)

from data_plane.client import Admin, Producer  # noqa: E402
from tests.cluster import local_cluster  # noqa: E402
from tests.integration.kafka_wire import kafka_call  # noqa: E402

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("kafka-admin"), controllers=1, brokers=3) as cluster:
        yield cluster


def _done(futures: dict) -> dict:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def _kraftlog_view(cluster, topic: str) -> tuple[int, dict[str, str]]:
    """The topic's partition count and configs as kraftlog's own clients see them."""
    with Admin(cluster.bootstrap) as admin:
        partitions = len(admin.describe_topics([topic])[topic].partitions)
    with cluster.controller_client() as client:
        return partitions, {entry.key: entry.value for entry in client.describe_configs([topic])[topic]}


def test_librdkafka_admin_creates_describes_alters_grows_and_deletes_a_topic(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    _done(admin.create_topics([NewTopic("admin-rd", num_partitions=2, replication_factor=3)]))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-rd")
    configs = _done(admin.describe_configs([resource]))[resource]
    assert configs["retention.ms"].is_default and configs["cleanup.policy"].value == "delete"

    _done(admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "admin-rd", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])]))
    configs = _done(admin.describe_configs([resource]))[resource]
    assert configs["retention.ms"].value == "60000" and not configs["retention.ms"].is_default
    _done(admin.create_partitions([NewPartitions("admin-rd", 4)]))
    partitions, kraftlog_configs = _kraftlog_view(cluster, "admin-rd")
    assert partitions == 4 and kraftlog_configs["retention.ms"] == "60000"

    shrink = admin.create_partitions([NewPartitions("admin-rd", 1)])["admin-rd"]
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        shrink.result(TIMEOUT_S)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS, refused.value
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(confluent_kafka.KafkaException) as not_topic:
        _done(admin.describe_configs([broker]))
    assert "per topic only" in str(not_topic.value)

    assert "admin-rd" in admin.list_topics(timeout=TIMEOUT_S).topics  # a Metadata request for every topic
    cluster_view = admin.describe_cluster().result(TIMEOUT_S)
    assert sorted(node.id for node in cluster_view.nodes) == [1, 2, 3]
    _done(admin.delete_topics(["admin-rd"]))
    with cluster.controller_client() as client:
        assert "admin-rd" not in {t.name for t in client.describe_cluster().topics}


def test_kafka_python_admin_alters_configs_and_adds_partitions(cluster) -> None:
    cluster.create_topic("admin-kp", partitions=1, replication_factor=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        described = admin.describe_configs([KafkaPythonConfigResource(ConfigResourceType.TOPIC, "admin-kp")], config_filter="all")
        [topic_configs] = [configs for by_name in described.values() for name, configs in by_name.items() if name == "admin-kp"]
        assert "min.insync.replicas" in topic_configs, described
        admin.create_partitions({"admin-kp": KafkaPythonNewPartitions(total_count=3)})
        assert _kraftlog_view(cluster, "admin-kp")[0] == 3
    finally:
        admin.close()


def test_records_deleted_and_epochs_asked_through_the_door(cluster) -> None:
    cluster.create_topic("admin-records", partitions=1, replication_factor=3)
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(10):
            producer.send("admin-records", b"%d" % i, partition=0)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    [deleted] = admin.delete_records([confluent_kafka.TopicPartition("admin-records", 0, 4)]).values()
    assert deleted.result(TIMEOUT_S).low_watermark == 4
    with Admin(cluster.bootstrap) as kraftlog_admin:
        assert kraftlog_admin.list_offsets({("admin-records", 0): -2})[("admin-records", 0)].offset == 4

    leader = cluster.leader("admin-records", 0)
    address = dict(zip((b.node_id for b in cluster.brokers), cluster.kafka_bootstrap.split(",")))[leader]
    answer = kafka_call(address, OffsetForLeaderEpochRequest(topics=(OffsetForLeaderTopic(
        topic="admin-records", partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=0),)),)))
    [[end]] = [t.partitions for t in answer.topics]
    assert (end.error_code, end.end_offset) == (0, 10), end


def test_aiokafka_admin_creates_describes_alters_grows_lists_groups_and_deletes_a_topic(cluster) -> None:
    """aiokafka's AIOKafkaAdminClient, which alters configs with the legacy AlterConfigs (the
    keys given become the topic's whole set) and has no ACL calls."""
    pytest.importorskip("aiokafka", reason="aiokafka is in the test extra: pip install -e '.[test]'")
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions as AioNewPartitions, NewTopic as AioNewTopic
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource, ConfigResourceType as AioType
    topic, group = "admin-aio", "admin-aio-group"

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
        await admin.start()
        try:
            created = await admin.create_topics([AioNewTopic(topic, num_partitions=2, replication_factor=3)])
            assert [error for _, error, *_ in created.topic_errors] == [0], created
            [described] = await admin.describe_configs([AioConfigResource(AioType.TOPIC, topic)])
            [(error, _, _, _, entries)] = [r[:5] for r in described.resources]
            defaults = {e[0]: e[1] for e in entries}
            assert error == 0 and defaults["cleanup.policy"] == "delete", described

            async def alter(configs: dict[str, str]) -> dict[str, str]:
                [altered] = await admin.alter_configs([AioConfigResource(AioType.TOPIC, topic, configs=configs)])
                assert [r[0] for r in altered.resources] == [0], altered
                return _kraftlog_view(cluster, topic)[1]
            assert (await alter({"retention.ms": "60000", "segment.ms": "3600000"}))["retention.ms"] == "60000"
            after = await alter({"segment.ms": "7200000"})  # the whole set: retention.ms back to its default
            assert (after["segment.ms"], after["retention.ms"]) == ("7200000", defaults["retention.ms"])

            await admin.create_partitions({topic: AioNewPartitions(total_count=4)})
            assert _kraftlog_view(cluster, topic)[0] == 4

            member = AIOKafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap, group_id=group)
            await member.start()
            try:
                deadline = time.monotonic() + TIMEOUT_S
                while not member.assignment() and time.monotonic() < deadline:
                    await member.getmany(timeout_ms=200)
                assert member.assignment()
                assert (group, "consumer") in await admin.list_consumer_groups()
                [answer] = await admin.describe_consumer_groups([group])
                [(error, group_id, state, protocol_type, _, members, *_)] = answer.groups
                assert (error, group_id, state, protocol_type, len(members)) == (0, group, "Stable", "consumer", 1), answer
            finally:
                await member.stop()

            deleted = await admin.delete_topics([topic])
            assert [error for _, error, *_ in deleted.topic_error_codes] == [0], deleted
        finally:
            await admin.close()
    asyncio.run(run())
    with cluster.controller_client() as client:
        assert topic not in {t.name for t in client.describe_cluster().topics}
