"""Requests no correct client sends are refused with INVALID_ARGUMENT and a message naming
the field, never answered with an internal error, and nothing of them is applied."""

from __future__ import annotations

from typing import Callable, Iterator

import grpc
import pytest

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

FP, LP, PP = broker_pb2.FetchPartition, broker_pb2.ListOffsetsPartition, broker_pb2.PartitionProduceData


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[broker_pb2_grpc.BrokerStub]:
    with local_cluster(tmp_path_factory.mktemp("validation"), controllers=1, brokers=1) as cluster:
        cluster.create_topic("v", partitions=1, replication_factor=1)
        with grpc.insecure_channel(cluster.brokers[0].address) as channel:
            yield broker_pb2_grpc.BrokerStub(channel)


def fetch(*partitions: broker_pb2.FetchPartition) -> Callable:
    return lambda stub: stub.Fetch(broker_pb2.FetchRequest(max_bytes=1000, topics=[broker_pb2.FetchTopic(topic="v", partitions=partitions)]), timeout=10)


def list_offsets(*partitions: broker_pb2.ListOffsetsPartition) -> Callable:
    return lambda stub: stub.ListOffsets(broker_pb2.ListOffsetsRequest(topics=[broker_pb2.ListOffsetsTopic(topic="v", partitions=partitions)]), timeout=10)


def produce(part: broker_pb2.PartitionProduceData) -> Callable:
    return lambda stub: stub.Produce(broker_pb2.ProduceRequest(acks=1, topics=[broker_pb2.TopicProduceData(topic="v", partitions=[part])]), timeout=10)


RECORD = [common_pb2.Record(value=b"x")]


@pytest.mark.parametrize("call, field", [
    (fetch(FP(partition=0, current_leader_epoch=-2)), "current_leader_epoch"),
    (fetch(FP(partition=0), FP(partition=0)), "appears twice"),
    (fetch(FP(partition=0, partition_max_bytes=-5)), "partition_max_bytes"),
    (list_offsets(LP(partition=0, timestamp=-3)), "timestamp"),
    (list_offsets(LP(partition=0, timestamp=-1), LP(partition=0, timestamp=-2)), "appears twice"),
    (list_offsets(LP(partition=0, timestamp=-1, current_leader_epoch=-2)), "current_leader_epoch"),
    (produce(PP(partition=0, records=RECORD, current_leader_epoch=-2)), "current_leader_epoch"),
], ids=["fetch-epoch", "fetch-twice", "fetch-partition-max-bytes", "list-offsets-timestamp", "list-offsets-twice",
        "list-offsets-epoch", "produce-epoch"])
def test_malformed_requests_are_refused_by_name_and_apply_nothing(broker, call, field) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        call(broker)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert field in refused.value.details()
    latest = list_offsets(LP(partition=0, timestamp=-1))(broker).topics[0].partitions[0]
    assert latest.error_code == common_pb2.NONE and latest.offset == 0, "nothing was written"


def test_the_same_requests_well_formed_are_answered(broker) -> None:
    """The control: each refused shape, made valid, gets a normal answer."""
    assert produce(PP(partition=0, records=RECORD, current_leader_epoch=-1))(broker).topics[0].partitions[0].error_code == common_pb2.NONE
    assert fetch(FP(partition=0, partition_max_bytes=0))(broker).topics[0].partitions[0].error_code == common_pb2.NONE
    latest = list_offsets(LP(partition=0, timestamp=-1))(broker).topics[0].partitions[0]
    assert latest.error_code == common_pb2.NONE and latest.offset == 1


def test_produce_stream_answers_each_request_by_its_correlation_id_and_ends_on_a_malformed_one(broker) -> None:
    """A client written from the proto alone: requests on one ProduceStream, answers matched by
    correlation_id (they may come in any order), and a request of the wrong shape ends the
    stream with INVALID_ARGUMENT as it fails a unary Produce."""
    def request(correlation_id: int, acks: int = 1) -> broker_pb2.ProduceRequest:
        return broker_pb2.ProduceRequest(acks=acks, correlation_id=correlation_id,
                                         topics=[broker_pb2.TopicProduceData(topic="v", partitions=[PP(partition=0, records=RECORD)])])

    answers = list(broker.ProduceStream(iter([request(7), request(8, acks=-1), request(9)]), timeout=10))
    by_id = {a.correlation_id: a.topics[0].partitions[0] for a in answers}
    assert sorted(by_id) == [7, 8, 9] and all(p.error_code == common_pb2.NONE for p in by_id.values())
    assert sorted(p.base_offset for p in by_id.values()) == [by_id[7].base_offset + i for i in range(3)]

    with pytest.raises(grpc.RpcError) as refused:
        list(broker.ProduceStream(iter([request(1), request(2, acks=5)]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "acks" in refused.value.details()
