"""Streaming consume (``Broker.Consume``) on real processes: one controller and three brokers.

Checks: records arrive in order with no gaps while they are produced, in both formats; a
stalled client receives exactly its window of messages and no more however much is
committed behind it, then resumes where it left off; a leader change ends the stream's
partition with NOT_LEADER_OR_FOLLOWER and the new leader's hint and endpoint, and the
Python consumer in stream mode carries on at the new leader with nothing lost or doubled;
a broker shutting down ends its streams cleanly (status OK, a final entry per partition);
a credit beyond the window is refused with INVALID_ARGUMENT (the other malformed opens:
tests/unit/broker/test_consume_stream.py).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Iterator

import grpc
import pytest

from data_plane.client import Consumer, Producer
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.stub_client import credit_owed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("consume-stream"), controllers=1, brokers=3,
                       controller_args=["--auto-leader-rebalance-enable", "false"]) as c:
        yield c


class RawStream:
    """A Consume stream driven from generated stubs only: what a client in any language does."""

    def __init__(self, address: str, open_: broker_pb2.ConsumeOpen) -> None:
        self._requests: queue.Queue = queue.Queue()
        self._requests.put(broker_pb2.ConsumeRequest(open=open_))
        self.channel = grpc.insecure_channel(address)
        self.call = broker_pb2_grpc.BrokerStub(self.channel).Consume(iter(self._requests.get, None), timeout=120)
        self.received: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for message in self.call:
                self.received.put(message)
            self.received.put(("end", self.call.code()))
        except grpc.RpcError as err:
            self.received.put(("end", err.code()))

    def grant(self, messages: int) -> None:
        self._requests.put(broker_pb2.ConsumeRequest(credit=broker_pb2.ConsumeCredit(messages=messages)))

    def half_close(self) -> None:
        self._requests.put(None)

    def next(self, timeout_s: float = 30):
        return self.received.get(timeout=timeout_s)

    def close(self) -> None:
        self.call.cancel()
        self.half_close()
        self.channel.close()


def open_msg(topic: str, offsets: dict[int, int], **kwargs) -> broker_pb2.ConsumeOpen:
    parts = [broker_pb2.ConsumePartition(partition=p, offset=o) for p, o in offsets.items()]
    return broker_pb2.ConsumeOpen(topics=[broker_pb2.ConsumeTopic(topic=topic, partitions=parts)], **kwargs)


def leader_address(cluster: TestCluster, topic: str, partition: int = 0) -> str:
    return cluster.broker(cluster.leader(topic, partition)).address


def produce(cluster: TestCluster, topic: str, values: list[bytes], partition: int = 0) -> None:
    with Producer(cluster.bootstrap, acks="all", batch_size=16 << 10) as producer:
        for future in [producer.send(topic, value=v, partition=partition) for v in values]:
            future.result(timeout=30)


def record_offsets(entry: broker_pb2.ConsumePartitionData) -> list[tuple[int, bytes]]:
    """(offset, value) of an entry's records from fetch_offset on, in either format."""
    from data_plane import record_batch

    if entry.records:
        return [(r.offset, r.value) for r in entry.records]
    out = []
    for batch in record_batch.decode_batches(entry.batches):
        out.extend((o, v) for o, v in zip(batch.offsets, batch.values) if o >= entry.fetch_offset)
    return out


@pytest.mark.parametrize("fmt", [broker_pb2.BATCHES, broker_pb2.RECORDS])
def test_records_arrive_in_order_with_no_gaps_as_they_are_produced(cluster: TestCluster, fmt: int) -> None:
    topic = f"order-{fmt}"
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 0}, format=fmt, window_messages=4))
    try:
        expected = [f"v{i}".encode() for i in range(600)]
        seen: list[tuple[int, bytes]] = []
        for start in range(0, len(expected), 200):  # produced while the stream is open, in three rounds
            produce(cluster, topic, expected[start:start + 200])
            while len(seen) < start + 200:
                message = stream.next()
                assert not isinstance(message, tuple), f"stream ended early: {message}"
                for entry in message.partitions:
                    assert entry.error_code == common_pb2.NONE, entry.error_message
                    assert entry.fetch_offset == len(seen), "an entry must continue where the last one ended"
                    seen.extend(record_offsets(entry))
                    assert entry.next_offset == len(seen) and entry.high_watermark >= len(seen)
                stream.grant(1)
        assert seen == list(enumerate(expected))
    finally:
        stream.close()


