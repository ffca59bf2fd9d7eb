"""Replication with real processes: replication factor 3, min.insync.replicas=2, acks=all.

Each test runs a cluster of separate controller and broker processes on loopback and injects
real faults (SIGKILL, SIGSTOP/SIGCONT, SIGTERM, links cut through a Toxiproxy-API proxy).
Every acknowledged record must be read back exactly once at the offset it was acknowledged
with, and after healing every replica must hold the same bytes.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import grpc
import pytest

from server_common.local_cluster import HOST
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_cluster_e2e import read_all

pytestmark = pytest.mark.integration

TOPIC_CONFIG = {"min.insync.replicas": "2"}


class Workload:
    """An idempotent acks=all producer writing unique values round-robin over partitions in a
    background thread, recording each value's outcome."""

    def __init__(self, cluster: TestCluster, topic: str, partitions: int, **producer_options) -> None:
        from data_plane.client import Producer

        self.topic, self.partitions = topic, partitions
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, BaseException] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        options = {"acks": "all", "enable_idempotence": True, "linger_ms": 2, "delivery_timeout_ms": 60_000} | producer_options
        self._producer = Producer(cluster.bootstrap, **options)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"v{i}".encode()
            self._producer.send(self.topic, value, partition=i % self.partitions).add_done_callback(
                lambda future, value=value: self._done(value, future)
            )
            i += 1
            if i % 200 == 0:
                self._stop.wait(0.002)  # pacing to keep the load moderate (about 100k records/s at most)

    def _done(self, value: bytes, future) -> None:
        with self._lock:
            error = future.exception()
            if error is None:
                meta = future.result()
                self.acked[value] = (meta.partition, meta.offset)
            else:
                self.failed[value] = error

    def wait_acked(self, count: int, timeout_s: float = 60) -> None:
        wait_for(lambda: len(self.acked) >= count, timeout_s, f"{count} acknowledged records (have {len(self.acked)})")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(timeout=90)
        self._producer.close()


def assert_every_acked_record_read_once(cluster: TestCluster, workload: Workload) -> None:
    """Read every partition from the start: each acknowledged value is there exactly once, at
    the offset it was acknowledged with."""
    total = len(workload.acked)
    logs = read_all(cluster.bootstrap, workload.topic, workload.partitions, total, timeout_s=60)
    seen: dict[bytes, int] = {}
    for partition, values in logs.items():
        for offset, value in enumerate(values):
            assert value not in seen, f"{value!r} read twice (partition {partition})"
            seen[value] = partition
            acked = workload.acked.get(value)
            if acked is not None:
                assert acked == (partition, offset), f"{value!r} acknowledged at {acked}, read at {(partition, offset)}"
    lost = [v for v in workload.acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"


def wait_replicas_identical(cluster: TestCluster, topic: str, timeout_s: float = 60) -> None:
    """Every replica of every partition reaches the same log end and high watermark, and
    their bytes below it are identical (CRC over the whole log)."""
    from data_plane.client import Admin

    def identical() -> bool:
        with Admin(cluster.bootstrap) as admin:
            logs = admin.describe_logs(topics=[topic], include_checksums=True)
            expected = sum(len(b.replicas) for b in admin.describe_topics([topic])[topic].partitions.values())
        states: dict[int, set[tuple[int, int, int]]] = {}
        count = 0
        for answer in logs.values():
            for p in answer.partitions:
                states.setdefault(p.partition, set()).add((p.log_end_offset, p.high_watermark, p.checksum_below_hw))
                count += 1
        return count == expected and all(len(s) == 1 and next(iter(s))[0] == next(iter(s))[1] for s in states.values())

    wait_for(identical, timeout_s, f"every replica of {topic} to hold identical logs")


def wait_full_isr(cluster: TestCluster, topic: str, timeout_s: float = 60) -> None:
    from data_plane.client import Admin

    def full() -> bool:
        with Admin(cluster.bootstrap) as admin:
            parts = admin.describe_topics([topic])[topic].partitions.values()
            return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts)

    wait_for(full, timeout_s, f"every replica of {topic} back in the ISR")


def isr(cluster: TestCluster, topic: str, partition: int) -> set[int]:
    from data_plane.client import Admin

    with Admin(cluster.bootstrap) as admin:
        return set(admin.describe_topics([topic])[topic].partitions[partition].isr)


# ---------------------------------------------------------------------------- SIGKILL


def kill_the_leader_under_load(cluster: TestCluster, topic: str, workload: Workload) -> None:
    """SIGKILL partition 0's leader once the workload is under way, wait for a new leader and
    more acknowledgements, then start the killed broker again."""
    workload.wait_acked(3_000)
    victim = cluster.broker(cluster.leader(topic, 0))
    cluster.kill(victim)
    killed_at = len(workload.acked)
    wait_for(lambda: cluster.leader(topic, 0) not in (-1, victim.node_id), 15, f"a new leader for {topic}-0")
    workload.wait_acked(killed_at + 3_000)
    cluster.restart(victim)


