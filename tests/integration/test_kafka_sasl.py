"""SASL/SCRAM over TLS on the Kafka door of a secure cluster (docs/kafka.md, Security), with
librdkafka (confluent-kafka) as the client: the right password produces and reads back, a
wrong one is refused with the error librdkafka reports for bad credentials, a user without
an ACL is refused as on the gRPC door, and a connection that skips SASL is closed. The ACL
APIs (CreateAcls, DescribeAcls, DeleteAcls) through librdkafka's AdminClient, checked with
kraftlog's own SecurityAdmin client."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from server_common.authorizer import AclBinding  # noqa: E402
from server_common.waiting import wait_for  # noqa: E402
from tests.cluster import TestCluster  # noqa: E402
from tests.integration.kafka_secure import GROUP, TOPIC, ca_file, secure_cluster  # noqa: E402
from tests.integration.kafka_secure import security as _security  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with secure_cluster(tmp_path_factory.mktemp("kafka-sasl"), _users_known) as running:
        yield running


def _users_known(cluster: TestCluster) -> bool:
    errors: list = []
    client = confluent_kafka.Producer(_config(cluster, "alice", "alice-secret", error_cb=errors.append))
    try:
        return client.list_topics(timeout=5) is not None and not errors
    except confluent_kafka.KafkaException:
        return False


def _config(cluster: TestCluster, user: str, password: str, mechanism: str = "SCRAM-SHA-256", **extra) -> dict:
    return {"bootstrap.servers": cluster.kafka_bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": ca_file(cluster), **extra}


def test_the_right_password_produces_and_reads_back(cluster: TestCluster) -> None:
    producer = confluent_kafka.Producer(_config(cluster, "alice", "alice-secret", acks="all", **{"enable.idempotence": True}))
    failures: list = []
    for i in range(100):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda e, m: e is not None and failures.append(e))
    assert producer.flush(30) == 0 and failures == []
    consumer = confluent_kafka.Consumer(_config(cluster, "alice", "alice-secret", **{"group.id": GROUP, "enable.auto.commit": False}))
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 100 and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    assert values[:100] == [b"v%d" % i for i in range(100)]


def test_scram_sha512_authenticates_and_a_wrong_password_is_refused(cluster: TestCluster) -> None:
    """The same users, by SCRAM-SHA-512: their records keep both mechanisms' keys."""
    producer = confluent_kafka.Producer(_config(cluster, "alice", "alice-secret", "SCRAM-SHA-512", acks="all"))
    failures: list = []
    producer.produce(TOPIC, value=b"by-sha512", on_delivery=lambda e, m: e is not None and failures.append(e))
    assert producer.flush(30) == 0 and failures == []
    errors: list = []
    refused = confluent_kafka.Producer(_config(cluster, "alice", "not-her-secret", "SCRAM-SHA-512", error_cb=errors.append))
    wait_for(lambda: refused.poll(0.2) is not None and any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors),
             30, "librdkafka's authentication error")
    assert "SCRAM-SHA-512" in next(e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION).str()


def test_a_wrong_password_is_reported_as_bad_credentials(cluster: TestCluster) -> None:
    errors: list = []
    producer = confluent_kafka.Producer(_config(cluster, "alice", "not-her-secret", error_cb=errors.append))
    wait_for(lambda: producer.poll(0.2) is not None and any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors),
             30, "librdkafka's authentication error")
    message = next(e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION).str()
    assert "unknown user or wrong password" in message, message


def test_a_user_without_an_acl_is_refused_the_topic(cluster: TestCluster) -> None:
    producer = confluent_kafka.Producer(_config(cluster, "bob", "bob-secret", **{"message.timeout.ms": 10_000}))
    outcome: list = []
    producer.produce(TOPIC, value=b"x", on_delivery=lambda e, m: outcome.append(e))
    producer.flush(20)
    assert outcome and outcome[0] is not None and outcome[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, outcome


def _frame(api_key: int, api_version: int, correlation_id: int, body: bytes = b"") -> bytes:
    client_id = b"raw"
    payload = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id + body
    return struct.pack(">i", len(payload)) + payload


def test_a_connection_that_skips_sasl_is_answered_api_versions_then_closed(cluster: TestCluster) -> None:
    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca_file(cluster))
    with socket.create_connection((host, int(port)), timeout=10) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
        tls.sendall(_frame(18, 0, 1))  # ApiVersions v0: allowed before authenticating
        (size,) = struct.unpack(">i", tls.recv(4))
        assert size > 0
        answered = b""
        while len(answered) < size:
            answered += tls.recv(size - len(answered))
        assert struct.unpack(">ih", answered[:6]) == (1, 0)
        tls.sendall(_frame(3, 1, 2, struct.pack(">i", -1)))  # Metadata v1, every topic: not before SASL
        assert tls.recv(4) == b""  # closed, nothing answered


def test_acls_are_created_described_and_deleted_through_the_kafka_admin_client(cluster: TestCluster) -> None:
    from confluent_kafka.admin import (AclBinding as KafkaAcl, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    root = AdminClient(_config(cluster, "root", "root-secret"))
    made = KafkaAcl(ResourceType.TOPIC, "acl-made", ResourcePatternType.PREFIXED, "User:carol", "*", AclOperation.READ,
                    AclPermissionType.ALLOW)
    root.create_acls([made])[made].result(20)
    with _security(cluster) as admin:
        assert AclBinding("User:carol", "*", "topic", "acl-made", "prefixed", "read", "allow") in admin.list_acls(principal="User:carol")
    carols = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol", None, AclOperation.ANY, AclPermissionType.ANY)
    wait_for(lambda: root.describe_acls(carols).result(20) == [made], 20, "the new ACL in the broker's metadata")
    applies_to_name = AclBindingFilter(ResourceType.TOPIC, "acl-made-orders", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                                       AclPermissionType.ANY)
    assert made in root.describe_acls(applies_to_name).result(20)  # Kafka's MATCH: a prefix that covers the name
    assert root.delete_acls([carols])[carols].result(20) == [made]
    with _security(cluster) as admin:
        assert admin.list_acls(principal="User:carol") == []

    bob = AdminClient(_config(cluster, "bob", "bob-secret"))
    refused = KafkaAcl(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        bob.create_acls([refused])[refused].result(20)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
