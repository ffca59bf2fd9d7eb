"""A topic config change reaches the running partition at once: raising min.insync.replicas
on a live RF=3 topic whose ISR is two refuses the next acks=all produce with
NOT_ENOUGH_REPLICAS (nothing written), without waiting for a leader election; lowering it
again lets acks=all through, still in the same leader epoch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc

from server_common.waiting import wait_for
from data_plane.client import Admin
from data_plane.record_batch import encode_batch
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from tests.cluster import TestCluster, local_cluster

TOPIC = "live-config"


def produce_all(cluster: TestCluster, leader: int) -> broker_pb2.PartitionProduceResponse:
    """One acks=all produce straight to the leader (no client retries hiding the answer)."""
    with grpc.insecure_channel(cluster.broker(leader).address) as channel:
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=5000, topics=[broker_pb2.TopicProduceData(
            topic=TOPIC, partitions=[broker_pb2.PartitionProduceData(partition=0, batches=encode_batch([b"v"]))])])
        return broker_pb2_grpc.BrokerStub(channel).Produce(request, timeout=10).topics[0].partitions[0]


def describe(cluster: TestCluster):
    with Admin(cluster.bootstrap) as admin:
        return admin.describe_topics([TOPIC])[TOPIC].partitions[0]


def alter(cluster: TestCluster, *config: str) -> None:
    """The operator's path: ``kraftlog topics alter NAME --config KEY=VALUE``."""
    args = [arg for kv in config for arg in ("--config", kv)]
    done = subprocess.run([sys.executable, "-m", "cli", "topics", "alter", TOPIC, *args, "--bootstrap", cluster.bootstrap],
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()


def test_min_insync_replicas_change_applies_to_the_live_leader(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        leader = describe(cluster).leader
        assert produce_all(cluster, leader).error_code == common_pb2.NONE
        follower = next(b for b in describe(cluster).replicas if b != leader)
        cluster.stop_node(cluster.broker(follower))
        wait_for(lambda: len(describe(cluster).isr) == 2, 30, f"the ISR without broker {follower}")
        before = describe(cluster)
        assert produce_all(cluster, leader).error_code == common_pb2.NONE  # ISR 2 >= min.insync 2

        alter(cluster, "min.insync.replicas=3")
        answers: list[broker_pb2.PartitionProduceResponse] = []
        wait_for(lambda: answers.append(produce_all(cluster, leader)) or answers[-1].error_code != common_pb2.NONE,
                 30, "acks=all refused after min.insync.replicas=3")
        refused = answers[-1]
        assert refused.error_code == common_pb2.NOT_ENOUGH_REPLICAS, refused
        assert "min.insync.replicas=3" in refused.error_message and "nothing was written" in refused.error_message
        after = describe(cluster)
        assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)  # no election was needed

        alter(cluster, "min.insync.replicas=2")
        wait_for(lambda: produce_all(cluster, leader).error_code == common_pb2.NONE, 30, "acks=all accepted again")
        assert describe(cluster).leader_epoch == before.leader_epoch
