"""A client built from the generated stubs alone (grpc and ``kraftlog_proto``, no kraftlog
library): what a developer in another language writes from ``proto/*.proto`` and
``docs/protocol.md``. It uses the plain-records path only (no batch codec), so the
benchmarks can compare it with the Python client's batch path."""

from __future__ import annotations

import collections
import queue

import grpc

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2

OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


def leader_address(bootstrap: str, topic: str, partition: int) -> str:
    """Ask any broker's Metadata for the partition's leader endpoint."""
    with grpc.insecure_channel(bootstrap.split(",")[0], options=OPTIONS) as channel:
        answer = broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=10)
    leader = next(p.leader_id for t in answer.topics for p in t.partitions if p.partition == partition)
    broker = next(b for b in answer.brokers if b.broker_id == leader)
    return f"{broker.host}:{broker.port}"


def produce(address: str, topic: str, partition: int, values: list[bytes], per_request: int, in_flight: int = 4) -> None:
    """Records-path Produce, acks=1, ``per_request`` records per call, ``in_flight`` calls at once."""
    with grpc.insecure_channel(address, options=OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        pending: collections.deque = collections.deque()
        for start in range(0, len(values), per_request):
            records = [common_pb2.Record(value=v) for v in values[start:start + per_request]]
            request = broker_pb2.ProduceRequest(acks=1, timeout_ms=30_000, topics=[broker_pb2.TopicProduceData(
                topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=partition, records=records)])])
            pending.append(stub.Produce.future(request, timeout=60))
            if len(pending) >= in_flight:
                _check_produced(pending.popleft().result())
        while pending:
            _check_produced(pending.popleft().result())


def _check_produced(response: broker_pb2.ProduceResponse) -> None:
    for t in response.topics:
        for p in t.partitions:
            assert p.error_code == common_pb2.NONE, p.error_message


def fetch(address: str, topic: str, partition: int, start: int, end: int, max_bytes: int = 4 << 20) -> int:
    """Records-path Fetch polls from ``start`` until ``end``; returns the records' value bytes."""
    total = 0
    offset = start
    with grpc.insecure_channel(address, options=OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        while offset < end:
            request = broker_pb2.FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, format=broker_pb2.RECORDS,
                                              topics=[broker_pb2.FetchTopic(topic=topic, partitions=[
                                                  broker_pb2.FetchPartition(partition=partition, fetch_offset=offset)])])
            answer = stub.Fetch(request, timeout=30).topics[0].partitions[0]
            assert answer.error_code == common_pb2.NONE, answer.error_message
            for record in answer.records:
                total += len(record.value)
            offset = answer.next_offset  # past markers too, which carry no records
    return total


def credit_owed(message: broker_pb2.ConsumeResponse) -> bool:
    """docs/protocol.md's rule: a Consume message is owed a credit when an entry carries data
    (``records`` or ``batches``); one that only ends partitions or moves ``next_offset`` is not."""
    return any(entry.records or entry.batches for entry in message.partitions)


def consume(address: str, topic: str, partition: int, start: int, end: int, fmt: int = broker_pb2.RECORDS,
            message_bytes: int = 1 << 20, window: int = 8, isolation_level: int = broker_pb2.READ_UNCOMMITTED,
            timeout_s: float = 120) -> int:
    """A records-path (or batches, undecoded) Consume stream from ``start`` until ``end``,
    granting a credit per message with data as docs/protocol.md says (an entry with ``records``
    or ``batches``); returns the value bytes (RECORDS) or batch bytes."""
    requests: queue.SimpleQueue = queue.SimpleQueue()
    requests.put(broker_pb2.ConsumeRequest(open=broker_pb2.ConsumeOpen(
        format=fmt, max_bytes_per_message=message_bytes, window_messages=window, isolation_level=isolation_level,
        topics=[broker_pb2.ConsumeTopic(topic=topic, partitions=[broker_pb2.ConsumePartition(partition=partition, offset=start)])],
    )))
    credit = broker_pb2.ConsumeRequest(credit=broker_pb2.ConsumeCredit(messages=1))
    total = 0
    with grpc.insecure_channel(address, options=OPTIONS) as channel:
        call = broker_pb2_grpc.BrokerStub(channel).Consume(iter(requests.get, None), timeout=timeout_s)
        for message in call:
            entry = message.partitions[0]
            assert entry.error_code == common_pb2.NONE, entry.error_message
            if fmt == broker_pb2.RECORDS:
                for record in entry.records:
                    total += len(record.value)
            else:
                total += len(entry.batches)
            if credit_owed(message):
                requests.put(credit)
            if entry.next_offset >= end:
                break
        call.cancel()
        requests.put(None)
    return total
