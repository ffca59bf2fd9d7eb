"""The plain-records path against a real cluster, from stubs generated from the .proto files
alone (no kraftlog client library on the data path): idempotent retries, fetch answers bounded
by ``max_bytes`` once decoded, ListOffsets refused by followers, and DeleteRecords (through
``kraftlog records delete``) followed by every replica, across a leader change and a restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Iterator

import grpc
import pytest

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.limits import MESSAGE_BYTES_MAX
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

OPTIONS = [("grpc.max_receive_message_length", MESSAGE_BYTES_MAX), ("grpc.max_send_message_length", MESSAGE_BYTES_MAX)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("records"), controllers=1, brokers=3) as c:
        yield c


def stub(cluster: TestCluster, broker_id: int) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker(broker_id).address, options=OPTIONS))


def leader_stub(cluster: TestCluster, topic: str) -> broker_pb2_grpc.BrokerStub:
    return stub(cluster, cluster.leader(topic, 0))


def produce_request(topic: str, values: list[bytes], acks: int = -1, **idempotence: int) -> broker_pb2.ProduceRequest:
    part = broker_pb2.PartitionProduceData(partition=0, records=[common_pb2.Record(value=v) for v in values], **idempotence)
    return broker_pb2.ProduceRequest(acks=acks, timeout_ms=10_000, topics=[broker_pb2.TopicProduceData(topic=topic, partitions=[part])])


def produced(response: broker_pb2.ProduceResponse) -> broker_pb2.PartitionProduceResponse:
    return response.topics[0].partitions[0]


def fetch(broker: broker_pb2_grpc.BrokerStub, topic: str, offset: int, max_bytes: int = 8 << 20,
          partition_max_bytes: int = 0) -> broker_pb2.FetchPartitionResponse:
    request = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=max_bytes, format=broker_pb2.RECORDS, topics=[
        broker_pb2.FetchTopic(topic=topic, partitions=[
            broker_pb2.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])])
    return broker.Fetch(request, timeout=10).topics[0].partitions[0]


def read_all(broker: broker_pb2_grpc.BrokerStub, topic: str, max_bytes: int = 8 << 20) -> list[common_pb2.Record]:
    records: list[common_pb2.Record] = []
    offset = 0
    while True:
        answer = fetch(broker, topic, offset, max_bytes)
        assert answer.error_code == common_pb2.NONE, answer.error_message
        if not answer.records:
            return records
        records.extend(answer.records)
        offset = answer.records[-1].offset + 1


def list_offset(broker: broker_pb2_grpc.BrokerStub, topic: str, timestamp: int) -> broker_pb2.ListOffsetsPartitionResponse:
    request = broker_pb2.ListOffsetsRequest(topics=[broker_pb2.ListOffsetsTopic(topic=topic, partitions=[
        broker_pb2.ListOffsetsPartition(partition=0, timestamp=timestamp)])])
    return broker.ListOffsets(request, timeout=10).topics[0].partitions[0]


def kraftlog(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())


# ---------------------------------------------------------------- idempotence


def test_a_records_produce_retried_after_a_lost_answer_is_written_once(cluster) -> None:
    """The leader appends, its acks=all answer never reaches the client (the followers are
    paused, so the client's deadline passes first), and the client sends the same request
    again: one copy in the log, answered with the original offset. Without a producer id the
    same retry writes a second copy (the negative control)."""
    cluster.create_topic("idem", replication_factor=3)
    leader_id = cluster.leader("idem", 0)
    broker = stub(cluster, leader_id)
    init = broker.InitProducerId(broker_pb2.InitProducerIdRequest(), timeout=10)
    assert init.error_code == common_pb2.NONE, init.error_message
    ids = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}

    first = produced(broker.Produce(produce_request("idem", [b"a0", b"a1"], **ids, base_sequence=0), timeout=10))
    assert first.error_code == common_pb2.NONE and first.base_offset == 0, first

    retried = produce_request("idem", [b"b2", b"b3", b"b4"], **ids, base_sequence=2)
    followers = [cluster.broker(b) for b in (1, 2, 3) if b != leader_id]
    for node in followers:
        cluster.signal(node, signal.SIGSTOP)
    try:
        with pytest.raises(grpc.RpcError) as lost:
            broker.Produce(retried, timeout=1.0)
        assert lost.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        for node in followers:
            cluster.signal(node, signal.SIGCONT)
    again = produced(broker.Produce(retried, timeout=30))
    assert again.error_code == common_pb2.NONE and again.base_offset == 2, again

    gap = produced(broker.Produce(produce_request("idem", [b"gap"], **ids, base_sequence=9), timeout=10))
    assert gap.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE and "restart the producer" in gap.error_message

    plain = produce_request("idem", [b"c5"])
    assert produced(broker.Produce(plain, timeout=10)).base_offset == 5
    assert produced(broker.Produce(plain, timeout=10)).base_offset == 6  # no producer id: the retry is a second copy

    values = [r.value for r in read_all(broker, "idem")]
    assert values == [b"a0", b"a1", b"b2", b"b3", b"b4", b"c5", b"c5"]


def test_idempotence_fields_that_cannot_be_honoured_are_refused(cluster) -> None:
    cluster.create_topic("idem-bad")
    broker = leader_stub(cluster, "idem-bad")
    for fields, words in [
        ({"producer_id": 7}, "together"),
        ({"producer_id": 7, "producer_epoch": 0, "base_sequence": -1}, "base_sequence"),
    ]:
        with pytest.raises(grpc.RpcError) as refused:
            broker.Produce(produce_request("idem-bad", [b"x"], **fields), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in refused.value.details()
    assert list_offset(broker, "idem-bad", -1).offset == 0, "nothing was written"


# ---------------------------------------------------------------- fetch size


def test_records_fetch_on_an_lz4_topic_is_bounded_by_max_bytes_once_decoded(cluster) -> None:
    cluster.create_topic("squeezed", configs={"compression.type": "lz4"})
    broker = leader_stub(cluster, "squeezed")
    value = b"x" * 100
    for _ in range(8):  # 40,000 records of 100 bytes: 4 MB decoded, a few tens of KB stored
        answer = produced(broker.Produce(produce_request("squeezed", [value] * 5000, acks=1), timeout=30))
        assert answer.error_code == common_pb2.NONE, answer.error_message

    max_bytes = 64 << 10
    small = fetch(broker, "squeezed", 0, max_bytes)
    encoded = sum(r.ByteSize() for r in small.records)
    assert 0 < encoded <= max_bytes and small.ByteSize() <= max_bytes + 64, (encoded, small.ByteSize())
    assert [r.offset for r in small.records] == list(range(len(small.records)))
    per_partition = fetch(broker, "squeezed", 0, 8 << 20, partition_max_bytes=max_bytes)
    assert len(per_partition.records) == len(small.records)
    large = fetch(broker, "squeezed", 0, 8 << 20)
    assert len(large.records) > 10 * len(small.records), "the small answer was cut by max_bytes, not by what was stored"

    everything = read_all(broker, "squeezed", max_bytes)
    assert [r.offset for r in everything] == list(range(40_000))


def test_a_record_larger_than_max_bytes_still_comes_alone(cluster) -> None:
    cluster.create_topic("big-record")
    broker = leader_stub(cluster, "big-record")
    produced(broker.Produce(produce_request("big-record", [b"y" * 10_000, b"z"], acks=1), timeout=10))
    first = fetch(broker, "big-record", 0, max_bytes=100)
    assert [r.offset for r in first.records] == [0]
    assert [r.value for r in fetch(broker, "big-record", 1, max_bytes=100).records] == [b"z"]


# ---------------------------------------------------------------- followers


def delete_request(topic: str, offset: int) -> broker_pb2.DeleteRecordsRequest:
    return broker_pb2.DeleteRecordsRequest(topics=[broker_pb2.DeleteRecordsTopic(topic=topic, partitions=[
        broker_pb2.DeleteRecordsPartition(partition=0, offset=offset)])])


def test_list_offsets_and_delete_records_at_a_follower_answer_not_leader_with_the_leaders_hint(cluster) -> None:
    cluster.create_topic("hinted", replication_factor=3)
    leader_id = cluster.leader("hinted", 0)
    follower = stub(cluster, next(b for b in (1, 2, 3) if b != leader_id))
    for answer in (list_offset(follower, "hinted", -2), follower.DeleteRecords(delete_request("hinted", -1), timeout=10).topics[0].partitions[0]):
        assert answer.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER, answer
        assert answer.current_leader.leader_id == leader_id and "leader" in answer.error_message
    assert list_offset(stub(cluster, leader_id), "hinted", -2).error_code == common_pb2.NONE


def test_delete_records_refuses_what_no_client_means(cluster) -> None:
    cluster.create_topic("delete-bad")
    broker = leader_stub(cluster, "delete-bad")
    for request, words in [(delete_request("delete-bad", -2), "offset must be -1"),
                           (broker_pb2.DeleteRecordsRequest(topics=[broker_pb2.DeleteRecordsTopic(topic="delete-bad", partitions=[
                               broker_pb2.DeleteRecordsPartition(partition=0), broker_pb2.DeleteRecordsPartition(partition=0)])]), "twice")]:
        with pytest.raises(grpc.RpcError) as refused:
            broker.DeleteRecords(request, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in refused.value.details()
    empty = broker.DeleteRecords(delete_request("delete-bad", -1), timeout=10).topics[0].partitions[0]
    assert (empty.error_code, empty.low_watermark) == (common_pb2.NONE, 0)  # nothing committed: nothing to delete


# ---------------------------------------------------------------- DeleteRecords


def log_starts(cluster: TestCluster, topic: str, brokers: list[int]) -> dict[int, int]:
    starts = {}
    for broker_id in brokers:
        logs = stub(cluster, broker_id).DescribeLogs(broker_pb2.DescribeLogsRequest(topics=[topic]), timeout=10)
        starts[broker_id] = logs.partitions[0].log_start_offset
    return starts


def test_delete_records_moves_the_log_start_on_every_replica_across_a_leader_change(cluster) -> None:
    cluster.create_topic("trimmed", replication_factor=3, configs={"segment.bytes": "1024"})
    broker = leader_stub(cluster, "trimmed")
    for i in range(10):  # ten batches of ten records, over many small segments
        assert produced(broker.Produce(produce_request("trimmed", [b"v%03d" % (10 * i + j) for j in range(10)]), timeout=30)).error_code == common_pb2.NONE

    above = kraftlog(cluster, "records", "delete", "--topic", "trimmed", "--partition", "0", "--before", "101")
    assert above.returncode == 1 and "OFFSET_OUT_OF_RANGE" in above.stderr and "high watermark" in above.stderr, above.stderr

    done = kraftlog(cluster, "records", "delete", "--topic", "trimmed", "--partition", "0", "--before", "35", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"topic": "trimmed", "partition": 0, "low_watermark": 35}
    wait_for(lambda: set(log_starts(cluster, "trimmed", [1, 2, 3]).values()) == {35}, 30, "every replica's log start at 35")

    old_leader = cluster.leader("trimmed", 0)
    cluster.stop_node(cluster.broker(old_leader))
    wait_for(lambda: cluster.leader("trimmed", 0) not in (-1, old_leader), 60, "a new leader for trimmed-0")
    new_leader = leader_stub(cluster, "trimmed")
    earliest = wait_for(lambda: (a := list_offset(new_leader, "trimmed", -2)).error_code == common_pb2.NONE and a, 30, "ListOffsets answered")
    assert earliest.offset == 35
    below = fetch(new_leader, "trimmed", 34)
    assert below.error_code == common_pb2.OFFSET_OUT_OF_RANGE and "earliest" in below.error_message
    assert [r.value for r in fetch(new_leader, "trimmed", 35).records][:2] == [b"v035", b"v036"]

    cluster.restart(cluster.broker(old_leader))
    wait_for(lambda: log_starts(cluster, "trimmed", [old_leader])[old_leader] == 35, 60, "the restarted broker keeps log start 35")


# ---------------------------------------------------------------- configs


def test_describe_configs_shows_every_effective_config_with_its_source(cluster) -> None:
    cluster.create_topic("configured", configs={"retention.ms": "3600000"})
    shown = kraftlog(cluster, "topics", "describe-configs", "--topic", "configured", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = {r["key"]: r for r in json.loads(shown.stdout)}
    assert rows["retention.ms"] == {"topic": "configured", "key": "retention.ms", "value": "3600000", "source": "topic override"}
    assert rows["segment.bytes"]["source"] == "default" and rows["segment.bytes"]["value"] == str(1 << 30)
    assert {"min.insync.replicas", "compression.type", "max.message.bytes"} <= set(rows)
    table = kraftlog(cluster, "topics", "describe-configs", "configured")
    assert table.returncode == 0 and "SOURCE" in table.stdout
    assert any(line.split()[1:] == ["retention.ms", "3600000", "topic", "override"] for line in table.stdout.splitlines())
    missing = kraftlog(cluster, "topics", "describe-configs", "--topic", "no-such-topic")
    assert missing.returncode == 1 and "no-such-topic" in missing.stderr, missing.stderr
