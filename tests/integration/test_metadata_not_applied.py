"""A broker never stalls on metadata it cannot act on: real processes.

One controller, three brokers. A regular file sits where broker 1 must create the
directory of ``blocked-0``, so creating that replica's log fails there (a real OSError, as
EMFILE or ENOSPC would). Broker 1 must report the replica offline (its leadership moves to
another replica, clients produce to it), answer DescribeLogs for it with STORAGE_ERROR, go on
applying later metadata (a topic created after it gets its replica on broker 1) and serving
its other partitions; once the file is gone, it creates the replica without a restart and
the replica rejoins the ISR. A replica never created whose topic is then deleted stops
being reported. A replica whose log fails after it was created (EIO on its appends) comes
back the same way once the cause is gone.

Before: the failure was logged and forgotten (the replica was never retried, never
reported, and the partition kept broker 1 as a leader that had no log for it); with an
exception escaping instead, the broker replayed the same metadata forever and its metadata
offset never moved again.
"""

from __future__ import annotations

import grpc
import pytest

from data_plane.client import Admin, Producer
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def broker_log_states(cluster: TestCluster, broker_id: int, topic: str) -> dict[int, int]:
    """partition -> DescribeLogs error code, as broker ``broker_id`` answers for ``topic``."""
    with grpc.insecure_channel(cluster.broker(broker_id).address) as channel:
        answer = broker_pb2_grpc.BrokerStub(channel).DescribeLogs(broker_pb2.DescribeLogsRequest(topics=[topic]), timeout=5)
    return {p.partition: p.error_code for p in answer.partitions}


def partition(cluster: TestCluster, topic: str, index: int):
    with Admin(cluster.bootstrap) as admin:
        return admin.describe_topics([topic])[topic].partitions[index]


def test_a_replica_that_cannot_be_created_is_reported_offline_and_created_once_the_cause_is_gone(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic("steady", partitions=3, replication_factor=3)
        blocker = cluster.data_dir / cluster.broker(1).name / "blocked-0"
        blocker.write_text("a file where broker 1 must create a directory")
        with cluster.controller_client() as client:
            client.create_topic("blocked", 1, 3)

        wait_for(lambda: broker_log_states(cluster, 1, "blocked") == {0: common_pb2.STORAGE_ERROR}, 30,
                 "broker 1 to answer STORAGE_ERROR for its replica of blocked-0")
        wait_for(lambda: 1 not in partition(cluster, "blocked", 0).isr and partition(cluster, "blocked", 0).leader > 1, 30,
                 "the controller to move blocked-0 off broker 1's offline replica")
        log = cluster.log_path(cluster.broker(1)).read_text()
        assert "applying metadata failed; serving on and retrying" in log and "blocked-0" in log

        cluster.create_topic("after", partitions=1, replication_factor=3)  # later metadata still reaches broker 1
        wait_for(lambda: broker_log_states(cluster, 1, "after") == {0: common_pb2.NONE}, 30, "broker 1's replica of after-0")
        with Producer(cluster.bootstrap, acks="all") as producer:
            for topic, count in (("steady", 3), ("blocked", 1), ("after", 1)):
                for p in range(count):
                    producer.send(topic, b"served", partition=p).result(timeout=30)

        blocker.unlink()  # the cause goes away: no restart
        wait_for(lambda: broker_log_states(cluster, 1, "blocked") == {0: common_pb2.NONE}, 60,
                 "broker 1 to create its replica of blocked-0 on a retry")
        wait_for(lambda: 1 in partition(cluster, "blocked", 0).isr, 60, "broker 1's replica of blocked-0 back in the ISR")
        assert "metadata applied after retrying" in cluster.log_path(cluster.broker(1)).read_text()


def test_a_replica_never_created_stops_being_reported_once_its_topic_is_deleted(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        (cluster.data_dir / cluster.broker(1).name / "gone-0").write_text("in the way")
        with cluster.controller_client() as client:
            client.create_topic("gone", 1, 1)
        wait_for(lambda: broker_log_states(cluster, 1, "gone") == {0: common_pb2.STORAGE_ERROR}, 30, "gone-0 reported offline")
        with cluster.controller_client() as client:
            client.delete_topics(["gone"])
        wait_for(lambda: broker_log_states(cluster, 1, "gone") == {}, 30, "gone-0 no longer reported once its topic is deleted")



def test_a_replica_whose_log_fails_later_comes_back_once_the_cause_is_gone(tmp_path) -> None:
    """The leader's appends fail with EIO (``--storage-fault-injection``): its replica goes
    offline, the controller moves the leadership, and while the cause lasts the broker's
    attempts to reopen the log fail (a probe write) and it stays offline. Once the cause is
    gone the broker reopens the log (recovered as after a crash) and its replica follows and
    rejoins the ISR, without a restart; before, it stayed offline until one. Nothing
    acknowledged is lost."""
    from data_plane.storage.fault_injection import TRIGGER_FILE
    from tests.integration.test_elections_cli import consume, produce, state

    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=["--storage-fault-injection"]) as cluster:
        cluster.create_topic("flaky", 1, 3, {"min.insync.replicas": "2"})
        broken = state(cluster, "flaky").leader
        acked = produce(cluster, "flaky", 20)
        trigger = cluster.data_dir / cluster.broker(broken).name / TRIGGER_FILE
        trigger.write_text("append\n")
        acked += produce(cluster, "flaky", 20, first=20)  # STORAGE_ERROR on the broken leader, retried at the next one
        wait_for(lambda: broker_log_states(cluster, broken, "flaky") == {0: common_pb2.STORAGE_ERROR}, 30, f"broker {broken} offline for flaky-0")
        moved = state(cluster, "flaky")
        assert moved.leader not in (-1, broken) and broken not in moved.isr, moved
        log = cluster.log_path(cluster.broker(broken))
        wait_for(lambda: "partition still offline: reopening its log failed" in log.read_text(), 30, "a failed reopen while the cause lasts")
        assert broker_log_states(cluster, broken, "flaky") == {0: common_pb2.STORAGE_ERROR}

        trigger.unlink()  # the cause goes away: no restart
        wait_for(lambda: broker_log_states(cluster, broken, "flaky") == {0: common_pb2.NONE}, 60, f"broker {broken} to reopen flaky-0")
        wait_for(lambda: broken in state(cluster, "flaky").isr, 60, f"broker {broken} back in the ISR of flaky-0")
        assert "partition back online: log reopened" in log.read_text()
        acked += produce(cluster, "flaky", 20, first=40)
        assert consume(cluster, "flaky", len(acked))[: len(acked)] == acked, "no acknowledged write lost"