@contextlib.contextmanager
def after_a_committed_transaction(cluster: TestCluster, topic: str) -> Iterator[Producer]:
    """A new one-partition ``topic`` holding a committed transaction: offset 0 its record
    (b"first"), 1 its commit marker; yields the transactional producer, ready for another."""
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    with Producer(cluster.bootstrap, transactional_id=topic, linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"first", partition=0)
        producer.commit_transaction()
        yield producer


def test_a_read_committed_stream_past_a_marker_reaches_the_next_record_with_a_window_of_one(cluster: TestCluster) -> None:
    """docs/protocol.md: a credit is owed for a message that carried data. A READ_COMMITTED
    RECORDS stream opened at a transaction marker first sends a message with no records that
    only moves next_offset; the broker charged a credit for it, so with window_messages=1 a
    client following the doc granted none and never received the next record."""
    topic = "txn-credit"
    with after_a_committed_transaction(cluster, topic) as producer:
        producer.begin_transaction()
        producer.send(topic, b"second", partition=0).result(timeout=30)  # offset 2, open: the LSO stays at 2
        stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 1}, format=broker_pb2.RECORDS, window_messages=1,
                                                                     isolation_level=broker_pb2.READ_COMMITTED))
        try:
            markers_only = stream.next()
            entry = markers_only.partitions[0]
            assert (entry.error_code, list(entry.records), entry.next_offset) == (common_pb2.NONE, [], 2)
            assert not credit_owed(markers_only)  # so the client grants nothing for it
            producer.commit_transaction()
            data = stream.next(timeout_s=15)
            assert [(r.offset, r.value) for r in data.partitions[0].records] == [(2, b"second")]
        finally:
            stream.close()


def test_a_records_path_fetch_at_a_marker_says_where_to_continue(cluster: TestCluster) -> None:
    """A Fetch at a transaction marker answered no records and nothing to say where the next
    record is: a client fetching from the last record's offset + 1 asked for the marker again."""
    topic = "txn-fetch"
    with after_a_committed_transaction(cluster, topic):
        pass
    produce(cluster, topic, [b"second"])  # offset 2
    with grpc.insecure_channel(leader_address(cluster, topic)) as channel:
        fetched = broker_pb2_grpc.BrokerStub(channel).Fetch(broker_pb2.FetchRequest(
            max_wait_ms=0, min_bytes=1, format=broker_pb2.RECORDS, isolation_level=broker_pb2.READ_COMMITTED,
            topics=[broker_pb2.FetchTopic(topic=topic, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=1)])]), timeout=30)
    answer = fetched.topics[0].partitions[0]
    assert answer.error_code == common_pb2.NONE, answer.error_message
    assert ([(r.offset, r.value) for r in answer.records], answer.next_offset) == ([(2, b"second")], 3)
    with grpc.insecure_channel(leader_address(cluster, topic)) as channel:
        marker_only = broker_pb2_grpc.BrokerStub(channel).Fetch(broker_pb2.FetchRequest(
            max_wait_ms=0, min_bytes=1, format=broker_pb2.RECORDS, max_bytes=1,
            topics=[broker_pb2.FetchTopic(topic=topic, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=1)])]), timeout=30)
    answer = marker_only.topics[0].partitions[0]
    assert (list(answer.records), answer.next_offset) == ([], 2)  # max_bytes 1: only the marker's batch comes, and past it


def test_a_stalled_client_gets_its_window_and_no_more(cluster: TestCluster) -> None:
    """What the broker holds for a stream is bounded by the client's window: a client that
    stops granting credits receives exactly `window` messages however much is committed."""
    topic = "stalled"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    produce(cluster, topic, [bytes(1000)] * 4000)  # ~4 MB committed: far more than 2 messages of 64 KiB
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 0}, window_messages=2, max_bytes_per_message=64 << 10))
    try:
        first = [stream.next(), stream.next()]
        produce(cluster, topic, [bytes(1000)] * 1000)  # more behind it, and HW wakeups that must not send
        with pytest.raises(queue.Empty):
            stream.next(timeout_s=1.5)  # bounded check that nothing beyond the window arrives
        assert all(len(m.partitions[0].batches) <= 64 << 10 for m in first)
        stream.grant(1)
        third = stream.next()
        assert third.partitions[0].fetch_offset == first[1].partitions[0].next_offset
        with pytest.raises(queue.Empty):
            stream.next(timeout_s=0.5)
    finally:
        stream.close()