def test_sigkill_of_a_leader_under_load_loses_no_acknowledged_record(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic("kill", partitions=3, replication_factor=3, configs=TOPIC_CONFIG)
        workload = Workload(cluster, "kill", 3)
        try:
            kill_the_leader_under_load(cluster, "kill", workload)
            wait_full_isr(cluster, "kill")
            workload.wait_acked(len(workload.acked) + 1_000)
        finally:
            workload.stop()
        assert not workload.failed, f"{len(workload.failed)} sends failed, e.g. {next(iter(workload.failed.values()))}"
        assert_every_acked_record_read_once(cluster, workload)
        wait_replicas_identical(cluster, "kill")


def test_restart_of_every_broker_at_once_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic("all-down", partitions=2, replication_factor=3, configs=TOPIC_CONFIG)
        workload = Workload(cluster, "all-down", 2, delivery_timeout_ms=5_000, request_timeout_ms=2_000)
        try:
            workload.wait_acked(5_000)
            for broker in cluster.brokers:
                cluster.kill(broker)
        finally:
            workload.stop()
        for broker in cluster.brokers:
            cluster.restart(broker)
        cluster.wait_ready()
        cluster.wait_topic_ready("all-down", 2)
        assert_every_acked_record_read_once(cluster, workload)
        wait_replicas_identical(cluster, "all-down")


# ---------------------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_of_a_leader_gives_producers_no_error(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic("graceful", partitions=3, replication_factor=3, configs=TOPIC_CONFIG)
        workload = Workload(cluster, "graceful", 3)
        try:
            workload.wait_acked(2_000)
            leader = cluster.broker(cluster.leader("graceful", 0))
            cluster.stop_node(leader)  # SIGTERM: leaderships move before the process exits
            workload.wait_acked(len(workload.acked) + 2_000)
            cluster.restart(leader)
            wait_full_isr(cluster, "graceful")
        finally:
            workload.stop()
        assert not workload.failed, f"{len(workload.failed)} sends failed, e.g. {next(iter(workload.failed.values()))}"
        assert "controlled shutdown complete" in cluster.log_path(leader).read_text()
        assert_every_acked_record_read_once(cluster, workload)


# ---------------------------------------------------------------------------- links through proxies


class ReplicationLinks:
    """A Toxiproxy-API proxy on every follower-to-leader link: broker F reaches broker L's data
    plane through proxy ``b{F}-to-b{L}`` (``--peer-address``), so one link can be cut or
    slowed while every other stays up."""

    def __init__(self) -> None:
        from chaos.toxiproxy.launcher import start_toxiproxy

        self.server = start_toxiproxy(prefer_real=False)
        self.api = self.server.client()

    def configure(self, cluster: TestCluster) -> None:
        brokers = cluster.brokers
        ports = iter(cluster.spare_ports(len(brokers) * (len(brokers) - 1)))
        for follower in brokers:
            for leader in brokers:
                if follower is leader:
                    continue
                port = next(ports)
                self.api.create(upstream=leader.address, name=self.name(follower.node_id, leader.node_id), listen=f"{HOST}:{port}")
                follower.extra_args += ["--peer-address", f"{leader.node_id}={HOST}:{port}"]

    @staticmethod
    def name(follower: int, leader: int) -> str:
        return f"b{follower}-to-b{leader}"

    def proxy(self, follower: int, leader: int):
        return self.api.get_proxy(self.name(follower, leader))

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture()
def links() -> ReplicationLinks:
    proxies = ReplicationLinks()
    yield proxies
    proxies.stop()


def test_a_slow_follower_leaves_the_isr_and_rejoins_when_it_catches_up(tmp_path: Path, links: ReplicationLinks) -> None:
    broker_args = ["--replica-lag-time-max-ms", "1500"]
    with local_cluster(tmp_path, broker_args=broker_args, configure=links.configure) as cluster:
        cluster.create_topic("slow", partitions=1, replication_factor=3, configs=TOPIC_CONFIG)
        leader = cluster.leader("slow", 0)
        slow = next(b.node_id for b in cluster.brokers if b.node_id != leader)
        workload = Workload(cluster, "slow", 1)
        try:
            workload.wait_acked(1_000)
            # 2 KB/s towards the follower while the producer writes far more than that
            links.proxy(slow, leader).add_toxic(type="bandwidth", stream="downstream", attributes={"rate": 2})
            wait_for(lambda: slow not in isr(cluster, "slow", 0), 30, f"broker {slow} to leave the ISR")
            behind = len(workload.acked)
            workload.wait_acked(behind + 2_000)  # acks=all goes on with the two in-sync replicas
            links.proxy(slow, leader).destroy_toxic("bandwidth_downstream")
            wait_for(lambda: slow in isr(cluster, "slow", 0), 30, f"broker {slow} to rejoin the ISR")
        finally:
            workload.stop()
        assert not workload.failed
        assert_every_acked_record_read_once(cluster, workload)
        wait_replicas_identical(cluster, "slow")


def test_followers_idle_at_the_log_end_longer_than_the_lag_limit_stay_in_the_isr(tmp_path: Path, links: ReplicationLinks) -> None:
    """A fetch session names an idle partition in no round, so the leader sees no fetch of it.
    When records arrive after an idle stretch longer than replica.lag.time.max.ms, the
    followers still count as caught up until their sessions' last round: with every answer
    to them delayed 1 s, the ISR sweeps that run before they fetch the new records must not
    shrink them out (counting only their last fetch that named the partition would)."""
    import time

    from data_plane.client import Producer

    lag_ms = 3000
    with local_cluster(tmp_path, controllers=1, broker_args=["--replica-lag-time-max-ms", str(lag_ms)], configure=links.configure) as cluster:
        cluster.create_topic("idle", partitions=1, replication_factor=3, configs=TOPIC_CONFIG)
        leader = cluster.broker(cluster.leader("idle", 0))
        with Producer(cluster.bootstrap, acks="all") as producer:
            producer.send("idle", b"before", partition=0).result(30)
            wait_full_isr(cluster, "idle")
            for follower in (b.node_id for b in cluster.brokers if b is not leader):
                links.proxy(follower, leader.node_id).add_toxic(type="latency", stream="downstream", attributes={"latency": 1000})
            log_from = len(cluster.log_path(leader).read_text())
            time.sleep(2 * lag_ms / 1000)  # the idle stretch is what is tested, not a wait for a condition
            producer.send("idle", b"after", partition=0).result(30)
        assert isr(cluster, "idle", 0) == {b.node_id for b in cluster.brokers}
        assert "proposing ISR change" not in cluster.log_path(leader).read_text()[log_from:]


def test_a_paused_leader_is_fenced_and_its_unacknowledged_tail_truncated(tmp_path: Path, links: ReplicationLinks) -> None:
    from data_plane.client import Admin, Producer
    from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2

    session = ["--session-timeout-ms", "3000"]
    with local_cluster(tmp_path, controller_args=session, broker_args=session, configure=links.configure) as cluster:
        cluster.create_topic("zombie", partitions=1, replication_factor=3, configs=TOPIC_CONFIG)
        old = cluster.leader("zombie", 0)
        followers = [b.node_id for b in cluster.brokers if b.node_id != old]
        with Producer(cluster.bootstrap, acks="all") as producer:
            committed = [producer.send("zombie", f"c{i}".encode(), partition=0) for i in range(100)]
            producer.flush(30)
        assert all(f.exception() is None for f in committed)
        with Admin(cluster.bootstrap) as admin:
            old_epoch = admin.describe_topics(["zombie"])["zombie"].partitions[0].leader_epoch

        # cut both followers off the leader, then write a tail only the leader holds
        for f in followers:
            links.proxy(f, old).disable()
        with Producer(cluster.bootstrap, acks=1) as producer:
            tail = [producer.send("zombie", f"tail{i}".encode(), partition=0) for i in range(10)]
            producer.flush(30)
        assert all(f.exception() is None for f in tail), "acks=1 writes land on the leader alone"

        zombie = cluster.broker(old)
        cluster.signal(zombie, signal.SIGSTOP)  # paused past the session timeout
        try:
            wait_for(lambda: cluster.leader("zombie", 0) in followers, 20, "a new leader elected from the ISR")
            for f in followers:
                links.proxy(f, old).enable()
            with Producer(cluster.bootstrap, acks="all") as producer:
                after = [producer.send("zombie", f"a{i}".encode(), partition=0) for i in range(100)]
                producer.flush(30)
            assert all(f.exception() is None for f in after)
        finally:
            cluster.signal(zombie, signal.SIGCONT)

        # the old leader learns the new epoch, truncates its tail by leader epoch and catches up
        wait_replicas_identical(cluster, "zombie")
        values = read_all(cluster.bootstrap, "zombie", 1, 200)[0]
        assert values == [f"c{i}".encode() for i in range(100)] + [f"a{i}".encode() for i in range(100)]
        assert "truncated log" in cluster.log_path(zombie).read_text()

        # a request naming the old epoch is fenced
        with grpc.insecure_channel(zombie.address) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            request = broker_pb2.ProduceRequest(acks=1, timeout_ms=1000)
            part = request.topics.add(topic="zombie").partitions.add(partition=0, current_leader_epoch=old_epoch)
            part.records.add(value=b"stale")
            answer = stub.Produce(request, timeout=10).topics[0].partitions[0]
        assert answer.error_code == common_pb2.FENCED_LEADER_EPOCH, common_pb2.ErrorCode.Name(answer.error_code)
