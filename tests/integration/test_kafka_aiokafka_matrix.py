"""aiokafka on the Kafka door's secure and transactional paths (docs/kafka.md, per-client
table): SASL/SCRAM (SHA-256 and SHA-512) over TLS produces and reads back, a wrong password is
refused with aiokafka's bad-credentials error, a user without an ACL is refused the topic; a
transactional producer commits one transaction and aborts another and read_committed sees
exactly the committed records; an idempotent producer through a leader SIGKILL loses and
repeats nothing."""

from __future__ import annotations

import asyncio
import time

import pytest

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra: pip install -e '.[test]'")

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed, TopicAuthorizationFailedError  # noqa: E402
from aiokafka.helpers import create_ssl_context  # noqa: E402

from tests.cluster import TestCluster  # noqa: E402
from tests.integration import kafka_leader_kill as leader_kill  # noqa: E402
from tests.integration.kafka_secure import PASSWORDS, TOPIC, ca_file, secure_cluster  # noqa: E402
from tests.integration.kafka_transactional import transactional_cluster  # noqa: E402

pytestmark = pytest.mark.integration


def _sasl(cluster: TestCluster, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"bootstrap_servers": cluster.kafka_bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password, "ssl_context": create_ssl_context(cafile=ca_file(cluster))}


async def _started_and_stopped(**config) -> None:
    producer = AIOKafkaProducer(**config)
    try:
        await producer.start()
    finally:
        await producer.stop()


def _users_known(cluster: TestCluster) -> bool:
    try:
        asyncio.run(_started_and_stopped(**_sasl(cluster, "alice", PASSWORDS["alice"])))
        return True
    except Exception:  # noqa: BLE001 - the broker may not have the users yet: any refusal means "not yet"
        return False


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> TestCluster:
    with secure_cluster(tmp_path_factory.mktemp("aiokafka-sasl"), _users_known) as running:
        yield running


@pytest.fixture(scope="module")
def transactional(tmp_path_factory) -> TestCluster:
    with transactional_cluster(tmp_path_factory.mktemp("aiokafka-txn")) as running:
        yield running


async def _read(topic: str, count: int, idle_s: float = 0.0, **options) -> list[bytes]:
    """Values of ``topic``'s partition 0 from the start, until ``count`` are read and nothing more came for ``idle_s``."""
    consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, auto_offset_reset="earliest", **options)
    await consumer.start()
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline, last = time.monotonic() + 60, time.monotonic()
        while time.monotonic() < deadline and (len(values) < count or time.monotonic() - last < idle_s):
            for records in (await consumer.getmany(timeout_ms=200)).values():
                values.extend(r.value for r in records)
                last = time.monotonic()
    finally:
        await consumer.stop()
    return values


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_right_password_produces_and_reads_back(secure: TestCluster, mechanism: str) -> None:
    config = _sasl(secure, "alice", PASSWORDS["alice"], mechanism)
    mine = [b"aiokafka-%s-%d" % (mechanism.encode(), i) for i in range(50)]

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **config)
        await producer.start()
        try:
            for value in mine:
                await producer.send_and_wait(TOPIC, value, partition=0)
        finally:
            await producer.stop()
        return await _read(TOPIC, len(mine), **config)

    assert [v for v in asyncio.run(scenario()) if v.startswith(b"aiokafka-" + mechanism.encode())] == mine


def test_a_user_without_an_acl_is_refused_the_topic(secure: TestCluster) -> None:
    async def scenario() -> None:
        producer = AIOKafkaProducer(request_timeout_ms=10_000, **_sasl(secure, "bob", PASSWORDS["bob"]))
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, b"x")
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(scenario())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused_as_bad_credentials(secure: TestCluster, mechanism: str, caplog) -> None:
    """aiokafka's start() fails at once ("Unable to bootstrap") and logs the refusal as
    SaslAuthenticationFailed with the door's message. (Last of the secure tests: the failure
    throttle then holds back 127.0.0.1 for a while.)"""
    with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(_started_and_stopped(**_sasl(secure, "alice", "not-her-secret", mechanism)))
    refusals = [r.getMessage() for r in caplog.records if SaslAuthenticationFailed.__name__ in r.getMessage()]
    assert refusals and "unknown user or wrong password" in refusals[0] and mechanism in refusals[0], refusals


def test_read_committed_sees_the_committed_transaction_and_not_the_aborted_one(transactional: TestCluster) -> None:
    bootstrap = transactional.kafka_bootstrap

    async def scenario() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aiokafka-txn")
        await producer.start()
        try:
            for outcome in ("committed", "aborted", "committed-again"):
                await producer.begin_transaction()
                for i in range(5):
                    await producer.send_and_wait("txn", b"%s-%d" % (outcome.encode(), i), partition=0)
                if outcome.startswith("committed"):
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()
        return (await _read("txn", 10, idle_s=2.0, bootstrap_servers=bootstrap, isolation_level="read_committed"),
                await _read("txn", 15, bootstrap_servers=bootstrap))

    committed, everything = asyncio.run(scenario())
    assert committed == [b"committed-%d" % i for i in range(5)] + [b"committed-again-%d" % i for i in range(5)]
    assert len(everything) == 15  # the aborted transaction is in the log too


def test_an_idempotent_producer_through_a_leader_sigkill_loses_and_repeats_nothing(tmp_path) -> None:
    async def produce(cluster: TestCluster) -> list:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap, enable_idempotence=True, acks="all", linger_ms=2,
                                    request_timeout_ms=60_000)
        await producer.start()
        try:
            deliveries = []
            for i in range(leader_kill.RECORDS):
                deliveries.append(await producer.send(leader_kill.TOPIC, b"%d" % i, partition=0))
                if i == leader_kill.KILL_AT:
                    await asyncio.to_thread(leader_kill.kill_the_leader, cluster)
            return await asyncio.gather(*deliveries, return_exceptions=True)
        finally:
            await producer.stop()

    with leader_kill.cluster_for_a_kill(tmp_path) as cluster:
        outcomes = asyncio.run(produce(cluster))
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        values = leader_kill.read_back(cluster)
    assert values == list(range(leader_kill.RECORDS)), "duplicates, gaps or reordering after the leader's SIGKILL"
