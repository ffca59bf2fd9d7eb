"""kafka-python on the Kafka door's secure and transactional paths (docs/kafka.md, per-client
table): SASL/SCRAM (SHA-256 and SHA-512) over TLS produces and reads back, a wrong password is
refused with kafka-python's bad-credentials error, a user without an ACL is refused the topic;
a transactional producer commits one transaction and aborts another and read_committed sees
exactly the committed records; an idempotent producer through a leader SIGKILL loses and
repeats nothing."""

from __future__ import annotations

import time

import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra: pip install -e '.[test]'")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import KafkaTimeoutError, TopicAuthorizationFailedError  # noqa: E402

from tests.cluster import TestCluster  # noqa: E402
from tests.integration import kafka_leader_kill as leader_kill  # noqa: E402
from tests.integration.kafka_secure import PASSWORDS, TOPIC, ca_file, secure_cluster  # noqa: E402
from tests.integration.kafka_transactional import transactional_cluster  # noqa: E402

pytestmark = pytest.mark.integration


def _sasl(cluster: TestCluster, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"bootstrap_servers": cluster.kafka_bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password, "ssl_cafile": ca_file(cluster)}


def _users_known(cluster: TestCluster) -> bool:
    try:
        KafkaProducer(**_sasl(cluster, "alice", PASSWORDS["alice"])).close()
        return True
    except Exception:  # noqa: BLE001 - the broker may not have the users yet: any refusal means "not yet"
        return False


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> TestCluster:
    with secure_cluster(tmp_path_factory.mktemp("kafka-python-sasl"), _users_known) as running:
        yield running


@pytest.fixture(scope="module")
def transactional(tmp_path_factory) -> TestCluster:
    with transactional_cluster(tmp_path_factory.mktemp("kafka-python-txn")) as running:
        yield running


def _read(topic: str, count: int, idle_s: float = 0.0, **options) -> list[bytes]:
    """Values of ``topic``'s partition 0 from the start, until ``count`` are read and nothing more came for ``idle_s``."""
    consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, **options)
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        deadline, last = time.monotonic() + 60, time.monotonic()
        while time.monotonic() < deadline and (len(values) < count or time.monotonic() - last < idle_s):
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
                last = time.monotonic()
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_right_password_produces_and_reads_back(secure: TestCluster, mechanism: str) -> None:
    config = _sasl(secure, "alice", PASSWORDS["alice"], mechanism)
    producer = KafkaProducer(acks="all", **config)
    mine = [b"%s-%d" % (mechanism.encode(), i) for i in range(50)]
    for value in mine:
        producer.send(TOPIC, value, partition=0)
    producer.flush(30)
    producer.close()
    values = _read(TOPIC, len(mine), **config)
    assert [v for v in values if v.startswith(mechanism.encode())] == mine


def test_a_user_without_an_acl_is_refused_the_topic(secure: TestCluster) -> None:
    producer = KafkaProducer(max_block_ms=10_000, **_sasl(secure, "bob", PASSWORDS["bob"]))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(TOPIC, b"x").get(20)
    finally:
        producer.close()


def test_a_wrong_password_is_refused_as_bad_credentials(secure: TestCluster, caplog) -> None:
    """kafka-python retries its bootstrap until ``bootstrap_timeout_ms`` and reports each refusal
    as SaslAuthenticationFailedError in its log; the door's message says what to check. One
    mechanism only: the retries fill the failure throttle, which then refuses 127.0.0.1 for a
    while (so this is also the last of the secure tests)."""
    mechanism = "SCRAM-SHA-512"
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(bootstrap_timeout_ms=3_000, **_sasl(secure, "alice", "not-her-secret", mechanism))
    refusals = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
    assert refusals and "unknown user or wrong password" in refusals[0] and mechanism in refusals[0], refusals


def test_read_committed_sees_the_committed_transaction_and_not_the_aborted_one(transactional: TestCluster) -> None:
    producer = KafkaProducer(bootstrap_servers=transactional.kafka_bootstrap, transactional_id="kafka-python-txn")
    producer.init_transactions()
    for outcome in ("committed", "aborted", "committed-again"):
        producer.begin_transaction()
        for i in range(5):
            producer.send("txn", b"%s-%d" % (outcome.encode(), i), partition=0)
        if outcome.startswith("committed"):
            producer.commit_transaction()
        else:
            producer.flush()  # written, then aborted (an abort drops what is still queued)
            producer.abort_transaction()
    producer.close()
    committed = [b"committed-%d" % i for i in range(5)] + [b"committed-again-%d" % i for i in range(5)]
    assert _read("txn", len(committed), idle_s=2.0, bootstrap_servers=transactional.kafka_bootstrap,
                 isolation_level="read_committed") == committed
    assert len(_read("txn", 15, bootstrap_servers=transactional.kafka_bootstrap)) == 15  # all three are in the log


def test_an_idempotent_producer_through_a_leader_sigkill_loses_and_repeats_nothing(tmp_path) -> None:
    with leader_kill.cluster_for_a_kill(tmp_path) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap, enable_idempotence=True, acks="all", linger_ms=2,
                                 delivery_timeout_ms=60_000)
        futures = []
        for i in range(leader_kill.RECORDS):
            futures.append(producer.send(leader_kill.TOPIC, b"%d" % i, partition=0))
            if i == leader_kill.KILL_AT:
                leader_kill.kill_the_leader(cluster)
        producer.flush(90)
        failures = [f.exception for f in futures if f.failed()]
        producer.close()
        assert failures == [] and all(f.succeeded() for f in futures)
        values = leader_kill.read_back(cluster)
    assert values == list(range(leader_kill.RECORDS)), "duplicates, gaps or reordering after the leader's SIGKILL"
