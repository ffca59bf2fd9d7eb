"""read_committed against a real cluster, over raw gRPC from the generated stubs: transactional
batches produced on the batches path, markers written through the internal WriteTxnMarkers
RPC (the transaction coordinator's call, which does not exist yet), then Fetch (records and
batches paths) and ListOffsets at both isolation levels. A control batch sent by a producer
is refused."""

from __future__ import annotations

import queue
from typing import Iterator

import grpc
import pytest

from data_plane import record_batch
from data_plane.client import Consumer
from data_plane.control_batch import ControlType, encode_marker
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.limits import MESSAGE_BYTES_MAX
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

OPTIONS = [("grpc.max_receive_message_length", MESSAGE_BYTES_MAX), ("grpc.max_send_message_length", MESSAGE_BYTES_MAX)]
TOPIC = "txn"
COMMITTED, UNCOMMITTED = broker_pb2.READ_COMMITTED, broker_pb2.READ_UNCOMMITTED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    # The test plays the coordinator itself (made-up producer ids, markers through
    # WriteTxnMarkers), so the leaders must not ask a real one (KIP-890 verification).
    with local_cluster(tmp_path_factory.mktemp("txn"), controllers=1, brokers=2,
                       broker_args=["--no-transaction-partition-verification"]) as c:
        c.create_topic(TOPIC, replication_factor=2)
        yield c


def produce(leader: broker_pb2_grpc.BrokerStub, batch: bytes) -> broker_pb2.PartitionProduceResponse:
    part = broker_pb2.PartitionProduceData(partition=0, batches=batch)
    # A transactional batch names its transactional id (refused without one, as Kafka does)
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id="read-committed-test",
                                        topics=[broker_pb2.TopicProduceData(topic=TOPIC, partitions=[part])])
    return leader.Produce(request, timeout=15).topics[0].partitions[0]


def txn_batch(pid: int, values: list[bytes]) -> bytes:
    return record_batch.encode_batch(values, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)


def end_txn(leader: broker_pb2_grpc.BrokerStub, pid: int, commit: bool) -> broker_pb2.TxnMarkerResult:
    marker = broker_pb2.TxnMarker(producer_id=pid, producer_epoch=1, commit=commit, coordinator_epoch=0, topic=TOPIC, partitions=[0])
    [result] = leader.WriteTxnMarkers(broker_pb2.WriteTxnMarkersRequest(markers=[marker]), timeout=10).results
    assert result.error_code == common_pb2.NONE, result.error_message
    return result


def fetch(stub: broker_pb2_grpc.BrokerStub, isolation: int, fmt: int) -> broker_pb2.FetchPartitionResponse:
    request = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, format=fmt, isolation_level=isolation, topics=[
        broker_pb2.FetchTopic(topic=TOPIC, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=0)])])
    answer = stub.Fetch(request, timeout=10).topics[0].partitions[0]
    assert answer.error_code == common_pb2.NONE, answer.error_message
    return answer


def values(stub: broker_pb2_grpc.BrokerStub, isolation: int) -> list[bytes]:
    return [r.value for r in fetch(stub, isolation, broker_pb2.RECORDS).records]


def latest(stub: broker_pb2_grpc.BrokerStub, isolation: int) -> int:
    request = broker_pb2.ListOffsetsRequest(isolation_level=isolation, topics=[broker_pb2.ListOffsetsTopic(topic=TOPIC, partitions=[
        broker_pb2.ListOffsetsPartition(partition=0, timestamp=-1)])])
    answer = stub.ListOffsets(request, timeout=10).topics[0].partitions[0]
    assert answer.error_code == common_pb2.NONE, answer.error_message
    return answer.offset


def consumed(stub: broker_pb2_grpc.BrokerStub, isolation: int, end: int) -> list[bytes]:
    """A records-path Consume stream from offset 0 until ``end``, a credit granted per message."""
    requests: queue.SimpleQueue = queue.SimpleQueue()
    requests.put(broker_pb2.ConsumeRequest(open=broker_pb2.ConsumeOpen(format=broker_pb2.RECORDS, isolation_level=isolation, topics=[
        broker_pb2.ConsumeTopic(topic=TOPIC, partitions=[broker_pb2.ConsumePartition(partition=0, offset=0)])])))
    call = stub.Consume(iter(requests.get, None), timeout=30)
    got: list[bytes] = []
    for message in call:
        entry = message.partitions[0]
        assert entry.error_code == common_pb2.NONE, entry.error_message
        got += [r.value for r in entry.records]
        requests.put(broker_pb2.ConsumeRequest(credit=broker_pb2.ConsumeCredit(messages=1)))
        if entry.next_offset >= end:
            break
    call.cancel()
    requests.put(None)
    return got


