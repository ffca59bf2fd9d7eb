"""zstd batches through a real cluster (one controller, three brokers, replication factor 3):
the leader validates them, stores and serves them byte for byte, followers copy them, and the
Python producer, the records path, `kraftlog produce` and `kraftlog perf produce` all use zstd
when asked. A zstd batch whose frame is broken is refused with INVALID_RECORD, nothing written."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import zlib

import grpc
import pytest

from data_plane.record_batch import HEADER_SIZE, decode_batches, encode_batch
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

TOPIC = "zstd-rf3"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("zstd"), controllers=1, brokers=3) as running:
        running.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        yield running


def leader_stub(cluster: TestCluster, topic: str, channel_for) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(channel_for(cluster.broker(cluster.leader(topic, 0)).address))


@pytest.fixture
def channel_for():
    channels: list[grpc.Channel] = []

    def open_(address: str) -> grpc.Channel:
        channels.append(grpc.insecure_channel(address))
        return channels[-1]

    yield open_
    for channel in channels:
        channel.close()


def produce(stub: broker_pb2_grpc.BrokerStub, topic: str, **partition_fields) -> broker_pb2.PartitionProduceResponse:
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, topics=[
        broker_pb2.TopicProduceData(topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=0, **partition_fields)])
    ])
    return stub.Produce(request, timeout=20).topics[0].partitions[0]


def fetch(stub: broker_pb2_grpc.BrokerStub, topic: str, offset: int, fmt: int = broker_pb2.BATCHES) -> broker_pb2.FetchPartitionResponse:
    request = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=8 << 20, format=fmt, topics=[
        broker_pb2.FetchTopic(topic=topic, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=offset)])
    ])
    return stub.Fetch(request, timeout=20).topics[0].partitions[0]


def test_a_zstd_batch_is_stored_served_and_replicated_byte_for_byte(cluster, channel_for) -> None:
    values = [f"value {i} ".encode() * 20 for i in range(500)]
    keys = [None if i % 3 else f"k{i}".encode() for i in range(500)]
    sent = encode_batch(values, keys=keys, headers=[[("h", b"1")]] * 500, compression="zstd")
    answer = produce(leader_stub(cluster, TOPIC, channel_for), TOPIC, batches=sent)
    assert answer.error_code == common_pb2.NONE, answer.error_message
    end = answer.base_offset + 500
    for broker in (1, 2, 3):  # the leader and both followers serve the same bytes
        stub = broker_pb2_grpc.BrokerStub(channel_for(cluster.broker(broker).address))
        wait_for(lambda: _log_end(stub) >= end, timeout_s=30, what=f"broker {broker} to replicate the zstd batch")
        stored = fetch_from_replica(stub, answer.base_offset)
        assert stored[:8] == struct.pack("<q", answer.base_offset) and stored[16:] == sent[16:], f"broker {broker}"
    [batch] = decode_batches(stored)
    assert batch.header.compression == "zstd" and batch.values == values and batch.keys == keys
    records = fetch(leader_stub(cluster, TOPIC, channel_for), TOPIC, answer.base_offset, broker_pb2.RECORDS).records
    assert [r.value for r in records] == values  # the records path decodes zstd for clients without the codec


def fetch_from_replica(stub: broker_pb2_grpc.BrokerStub, offset: int) -> bytes:
    """The batch at ``offset`` as this replica stores it (repair_read: any replica answers from its own log)."""
    request = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=8 << 20, repair_read=True, topics=[
        broker_pb2.FetchTopic(topic=TOPIC, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=offset)])
    ])
    data = stub.Fetch(request, timeout=20).topics[0].partitions[0].batches
    length = struct.unpack_from("<i", data, 8)[0]
    return data[:length]


def _log_end(stub: broker_pb2_grpc.BrokerStub) -> int:
    logs = stub.DescribeLogs(broker_pb2.DescribeLogsRequest(), timeout=10)
    return max((p.log_end_offset for p in logs.partitions if p.topic == TOPIC), default=-1)


def test_a_zstd_batch_with_a_broken_frame_is_refused_and_nothing_is_written(cluster, channel_for) -> None:
    good = encode_batch([b"x" * 50] * 10, compression="zstd")
    broken = bytearray(good[:HEADER_SIZE]) + good[HEADER_SIZE:] + b"\x00"  # a stray byte after the frame
    struct.pack_into("<i", broken, 8, len(broken))
    struct.pack_into("<I", broken, 17, zlib.crc32(broken[21:]))
    stub = leader_stub(cluster, TOPIC, channel_for)
    before = fetch(stub, TOPIC, 0).high_watermark
    answer = produce(stub, TOPIC, batches=bytes(broken))
    assert answer.error_code == common_pb2.INVALID_RECORD and "zstd" in answer.error_message
    assert fetch(stub, TOPIC, 0).high_watermark == before
    assert produce(stub, TOPIC, batches=good).error_code == common_pb2.NONE  # the control: the same batch, whole


def test_the_python_producer_with_zstd_round_trips_through_the_consumer(cluster) -> None:
    from data_plane.client import Consumer, Producer

    topic = "zstd-producer"
    cluster.create_topic(topic, 2, 3)
    values = [b"record-%05d " % i * 5 for i in range(3000)]
    with Producer(cluster.bootstrap, acks="all", linger_ms=5, compression="zstd") as producer:
        futures = [producer.send(topic, v, key=b"%d" % (i % 7)) for i, v in enumerate(values)]
        producer.flush(timeout=60)
    assert all(f.result(0).offset >= 0 for f in futures)
    got = []
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout_ms=500)]
    assert sorted(got) == sorted(values)


def test_a_zstd_topic_compresses_what_the_records_path_sends(cluster, channel_for) -> None:
    topic = "zstd-records"
    cluster.create_topic(topic, 1, 3, {"compression.type": "zstd"})
    stub = leader_stub(cluster, topic, channel_for)
    records = [common_pb2.Record(key=b"k", value=b"hello zstd " * 10, headers=[common_pb2.Header(key="h", value=b"v")])] * 20
    answer = produce(stub, topic, records=records)
    assert answer.error_code == common_pb2.NONE, answer.error_message
    [batch] = decode_batches(fetch(stub, topic, 0).batches)
    assert batch.header.compression == "zstd" and batch.values == [b"hello zstd " * 10] * 20


def test_kraftlog_produce_and_perf_produce_take_zstd(cluster) -> None:
    topic = "zstd-cli"
    cluster.create_topic(topic, 1, 3)
    cli = [sys.executable, "-m", "cli"]
    done = subprocess.run(
        [*cli, "produce", topic, "--compression", "zstd", "--bootstrap", cluster.bootstrap],
        input=b"one\ntwo\nthree\n", capture_output=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    done = subprocess.run(
        [*cli, "perf", "produce", "--topic", topic, "--num-records", "20000", "--batch-records", "2000", "--compression", "zstd",
         "--bootstrap", cluster.bootstrap, "--json"],
        capture_output=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["records"] == 20_000
    with grpc.insecure_channel(cluster.broker(cluster.leader(topic, 0)).address) as channel:
        batches = list(decode_batches(fetch(broker_pb2_grpc.BrokerStub(channel), topic, 0).batches))
    assert batches[0].values == [b"one", b"two", b"three"]
    assert {b.header.compression for b in batches} == {"zstd"} and sum(b.header.record_count for b in batches) >= 3 + 2000