def test_granting_more_than_the_window_is_refused(cluster: TestCluster) -> None:
    topic = "overgrant"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 0}, window_messages=2))
    try:
        stream.grant(1)  # nothing received yet: the client already holds its whole window
        end = stream.next()
        assert end == ("end", grpc.StatusCode.INVALID_ARGUMENT)
        assert "window of 2" in stream.call.details()
    finally:
        stream.close()


def test_a_half_closed_stream_ends_when_its_credits_run_out(cluster: TestCluster) -> None:
    """What grpcurl does with one request message: the window's worth, then status OK."""
    topic = "halfclosed"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    produce(cluster, topic, [bytes(1000)] * 300)
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 0}, window_messages=2, max_bytes_per_message=50_000))
    stream.half_close()
    try:
        assert [type(stream.next()) for _ in range(2)] == [broker_pb2.ConsumeResponse] * 2
        assert stream.next() == ("end", grpc.StatusCode.OK)
    finally:
        stream.close()


def move_leader(cluster: TestCluster, topic: str, partition: int = 0) -> int:
    """Make another in-sync replica the leader (reassign to put it first, elect the preferred)."""
    old = cluster.leader(topic, partition)
    with cluster.controller_client() as client:
        state = next(p for t in client.describe_cluster().topics if t.name == topic for p in t.partitions if p.partition == partition)
        new = next(r for r in state.isr if r != old)
        client.alter_partition_reassignments({(topic, partition): [new, *[r for r in state.replicas if r != new]]})
        wait_for(lambda: client.elect_leaders({topic: [partition]}) is not None and cluster.leader(topic, partition) == new,
                 30, f"broker {new} to lead {topic}-{partition}")
    return new


def test_a_leader_change_ends_the_partition_with_the_new_leaders_hint(cluster: TestCluster) -> None:
    topic = "moving"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    produce(cluster, topic, [b"x"] * 10)
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {0: 0}))
    try:
        assert stream.next().partitions[0].next_offset == 10
        new = move_leader(cluster, topic)
        final = stream.next()
        entry = final.partitions[0]
        assert entry.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER and entry.next_offset == 10
        assert entry.current_leader.leader_id == new
        assert [(e.broker_id, f"{e.host}:{e.port}") for e in final.node_endpoints] == [(new, cluster.broker(new).address)]
        assert stream.next() == ("end", grpc.StatusCode.OK)  # no partition left: the stream ends cleanly
    finally:
        stream.close()


def test_the_stream_consumer_carries_on_at_the_new_leader(cluster: TestCluster) -> None:
    topic = "follow"
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    values = {p: [f"{p}-{i}".encode() for i in range(3000)] for p in (0, 1)}
    seen: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    with Consumer(cluster.bootstrap, fetch_mode="stream", auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0), (topic, 1)])

        def drain(upto: int) -> None:
            def done() -> bool:
                for r in consumer.poll(200):
                    seen[r.partition].append((r.offset, r.value))
                return all(len(s) >= upto for s in seen.values())
            wait_for(done, 60, f"{upto} records per partition", interval_s=0)

        for p in (0, 1):
            produce(cluster, topic, values[p][:1000], partition=p)
        drain(1000)
        move_leader(cluster, topic, 0)
        for p in (0, 1):
            produce(cluster, topic, values[p][1000:2000], partition=p)
        drain(2000)
        leader = cluster.broker(cluster.leader(topic, 1))
        cluster.kill(leader)  # SIGKILL: the stream breaks without a final message
        try:
            for p in (0, 1):
                produce(cluster, topic, values[p][2000:], partition=p)
            drain(3000)
        finally:
            cluster.restart(leader)
            cluster.wait_ready()
    assert seen == {p: list(enumerate(values[p])) for p in (0, 1)}


