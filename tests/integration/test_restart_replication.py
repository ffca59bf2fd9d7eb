"""Full restarts of a 3-broker cluster under load: every replica keeps replicating.

The failure this guards against was intermittent (one restart in several): after a restart a
follower stayed out of the ISR with its lag never shrinking and nothing in its log, an RF=3
topic silently running as RF=2. Hence ten restarts, each with two requirements:

- within 10 s of the cluster being back (every broker registered and unfenced), every
  partition has its full ISR again;
- once the producer stops, every replica holds the same log end, the same high watermark
  and identical bytes below it (CRC over the log, from DescribeLogs).

A failure names the partitions and the replicas that are behind.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from data_plane.client import Admin, Producer
from data_plane.client.offset_lookup import LATEST
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_replication import TOPIC_CONFIG

pytestmark = pytest.mark.integration

TOPIC = "restarts"
PARTITIONS = 12
RESTARTS = 10
FULL_ISR_DEADLINE_S = 10.0
IDENTICAL_DEADLINE_S = 15.0
LONG_SESSION_MS = 60_000


class SteadyLoad:
    """An idempotent acks=all producer writing about 2,500 small records a second over every
    partition while running (a bounded rate: the point is traffic while brokers stop and
    start, not a backlog that outlives a full outage). Paused, it has nothing in flight."""

    def __init__(self, cluster: TestCluster) -> None:
        self.acked = 0
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._sending = threading.Lock()  # held while a round of sends is being handed over
        self._closed = threading.Event()
        self._producer = Producer(cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5, delivery_timeout_ms=120_000)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._closed.wait(0.02):
            with self._sending:
                if not self._running.is_set():
                    continue
                for _ in range(50):
                    self._producer.send(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS).add_done_callback(self._done)
                    i += 1

    def _done(self, future) -> None:
        if future.exception() is None:
            with self._lock:
                self.acked += 1

    def resume(self) -> None:
        self._running.set()

    def pause(self) -> None:
        """Stop sending and wait until everything sent is answered."""
        self._running.clear()
        with self._sending:  # a round that saw the flag set has finished handing its records over
            self._producer.flush(timeout=120)

    def wait_progress(self, more: int, timeout_s: float = 60) -> None:
        target = self.acked + more
        wait_for(lambda: self.acked >= target, timeout_s, f"{more} more acknowledged records (have {self.acked}, want {target})")

    def close(self) -> None:
        self._closed.set()
        self._thread.join(10)
        self._producer.close()


def isr_gaps(cluster: TestCluster) -> list[str]:
    """Partitions without a leader or with a replica outside the ISR."""
    with Admin(cluster.bootstrap) as admin:
        partitions = admin.describe_topics([TOPIC])[TOPIC].partitions
    return [
        f"{TOPIC}-{index}: leader {p.leader}, isr {sorted(p.isr)}, missing {sorted(set(p.replicas) - set(p.isr))}"
        for index, p in sorted(partitions.items())
        if p.leader < 0 or set(p.isr) != set(p.replicas)
    ]


def replica_differences(cluster: TestCluster) -> list[str]:
    """Partitions whose replicas differ in log end, high watermark or bytes below it, or that
    are missing a replica's answer (a broker that does not answer is a difference, not a
    smaller comparison)."""
    with Admin(cluster.bootstrap) as admin:
        logs = admin.describe_logs(topics=[TOPIC], include_checksums=True)
        partitions = admin.describe_topics([TOPIC])[TOPIC].partitions
    seen: dict[int, dict[int, tuple[int, int, int]]] = {}
    for broker_id, answer in logs.items():
        for p in answer.partitions:
            seen.setdefault(p.partition, {})[broker_id] = (p.log_end_offset, p.high_watermark, p.checksum_below_hw)
    problems = []
    for index, p in sorted(partitions.items()):
        states = seen.get(index, {})
        missing = sorted(set(p.replicas) - set(states))
        values = set(states.values())
        if missing or len(values) != 1 or any(leo != hw for leo, hw, _ in values):
            detail = ", ".join(f"broker {b}: leo {leo} hw {hw} crc {crc}" for b, (leo, hw, crc) in sorted(states.items()))
            problems.append(f"{TOPIC}-{index}: {detail}" + (f"; no answer from {missing}" if missing else ""))
    return problems


def require_within(check, deadline_s: float, what: str) -> None:
    """Wait until ``check`` (a list of problems) is empty; the failure names what is still wrong."""

    def clean() -> bool:
        problems = check()
        if problems:
            raise AssertionError("; ".join(problems))
        return True

    wait_for(clean, deadline_s, what)


def test_ten_full_restarts_under_load_leave_every_replica_in_sync_and_identical(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, configs=TOPIC_CONFIG)
        load = SteadyLoad(cluster)
        try:
            for restart in range(1, RESTARTS + 1):
                load.resume()
                load.wait_progress(300)
                cluster.stop()
                cluster.start()
                cluster.wait_ready()
                require_within(lambda: isr_gaps(cluster), FULL_ISR_DEADLINE_S, f"restart {restart}: full ISR")
                load.wait_progress(300)
                load.pause()
                require_within(lambda: replica_differences(cluster), IDENTICAL_DEADLINE_S, f"restart {restart}: identical replicas")
        finally:
            load.close()


def test_brokers_restarted_while_their_registrations_look_alive_take_them_over_at_once(tmp_path: Path) -> None:
    """Controllers stopped first, brokers killed while no controller could see them go: the
    restarted controllers grant every registered broker a full session, so the old
    registrations still look alive when the new processes register. Each new incarnation
    replaces its old registration at once (no DUPLICATE_BROKER_REGISTRATION while producers
    wait), and the partitions come back with their full ISR. A long session timeout keeps
    the old registrations alive-looking however slowly the new processes start."""
    with local_cluster(tmp_path, controller_args=["--session-timeout-ms", str(LONG_SESSION_MS)]) as cluster:
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3, configs=TOPIC_CONFIG)
        for controller in cluster.controllers:
            cluster.stop_node(controller)
        for broker in cluster.brokers:
            cluster.kill(broker)
        log_sizes = {node.name: cluster.log_path(node).stat().st_size for node in cluster.nodes}

        def since_restart(node) -> str:
            with open(cluster.log_path(node), "rb") as f:
                f.seek(log_sizes[node.name])
                return f.read().decode(errors="replace")

        cluster.start()
        # Metadata replayed from the controllers' logs shows the old registrations at once,
        # so readiness alone does not prove anything registered: wait for each new process.
        wait_for(lambda: all("registered with the controller" in since_restart(b) for b in cluster.brokers), LONG_SESSION_MS / 1000 + 30,
                 "every restarted broker to register")
        cluster.wait_ready()
        require_within(lambda: isr_gaps(cluster), FULL_ISR_DEADLINE_S, "full ISR after the restart")
        refused = [b.name for b in cluster.brokers if "registration refused" in since_restart(b)]
        assert not refused, f"registration refused after the restart on {refused}: a new incarnation must take over at once"
        takeovers = sum(since_restart(c).count("new broker incarnation replaces a live registration") for c in cluster.controllers)
        assert takeovers >= 1, "no registration was taken over: the scenario did not leave a live-looking registration behind"


@dataclass(frozen=True)
class Answer:
    partition: int
    high_watermark: int
    sent: float  # time.monotonic() when the request left
    received: float


class HighWatermarkObserver:
    """Asks every broker for every partition's high watermark (ListOffsets LATEST, as a
    consumer checking its lag does) over and over, one thread per broker, each on a channel
    of its own that reconnects within 50 ms of the broker listening again (a client's usual
    reconnect backoff could sleep through the moment a restarted broker answers wrongly).
    Errors (not the leader, a leader still establishing its HW, broker down) are expected
    while the cluster restarts and are skipped; every answer is kept, in the order received."""

    def __init__(self, cluster: TestCluster) -> None:
        self.answers: list[Answer] = []  # list.extend is atomic
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(b.address,), daemon=True) for b in cluster.brokers]
        for thread in self._threads:
            thread.start()

    def _run(self, address: str) -> None:
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.initial_reconnect_backoff_ms", 20), ("grpc.max_reconnect_backoff_ms", 50)]
        request = broker_pb2.ListOffsetsRequest(topics=[broker_pb2.ListOffsetsTopic(
            topic=TOPIC, partitions=[broker_pb2.ListOffsetsPartition(partition=p, timestamp=LATEST) for p in range(PARTITIONS)],
        )])
        with grpc.insecure_channel(address, options=options) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            while not self._closed.wait(0.005):
                sent = time.monotonic()
                try:
                    response = stub.ListOffsets(request, timeout=0.5)
                except grpc.RpcError:
                    continue
                received = time.monotonic()
                self.answers.extend(
                    Answer(a.partition, a.offset, sent, received) for t in response.topics for a in t.partitions if a.error_code == common_pb2.NONE
                )

    def backwards(self) -> list[str]:
        """Answers lower than one received before their request was sent (answers that
        overlap in time may come from two leaders, and their order is not known)."""
        by_receipt = sorted(self.answers, key=lambda a: a.received)
        highest: dict[int, int] = {}
        problems = []
        known = 0
        for answer in sorted(self.answers, key=lambda a: a.sent):
            while known < len(by_receipt) and by_receipt[known].received < answer.sent:
                earlier = by_receipt[known]
                highest[earlier.partition] = max(highest.get(earlier.partition, 0), earlier.high_watermark)
                known += 1
            if answer.high_watermark < highest.get(answer.partition, 0):
                problems.append(f"{TOPIC}-{answer.partition}: high watermark {answer.high_watermark} after {highest[answer.partition]}")
        return problems

    def close(self) -> None:
        self._closed.set()
        for thread in self._threads:
            thread.join(10)


def test_high_watermark_never_goes_down_across_a_sigkill_of_the_whole_cluster(tmp_path: Path) -> None:
    """Every controller and broker SIGKILLed at once under load, then all restarted. The
    controllers replay their journal, so each restarted broker first sees itself leading in
    the epoch it led before the crash, with the HW of its checkpoint (written every few
    seconds, so lower than the HW it had published). Answering with that HW would show
    consumers the HW going down; the leader must answer OFFSET_NOT_AVAILABLE instead until
    its HW reaches its log end at the time it took the leadership."""
    with local_cluster(tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, configs=TOPIC_CONFIG)
        load = SteadyLoad(cluster)
        observer = HighWatermarkObserver(cluster)
        try:
            load.resume()
            load.wait_progress(2_000)
            seen_before = len(observer.answers)
            assert seen_before > 0, "the observer got no answer before the crash"
            cluster.kill_all()
            cluster.start()
            cluster.wait_ready()
            load.wait_progress(1_000)
            wait_for(lambda: len(observer.answers) > seen_before + PARTITIONS * 20, 30, "answers after the restart")
        finally:
            observer.close()
            load.close()
        assert not observer.backwards(), "; ".join(observer.backwards()[:10])
