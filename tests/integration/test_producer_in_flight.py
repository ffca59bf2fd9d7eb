"""The idempotent producer with five requests in flight per partition, against a real cluster
(three brokers and three controllers as processes) while the partition's leader is killed
(SIGKILL) or its clients' link is cut or loses its answers (a Toxiproxy-API proxy in front
of each broker's client port): every acknowledged record is in the log exactly once, at the
offset it was acknowledged with, and every partition holds its records in send order."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from server_common.local_cluster import HOST
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_replication import TOPIC_CONFIG, ReplicationLinks, Workload, assert_every_acked_record_read_once, kill_the_leader_under_load
from tests.integration.test_cluster_e2e import read_all

pytestmark = pytest.mark.integration

PARTITIONS = 2
# Five requests per partition in flight (the default with idempotence, said explicitly: it is
# what these tests are about); a short linger so that requests are small and many.
IN_FLIGHT = {"max_in_flight_per_partition": 5, "linger_ms": 0}


def sequence_of(value: bytes) -> int:
    """Workload values are b"v<i>" with i rising in send order."""
    return int(value[1:])


def first_out_of_order(values: list[bytes]) -> tuple[int, bytes, bytes] | None:
    """(offset, value before, value) where a partition's values stop rising, if anywhere."""
    for offset in range(1, len(values)):
        if sequence_of(values[offset]) <= sequence_of(values[offset - 1]):
            return offset, values[offset - 1], values[offset]
    return None


def test_the_order_check_catches_a_reorder_and_a_duplicate():
    assert first_out_of_order([b"v0", b"v2", b"v4"]) is None
    assert first_out_of_order([b"v0", b"v4", b"v2"]) == (2, b"v4", b"v2")
    assert first_out_of_order([b"v0", b"v2", b"v2"]) == (2, b"v2", b"v2")


def assert_in_send_order(cluster: TestCluster, workload: Workload) -> None:
    logs = read_all(cluster.bootstrap, workload.topic, workload.partitions, len(workload.acked), timeout_s=60)
    for partition, values in logs.items():
        assert first_out_of_order(values) is None, f"partition {partition}: {first_out_of_order(values)}"


def test_sigkill_of_the_leader_mid_stream_keeps_acknowledged_records_once_and_in_order(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic("inflight-kill", partitions=PARTITIONS, replication_factor=3, configs=TOPIC_CONFIG)
        workload = Workload(cluster, "inflight-kill", PARTITIONS, **IN_FLIGHT)
        try:
            kill_the_leader_under_load(cluster, "inflight-kill", workload)
            workload.wait_acked(len(workload.acked) + 1_000)
        finally:
            workload.stop()
        assert not workload.failed, f"{len(workload.failed)} sends failed, e.g. {next(iter(workload.failed.values()))}"
        assert_every_acked_record_read_once(cluster, workload)
        assert_in_send_order(cluster, workload)


class ClientLinks(ReplicationLinks):
    """A Toxiproxy-API proxy in front of each broker's client port: brokers advertise it, so
    clients reach every broker through it; brokers reach each other directly."""

    def configure(self, cluster: TestCluster) -> None:
        brokers = cluster.brokers
        for broker, port in zip(brokers, cluster.spare_ports(len(brokers))):
            self.api.create(upstream=broker.address, name=f"client-{broker.node_id}", listen=f"{HOST}:{port}")
            broker.extra_args += [f"--advertised-address={HOST}:{port}"]
            broker.extra_args += [f"--peer-address={peer.node_id}={peer.address}" for peer in brokers if peer is not broker]

    def client_proxy(self, broker: int):
        return self.api.get_proxy(f"client-{broker}")


@pytest.fixture()
def client_links() -> ClientLinks:
    links = ClientLinks()
    yield links
    links.stop()


def test_a_cut_client_link_and_lost_answers_keep_acknowledged_records_once_and_in_order(
    tmp_path: Path, client_links: ClientLinks
) -> None:
    """The leader's client link is cut (requests fail in flight), then its answers are held
    and the connection dropped (the leader appended, the producer cannot know): retries in
    sequence order are recognised as duplicates, and nothing is reordered."""
    with local_cluster(tmp_path, configure=client_links.configure) as cluster:
        cluster.create_topic("inflight-cut", partitions=PARTITIONS, replication_factor=3, configs=TOPIC_CONFIG)
        workload = Workload(cluster, "inflight-cut", PARTITIONS, request_timeout_ms=3_000, **IN_FLIGHT)
        try:
            workload.wait_acked(3_000)
            link = client_links.client_proxy(cluster.leader("inflight-cut", 0))
            for fault in ("cut", "answers lost"):
                before = len(workload.acked)
                if fault == "cut":
                    link.disable()
                else:
                    link.add_toxic(name="hold", type="timeout", stream="downstream", attributes={"timeout": 500})
                threading.Event().wait(1.5)  # the fault's length, not a synchronization
                if fault == "cut":
                    link.enable()
                else:
                    link.destroy_toxic("hold")
                workload.wait_acked(before + 3_000)
        finally:
            workload.stop()
        assert not workload.failed, f"{len(workload.failed)} sends failed, e.g. {next(iter(workload.failed.values()))}"
        assert_every_acked_record_read_once(cluster, workload)
        assert_in_send_order(cluster, workload)
