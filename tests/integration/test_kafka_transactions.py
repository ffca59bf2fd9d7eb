"""Transactions through the Kafka door with librdkafka (confluent-kafka), docs/kafka.md: a
transactional producer commits, aborts and commits again under one producer epoch (Kafka's
transaction version 1, which EndTxn v0-4 clients expect); read_committed sees exactly the
committed records, through the door and through kraftlog's own client; a consume-transform-
produce loop commits its group's offsets inside the transaction."""

from __future__ import annotations

import datetime
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")

from kio.schema.add_partitions_to_txn.v5.request import (AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,  # noqa: E402
                                                         AddPartitionsToTxnTransaction)
from kio.schema.end_txn.v4.request import EndTxnRequest as EndTxnRequestV4  # noqa: E402
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnRequestV5  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest  # noqa: E402
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest  # noqa: E402
from kio.schema.types import ProducerId  # noqa: E402
from kio.static.primitive import i8, i16, i32  # noqa: E402

from data_plane.client import Consumer as KraftlogConsumer  # noqa: E402
from server_common.waiting import wait_for  # noqa: E402
from tests.cluster import TestCluster  # noqa: E402
from tests.integration.kafka_transactional import transactional_cluster  # noqa: E402
from tests.integration.kafka_wire import kafka_call  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with transactional_cluster(tmp_path_factory.mktemp("kafka-txn"), ("txn", "source", "sink")) as running:
        yield running


def _read(bootstrap: str, topic: str, isolation: str, count: int, idle_s: float = 3.0) -> list[bytes]:
    """Values of ``topic`` from the start, until ``count`` are read and nothing more came for ``idle_s``."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "enable.auto.commit": False,
                                         "isolation.level": isolation})
    values: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline, last = time.monotonic() + 60, time.monotonic()
        while time.monotonic() < deadline and (len(values) < count or time.monotonic() - last < idle_s):
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                values.append(message.value())
                last = time.monotonic()
    finally:
        consumer.close()
    return values


def test_commit_abort_and_commit_again_under_one_epoch_and_read_committed_sees_only_the_committed(cluster: TestCluster) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "door-txn"})
    producer.init_transactions(30)
    for name, commit in (("first", True), ("second", False), ("third", True)):
        producer.begin_transaction()
        for i in range(50):
            producer.produce("txn", value=b"%s-%d" % (name.encode(), i))
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # written, then aborted (an abort drops what is still queued)
            producer.abort_transaction(30)
    expected = [b"first-%d" % i for i in range(50)] + [b"third-%d" % i for i in range(50)]
    assert _read(cluster.kafka_bootstrap, "txn", "read_committed", 100) == expected
    assert len(_read(cluster.kafka_bootstrap, "txn", "read_uncommitted", 150)) == 150
    with KraftlogConsumer(cluster.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as own:
        own.assign([("txn", 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 100 and time.monotonic() < deadline:
            values.extend(r.value for r in own.poll(500))
    assert values == expected


def test_consume_transform_produce_commits_the_groups_offsets_in_the_transaction(cluster: TestCluster) -> None:
    source = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap})
    for i in range(100):
        source.produce("source", value=b"%d" % i)
    assert source.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": "transformers",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "transformer-1"})
    producer.init_transactions(30)
    consumer.subscribe(["source"])
    done, deadline = 0, time.monotonic() + 60
    try:
        while done < 100 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(20, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce("sink", value=b"x" + message.value())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(batch)
        assert done == 100
        committed = consumer.committed([confluent_kafka.TopicPartition("source", 0)], 30)
        assert committed[0].offset == 100
    finally:
        consumer.close()
    assert _read(cluster.kafka_bootstrap, "sink", "read_committed", 100) == [b"x%d" % i for i in range(100)]


def _txn_call(address: str, request, field: str = "error_code"):
    """A call retried while the coordinator is busy (the id's topic being created, markers
    being written): the answer once it is something else."""
    busy = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions}

    def answered():
        answer = kafka_call(address, request)
        return answer if _code(answer, field) not in busy else None
    return wait_for(answered, 30, f"{type(request).__name__} answered past the coordinator's busy codes")


def _code(answer, field: str):
    for step in field.split("."):
        answer = answer[0] if isinstance(answer, tuple) else answer
        answer = getattr(answer, step)
    return answer


def test_end_txn_v5_bumps_the_epoch_at_every_end_and_batched_adds_verify(cluster: TestCluster) -> None:
    """KIP-890 part 2 on the wire (no client in the matrix sends these versions): EndTxn v5
    answers the bumped epoch, a retry of it the same, the old epoch is fenced; EndTxn v4 keeps
    the epoch; AddPartitionsToTxn v5, a broker's batched call, verifies and adds."""
    tid = "door-v5"
    any_broker = cluster.kafka_bootstrap.split(",")[0]
    [found] = _txn_call(any_broker, FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(tid,)), "coordinators.error_code").coordinators
    coordinator = f"{found.host}:{found.port}"
    init = _txn_call(coordinator, InitProducerIdRequest(transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                                                        producer_id=ProducerId(-1), producer_epoch=i16(-1)))
    assert init.error_code == ErrorCode.none, init
    pid, epoch = init.producer_id, init.producer_epoch

    def batched(epoch: int, verify_only: bool) -> ErrorCode:
        answer = _txn_call(coordinator, AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch), verify_only=verify_only,
            topics=(AddPartitionsToTxnTopic(name="txn", partitions=(i32(0),)),)),)),
            "results_by_transaction.topic_results.results_by_partition.partition_error_code")
        assert answer.error_code == ErrorCode.none, answer
        [[[partition]]] = [[t.results_by_partition for t in r.topic_results] for r in answer.results_by_transaction]
        return partition.partition_error_code

    def end(version: type, epoch: int, committed: bool):
        return _txn_call(coordinator, version(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch), committed=committed))

    assert batched(epoch, verify_only=True) == ErrorCode.invalid_txn_state  # not in a transaction yet: verify changes nothing
    assert batched(epoch, verify_only=False) == ErrorCode.none
    assert batched(epoch, verify_only=True) == ErrorCode.none

    ended = end(EndTxnRequestV5, epoch, True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (ErrorCode.none, pid, epoch + 1), ended
    retried = end(EndTxnRequestV5, epoch, True)
    assert (retried.error_code, retried.producer_epoch) == (ErrorCode.none, epoch + 1), retried
    assert batched(epoch, verify_only=False) == ErrorCode.producer_fenced  # the ended transaction's epoch is fenced
    assert batched(epoch + 1, verify_only=False) == ErrorCode.none

    assert end(EndTxnRequestV4, epoch + 1, False).error_code == ErrorCode.none  # v4: the epoch stays
    assert batched(epoch + 1, verify_only=False) == ErrorCode.none
    assert end(EndTxnRequestV4, epoch + 1, False).error_code == ErrorCode.none