def test_a_broker_shutting_down_ends_its_streams_cleanly(cluster: TestCluster) -> None:
    topic = "shutdown"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    node = cluster.broker(cluster.leader(topic, 0))
    stream = RawStream(node.address, open_msg(topic, {0: 0}))
    try:
        produce(cluster, topic, [b"x"] * 5)
        assert stream.next().partitions[0].next_offset == 5
        cluster.stop_node(node)
        final = stream.next()
        assert final.partitions[0].error_code in (common_pb2.BROKER_NOT_AVAILABLE, common_pb2.NOT_LEADER_OR_FOLLOWER)
        assert final.partitions[0].next_offset == 5
        assert stream.next() == ("end", grpc.StatusCode.OK)
    finally:
        stream.close()
        cluster.restart(node)
        cluster.wait_ready()


def test_records_path_answers_carry_the_leader_epochs_a_consumer_commits(cluster: TestCluster) -> None:
    """docs/protocol.md tells a consumer to remember the leader epoch of the last record read
    (KIP-320), but records-path answers carried none: a records-path client could not detect
    truncation. Each Record carries its batch's epoch, and each answer the epoch of the last
    batch before next_offset."""
    topic = "epochs"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    produce(cluster, topic, [b"before"])
    move_leader(cluster, topic)
    produce(cluster, topic, [b"after"])
    address = leader_address(cluster, topic)
    with grpc.insecure_channel(address) as channel:
        fetched = broker_pb2_grpc.BrokerStub(channel).Fetch(broker_pb2.FetchRequest(
            max_wait_ms=0, format=broker_pb2.RECORDS,
            topics=[broker_pb2.FetchTopic(topic=topic, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=0)])]), timeout=30)
    answer = fetched.topics[0].partitions[0]
    first, second = [r.leader_epoch for r in answer.records]
    assert first < second and (answer.next_offset, answer.last_leader_epoch) == (2, second)
    stream = RawStream(address, open_msg(topic, {0: 0}, format=broker_pb2.RECORDS))
    try:
        entry = stream.next().partitions[0]
        assert [r.leader_epoch for r in entry.records] == [first, second] and entry.last_leader_epoch == second
    finally:
        stream.close()


def test_a_negative_partition_is_refused_as_invalid_everywhere_it_arrives(cluster: TestCluster) -> None:
    """Partition -1 was answered UNKNOWN_TOPIC_OR_PARTITION, which the retry rules mark
    retriable: a client following them asked again until its deadline. Now every call that
    takes a partition number refuses it as invalid (not retriable)."""
    from kraftlog_proto import transaction_pb2, transaction_pb2_grpc

    topic = "negative"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    produce(cluster, topic, [b"x"])
    with grpc.insecure_channel(leader_address(cluster, topic)) as channel:
        broker = broker_pb2_grpc.BrokerStub(channel)
        calls = {
            "Produce": lambda: broker.Produce(broker_pb2.ProduceRequest(acks=1, timeout_ms=1000, topics=[broker_pb2.TopicProduceData(
                topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=-1, records=[common_pb2.Record(value=b"v")])])]), timeout=30),
            "Fetch": lambda: broker.Fetch(broker_pb2.FetchRequest(topics=[broker_pb2.FetchTopic(
                topic=topic, partitions=[broker_pb2.FetchPartition(partition=-1)])]), timeout=30),
            "ListOffsets": lambda: broker.ListOffsets(broker_pb2.ListOffsetsRequest(topics=[broker_pb2.ListOffsetsTopic(
                topic=topic, partitions=[broker_pb2.ListOffsetsPartition(partition=-1, timestamp=-1)])]), timeout=30),
            "DeleteRecords": lambda: broker.DeleteRecords(broker_pb2.DeleteRecordsRequest(topics=[broker_pb2.DeleteRecordsTopic(
                topic=topic, partitions=[broker_pb2.DeleteRecordsPartition(partition=-1, offset=0)])]), timeout=30),
        }
        for name, call in calls.items():
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "partition numbers are >= 0" in refused.value.details(), name
        txn = transaction_pb2_grpc.TransactionCoordinatorStub(channel).AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id="negative", topics=[transaction_pb2.TxnTopicPartitions(topic=topic, partitions=[-1])]), timeout=30)
        assert txn.error_code == common_pb2.INVALID_REQUEST
    stream = RawStream(leader_address(cluster, topic), open_msg(topic, {-1: 0}))
    try:
        assert stream.next() == ("end", grpc.StatusCode.INVALID_ARGUMENT)
    finally:
        stream.close()
