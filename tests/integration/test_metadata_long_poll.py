"""Metadata as a long poll for a failover (docs/protocol.md, "Metadata"): a broker holds the
answer until its metadata shows a newer leader for a named partition, so a client whose
leader died learns of the successor the moment the broker does; and a producer's stall
through a leader SIGKILL is bounded by the election, not by its retry back-offs."""

from __future__ import annotations

import concurrent.futures
import time

import grpc
import pytest

from data_plane.client import Producer
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from tests.cluster import cluster_with_topic

pytestmark = pytest.mark.integration

TOPIC = "long-poll"


def _metadata(address: str, epoch: int | None = None, max_wait_ms: int = 0) -> broker_pb2.PartitionMetadata:
    request = broker_pb2.MetadataRequest(topics=[TOPIC], max_wait_ms=max_wait_ms)
    if epoch is not None:
        request.newer_leader_than.add(topic=TOPIC, partition=0, leader_epoch=epoch)
    with grpc.insecure_channel(address) as channel:
        [topic] = broker_pb2_grpc.BrokerStub(channel).Metadata(request, timeout=60).topics
    return topic.partitions[0]


def test_a_held_metadata_request_answers_with_the_new_leader_and_a_producer_follows_it(tmp_path) -> None:
    with cluster_with_topic(tmp_path, TOPIC, 1) as cluster:
        other = next(b for b in cluster.brokers if b.node_id != cluster.leader(TOPIC, 0))
        before = _metadata(other.address)
        started = time.monotonic()
        unchanged = _metadata(other.address, before.leader_epoch, max_wait_ms=400)
        assert unchanged.leader_epoch == before.leader_epoch
        assert time.monotonic() - started >= 0.35, "with no leader change the broker holds the answer for max_wait_ms"

        with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer, concurrent.futures.ThreadPoolExecutor(1) as pool:
            producer.send(TOPIC, b"before").result(30)
            held = pool.submit(_metadata, other.address, before.leader_epoch, 30_000)
            cluster.kill(cluster.broker(before.leader_id))
            after = held.result(20)  # a broker that did not wake would hold it for 30 s
            assert after.leader_epoch > before.leader_epoch and after.leader_id not in (before.leader_id, -1)
            assert producer.send(TOPIC, b"after").result(30).offset == 1