def python_consumer(cluster: TestCluster, isolation_level: str, fetch_mode: str, count: int) -> list[bytes]:
    with Consumer(cluster.bootstrap, isolation_level=isolation_level, fetch_mode=fetch_mode, fetch_max_wait_ms=100) as consumer:
        consumer.assign([(TOPIC, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        wait_for(lambda: got.extend(r.value for r in consumer.poll(200)) or len(got) >= count, 30, f"{count} records")
        return got


def end_positions(cluster: TestCluster) -> dict[str, int]:
    positions = {}
    for level in ("read_committed", "read_uncommitted"):
        with Consumer(cluster.bootstrap, isolation_level=level, fetch_mode="fetch") as consumer:
            consumer.assign([(TOPIC, 0)])
            consumer.seek_to_end()
            positions[level] = consumer.position((TOPIC, 0))
    return positions


def _answers(call) -> int | None:
    """``call()``, or None while the new leader still answers with an error (its HW settling)."""
    try:
        return call()
    except AssertionError:
        return None


def test_both_isolation_levels_over_grpc(cluster: TestCluster) -> None:
    leader = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker(cluster.leader(TOPIC, 0)).address, options=OPTIONS))

    refused = produce(leader, encode_marker(ControlType.COMMIT, 5, 0, 0, 1))
    assert refused.error_code == common_pb2.INVALID_RECORD and "clear bit 5" in refused.error_message

    assert produce(leader, record_batch.encode_batch([b"plain"])).error_code == common_pb2.NONE     # 0
    assert produce(leader, txn_batch(11, [b"aborted-1", b"aborted-2"])).error_code == common_pb2.NONE  # 1-2
    assert produce(leader, txn_batch(22, [b"committed"])).error_code == common_pb2.NONE              # 3
    assert latest(leader, UNCOMMITTED) == 4 and latest(leader, COMMITTED) == 1
    assert values(leader, COMMITTED) == [b"plain"]
    assert values(leader, UNCOMMITTED) == [b"plain", b"aborted-1", b"aborted-2", b"committed"]

    assert end_txn(leader, 11, commit=False).offset == 4
    assert end_txn(leader, 22, commit=True).offset == 5
    wait_for(lambda: latest(leader, COMMITTED) == 6, 30, "the LSO to pass both markers once the follower has them")
    assert values(leader, COMMITTED) == [b"plain", b"committed"]
    assert values(leader, UNCOMMITTED) == [b"plain", b"aborted-1", b"aborted-2", b"committed"]  # markers never records

    batches = fetch(leader, COMMITTED, broker_pb2.BATCHES)
    assert batches.last_stable_offset == 6
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in batches.aborted_transactions] == [(11, 1, 4)]
    control = [b.header.base_offset for b in record_batch.decode_batches(batches.batches) if b.header.is_control]
    assert control == [4, 5]  # on the batches path the client skips them (and drops the aborted range)
    assert fetch(leader, UNCOMMITTED, broker_pb2.BATCHES).aborted_transactions == []
    assert consumed(leader, COMMITTED, 6) == [b"plain", b"committed"]
    assert consumed(leader, UNCOMMITTED, 6) == [b"plain", b"aborted-1", b"aborted-2", b"committed"]

    # the Python consumer, both fetch modes: markers and aborted records never reach poll
    for mode in ("stream", "fetch"):
        assert python_consumer(cluster, "read_committed", mode, 2) == [b"plain", b"committed"]
        assert python_consumer(cluster, "read_uncommitted", mode, 4) == [b"plain", b"aborted-1", b"aborted-2", b"committed"]
    assert produce(leader, txn_batch(33, [b"open"])).error_code == common_pb2.NONE                  # 6, left open
    wait_for(lambda: latest(leader, UNCOMMITTED) == 7, 30, "the HW to pass the open transaction's batch")
    assert end_positions(cluster) == {"read_committed": 6, "read_uncommitted": 7}

    # SIGKILL the leader: the follower, which built its index from the replicated batches and
    # markers, leads with the same LSO and aborted transactions
    old = cluster.leader(TOPIC, 0)
    cluster.kill(cluster.broker(old))
    new = wait_for(lambda: (b := cluster.leader(TOPIC, 0)) not in (old, -1) and b, 60, "the follower to take the leadership")
    successor = broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker(new).address, options=OPTIONS))
    wait_for(lambda: _answers(lambda: latest(successor, UNCOMMITTED)) == 7, 60, "the new leader's HW to settle")
    assert latest(successor, COMMITTED) == 6
    assert values(successor, COMMITTED) == [b"plain", b"committed"]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in fetch(successor, COMMITTED, broker_pb2.BATCHES).aborted_transactions] == [(11, 1, 4)]
    end_txn(successor, 33, commit=True)                                                               # 7
    wait_for(lambda: latest(successor, COMMITTED) == 8, 30, "the LSO to pass the last marker")
    assert values(successor, COMMITTED) == [b"plain", b"committed", b"open"]
    cluster.restart(cluster.broker(old))
