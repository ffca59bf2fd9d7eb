"""The Kafka door's answers, with a stand-in replica manager. It refuses what the gRPC door
refuses: a partition of a topic its principal may not WRITE (READ) is answered
TOPIC_AUTHORIZATION_FAILED and never reaches the replica manager, while the allowed ones in
the same request are served; CreateTopics is checked for the Kafka client's principal before
anything goes on to the controller. And its answers are shaped as Kafka's clients read them."""

from __future__ import annotations

import asyncio
import datetime

from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.static.primitive import Records
from kafka.record.default_records import DefaultRecordBatchBuilder

from data_plane.requests import FetchResult, ProduceResult
from data_plane.kafka.admin_apis import AdminApis
from data_plane.kafka.apis import KafkaApis
from data_plane.kafka.batches import to_kafka
from kraftlog_proto import controller_pb2
from server_common.authorization import AccessControl
from server_common.authorizer import AclBinding
from tests.unit.kafka.test_batches import successive

ALLOWED, REFUSED = "allowed", "refused"


class FakeReplicas:
    """What the door asks of the ReplicaManager, recording which partitions reached it."""

    def __init__(self, stored: bytes = b"") -> None:
        self.produced: list[tuple[str, int]] = []
        self.fetched: list[tuple[str, int]] = []
        self.stored = stored  # what every fetch reads
        self.reads = self

    def clock_ms(self) -> int:
        return 0

    async def produce(self, acks, timeout_ms, items, transactional_id=""):
        self.produced += [(i.topic, i.partition) for i in items]
        return [ProduceResult(i.topic, i.partition, base_offset=0) for i in items]

    async def fetch(self, max_wait_ms, min_bytes, max_bytes, items, read_committed=False):
        self.fetched += [(i.topic, i.partition) for i in items]
        return [FetchResult(i.topic, i.partition, high_watermark=0, data=self.stored) for i in items]


def access(*operations: str) -> AccessControl:
    acls = {AclBinding("User:ANONYMOUS", "*", "topic", ALLOWED, "literal", op, "allow"): True for op in operations}
    return AccessControl(lambda: acls, (), enabled=True)


def apis(replicas: FakeReplicas, control: AccessControl) -> KafkaApis:
    return KafkaApis(1, replicas, control, None, None, lambda broker_id: None, None, None, None, None, None)


def one_batch() -> Records:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1, b"k", b"v", [])
    return Records(bytes(builder.build()))


def test_produce_serves_the_allowed_topic_and_refuses_the_other():
    replicas = FakeReplicas()
    request = produce_v9.ProduceRequest(acks=-1, timeout=datetime.timedelta(seconds=1), topic_data=tuple(
        produce_v9.TopicProduceData(name=name, partition_data=(produce_v9.PartitionProduceData(index=0, records=one_batch()),))
        for name in (ALLOWED, REFUSED)))
    response = asyncio.run(apis(replicas, access("write")).produce(request))
    codes = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert codes == {ALLOWED: KafkaError.none, REFUSED: KafkaError.topic_authorization_failed}
    assert replicas.produced == [(ALLOWED, 0)]
    refused = next(t for t in response.responses if t.name == REFUSED).partition_responses[0]
    assert "kraftlog acls create" in refused.error_message  # what to do next, as over gRPC


def fetch_request(*names: str) -> fetch_v12.FetchRequest:
    return fetch_v12.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=(), rack_id="", topics=tuple(
            fetch_v12.FetchTopic(topic=name, partitions=(fetch_v12.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20),)) for name in names))


def test_fetch_serves_the_readable_topic_and_refuses_the_other():
    replicas = FakeReplicas()
    response = asyncio.run(apis(replicas, access("read")).fetch(fetch_request(ALLOWED, REFUSED)))
    codes = {t.topic: t.partitions[0].error_code for t in response.responses}
    assert codes == {ALLOWED: KafkaError.none, REFUSED: KafkaError.topic_authorization_failed}
    assert replicas.fetched == [(ALLOWED, 0)]


def test_an_empty_fetch_answer_carries_empty_records_never_null():
    """librdkafka reads null records in Fetch v12 as a malformed answer and starts the
    partition over from its reset offset: an answer with nothing new carries zero bytes."""
    response = asyncio.run(apis(FakeReplicas(), access("read")).fetch(fetch_request(ALLOWED)))
    assert response.responses[0].partitions[0].records == b""


def test_a_cold_fetch_answers_a_slice_and_converts_the_next_in_the_background(monkeypatch):
    """An answer holds CONVERTED_PER_ANSWER records of batches it had to convert; the next as
    many are converted once it is sent, so the consumer's next fetch finds them converted."""
    monkeypatch.setattr("data_plane.kafka.apis.CONVERTED_PER_ANSWER", 3)
    batches = successive(4)
    door = apis(FakeReplicas(b"".join(batches)), access("read"))

    async def fetch_and_wait() -> tuple[bytes, int]:
        response = await door.fetch(fetch_request(ALLOWED))
        await asyncio.gather(*door.converting_ahead)
        return bytes(response.responses[0].partitions[0].records), len(door.converted._kafka)

    assert asyncio.run(fetch_and_wait()) == (to_kafka(batches[0]), 2)  # one batch answered, the next converted
    assert asyncio.run(fetch_and_wait()) == (to_kafka(b"".join(batches[:2])), 3)  # that one answered unconverted
    assert asyncio.run(fetch_and_wait())[1] == 4


def test_create_topics_refuses_at_the_broker_and_forwards_only_the_allowed():
    forwarded: list[list[str]] = []

    async def create_topics(request, deadline_s):
        forwarded.append([t.name for t in request.topics])
        return controller_pb2.CreateTopicsResponse(topics=[controller_pb2.TopicResult(name=t.name) for t in request.topics])

    admin = AdminApis(access("create"), create_topics, None)
    request = create_v7.CreateTopicsRequest(timeout=datetime.timedelta(seconds=5), validate_only=False, topics=tuple(
        create_v7.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(), configs=())
        for name in (ALLOWED, REFUSED)))
    response = asyncio.run(admin.create(request))
    assert {t.name: t.error_code for t in response.topics} == {ALLOWED: KafkaError.none,
                                                              REFUSED: KafkaError.topic_authorization_failed}
    assert forwarded == [[ALLOWED]]


def test_fetch_answers_every_version_it_advertises():
    """kcat asks Fetch v11, whose answer has no current leader (v12 added it): every served
    version's answer is built, each with the fields that version has."""
    import importlib

    from data_plane.kafka.apis import FETCH, SERVED
    from data_plane.kafka.entities import build

    low, high = SERVED[FETCH]
    for v in range(low, high + 1):
        schema = importlib.import_module(f"kio.schema.fetch.v{v}.request")
        partition = build(schema.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                          log_start_offset=-1, partition_max_bytes=1 << 20)
        request = build(schema.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                        topics=(build(schema.FetchTopic, topic=ALLOWED, partitions=(partition,)),))
        response = asyncio.run(apis(FakeReplicas(), access("read")).fetch(request))
        assert response.responses[0].partitions[0].error_code == KafkaError.none, v
