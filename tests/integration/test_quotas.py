"""Client quotas on a real cluster (docs/quotas.md): a producer and a consumer held to their
byte-rate quotas, answers carrying throttle_time_ms, a client that ignores it held by the
broker, overrides beating defaults, a quota change reaching a live client, the throttle
metric, and the `kraftlog quotas` commands.

Rates are measured after a new client's first burst (it may send ``samples - 1`` windows'
worth before its first throttle, as in Kafka), over whole multiples of the measured window:
the expiry of samples makes a throttled client's traffic come in pulses with that period,
so a measurement of whole periods does not depend on where it starts. The quotas here are
far below what this machine does even when loaded.
"""

from __future__ import annotations

import json
import os
import threading
import time

import grpc
import pytest

from cli.main import main
from data_plane.client import Consumer, Producer
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.client_id import CLIENT_ID_METADATA_KEY
from server_common.local_cluster import free_ports
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration

KIB = 1024
QUOTA = 256 * KIB  # bytes per second: far below what one broker does on this machine
WINDOW_NUM, WINDOW_MS = 11, 200  # Kafka's 11 samples, shorter ones: 2.2 s measured, each request a small part of it
MEASURE_S = 4 * WINDOW_NUM * WINDOW_MS / 1000  # whole periods of the pulses
# a new client's first burst: the quota of the samples - 1 windows, the request that goes over and those in flight
BURST_BYTES = (WINDOW_NUM - 1) * WINDOW_MS / 1000 * QUOTA + 3 * 64 * KIB
RECORD = os.urandom(KIB)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    def metrics_port(c: TestCluster) -> None:
        c.broker(1).extra_args += ["--metrics-port", str(free_ports(1)[0])]

    broker_args = ["--quota-window-num", str(WINDOW_NUM), "--quota-window-size-ms", str(WINDOW_MS)]
    with local_cluster(tmp_path_factory.mktemp("quotas"), controllers=1, brokers=1, broker_args=broker_args, configure=metrics_port) as c:
        yield c


def set_quota(cluster: TestCluster, entity: tuple[str | None, str | None], **values: float) -> None:
    with cluster.controller_client() as client:
        client.alter_client_quotas(entity, set_values=values)


def remove_quota(cluster: TestCluster, entity: tuple[str | None, str | None], *keys: str) -> None:
    with cluster.controller_client() as client:
        client.alter_client_quotas(entity, remove_keys=keys)


def raw_produce(cluster: TestCluster, topic: str, client_id: str, size: int) -> broker_pb2.ProduceResponse:
    """One Produce of ``size`` bytes sent as a client that ignores throttling would."""
    request = broker_pb2.ProduceRequest(acks=1, timeout_ms=10_000, topics=[broker_pb2.TopicProduceData(
        topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=0, records=[{"value": os.urandom(size)}])])])
    with grpc.insecure_channel(cluster.bootstrap.split(",")[0]) as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Produce(request, metadata=[(CLIENT_ID_METADATA_KEY, client_id)], timeout=30)
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response
    return response


def wait_committed(cluster: TestCluster, client_id: str) -> None:
    """Until the controllers list a quota for ``client_id`` (brokers follow within moments)."""
    with cluster.controller_client() as client:
        wait_for(lambda: client.describe_client_quotas(client_id=client_id).entries, 10, "the quota committed")


def fill(cluster: TestCluster, topic: str) -> None:
    """``topic`` with 6 MiB in partition 0: more than a consumer's measurement reads."""
    cluster.create_topic(topic)
    with Producer(cluster.bootstrap, acks=1, client_id="filler") as producer:
        for _ in range(384):
            producer.send_batch(topic, 0, [RECORD] * 16)
        producer.flush()


class Traffic:
    """(time, bytes) of every acknowledgement or receipt, and the rate over whole periods
    once the first burst is over."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[float, int]] = []
        self.measure_from: float | None = None  # when the total passed BURST_BYTES

    def add(self, size: int) -> None:
        with self._lock:
            self.events.append((time.monotonic(), size))
            if self.measure_from is None and sum(n for _, n in self.events) > BURST_BYTES:
                self.measure_from = time.monotonic()

    def total(self) -> int:
        with self._lock:
            return sum(size for _, size in self.events)

    def measured(self) -> bool:
        return self.measure_from is not None and time.monotonic() > self.measure_from + MEASURE_S

    def rate(self) -> float:
        """Bytes per second in [measure_from, measure_from + MEASURE_S)."""
        assert self.measure_from is not None, f"only {self.total()} bytes, expected more than {BURST_BYTES}"
        with self._lock:
            return sum(n for at, n in self.events if self.measure_from < at <= self.measure_from + MEASURE_S) / MEASURE_S


def produce_until(producer: Producer, topic: str, acked: Traffic, done) -> None:
    """Send 16 KiB batches as fast as the producer takes them until ``done()``."""
    values = [RECORD] * 16
    while not done():
        future = producer.send_batch(topic, 0, values)
        future.add_done_callback(lambda f: acked.add(16 * KIB) if f.exception() is None else None)


def held_rate(cluster: TestCluster, topic: str, client_id: str) -> float:
    """The producer's acknowledged bytes per second while it sends as fast as it can."""
    acked = Traffic()
    with Producer(cluster.bootstrap, acks=1, client_id=client_id, batch_size=16 * KIB, buffer_memory=64 * KIB, linger_ms=0) as producer:
        produce_until(producer, topic, acked, acked.measured)
        producer.flush()
    return acked.rate()


def test_a_producer_is_held_to_its_byte_rate_and_told_the_throttle_time(cluster: TestCluster) -> None:
    cluster.create_topic("produce-quota")
    set_quota(cluster, (None, "quota-producer"), producer_byte_rate=QUOTA)
    wait_for(lambda: raw_produce(cluster, "produce-quota", "quota-producer", 200 * KIB).throttle_time_ms > 0, 15,
             "the broker throttles client id quota-producer")
    rate = held_rate(cluster, "produce-quota", "quota-producer")
    assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, f"{rate / KIB:.0f} KiB/s against a quota of {QUOTA / KIB:.0f} KiB/s"

    # the answer says how long to wait; a client that sends anyway is held that long
    first = raw_produce(cluster, "produce-quota", "quota-producer", 800 * KIB)  # more than a whole window's quota
    assert first.throttle_time_ms > 0
    started = time.monotonic()
    raw_produce(cluster, "produce-quota", "quota-producer", 1)
    assert time.monotonic() - started >= first.throttle_time_ms / 1000 * 0.9
    # negative control: another client id has no quota and is never throttled
    assert raw_produce(cluster, "produce-quota", "someone-else", 200 * KIB).throttle_time_ms == 0

    families = scrape(int(cluster.broker(1).extra_args[-1]))
    assert value(families, "kraftlog_throttle_time_seconds_count", quota="producer_byte_rate") > 0


@pytest.mark.parametrize("fetch_mode", ["fetch", "stream"])
def test_a_consumer_is_held_to_its_byte_rate(cluster: TestCluster, fetch_mode: str) -> None:
    topic = f"fetch-quota-{fetch_mode}"
    fill(cluster, topic)
    client_id = f"quota-consumer-{fetch_mode}"
    set_quota(cluster, (None, client_id), consumer_byte_rate=QUOTA)
    wait_committed(cluster, client_id)
    received = Traffic()
    with Consumer(cluster.bootstrap, client_id=client_id, fetch_mode=fetch_mode, fetch_max_bytes=64 * KIB,
                  max_partition_fetch_bytes=64 * KIB, stream_message_bytes=64 * KIB, stream_window_messages=2) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek((topic, 0), 0)
        while not received.measured():
            size = sum(len(r.value) for r in consumer.poll(timeout_ms=500))
            if size:
                received.add(size)
    rate = received.rate()
    assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, f"{rate / KIB:.0f} KiB/s against a quota of {QUOTA / KIB:.0f} KiB/s ({fetch_mode})"


def test_overrides_beat_defaults(cluster: TestCluster) -> None:
    """Kafka's order: user (here every call is User:ANONYMOUS) beats the client-id default,
    a client id's own quota beats the client-id default."""
    cluster.create_topic("precedence")
    set_quota(cluster, (None, ""), producer_byte_rate=1000)  # every client id: 1000 B/s
    set_quota(cluster, (None, "vip"), producer_byte_rate=100 * 1024 * KIB)
    try:
        wait_for(lambda: raw_produce(cluster, "precedence", "ordinary", 100 * KIB).throttle_time_ms > 0, 15, "the default applies")
        assert raw_produce(cluster, "precedence", "vip", 100 * KIB).throttle_time_ms == 0
        set_quota(cluster, ("ANONYMOUS", None), producer_byte_rate=100 * 1024 * KIB)
        wait_for(lambda: raw_produce(cluster, "precedence", "ordinary-2", 100 * KIB).throttle_time_ms == 0, 15,
                 "the user quota beats the client-id default")
        remove_quota(cluster, ("ANONYMOUS", None), "producer_byte_rate")
        wait_for(lambda: raw_produce(cluster, "precedence", "ordinary-3", 100 * KIB).throttle_time_ms > 0, 15,
                 "the client-id default again once the user quota is gone")
    finally:
        remove_quota(cluster, (None, ""), "producer_byte_rate")
        remove_quota(cluster, (None, "vip"), "producer_byte_rate")


def test_a_quota_change_reaches_a_live_producer(cluster: TestCluster) -> None:
    """At 32 KiB/s, 4 MiB would take two minutes: once the quota is raised, it takes seconds."""
    cluster.create_topic("live-change")
    set_quota(cluster, (None, "live"), producer_byte_rate=32 * KIB)
    wait_for(lambda: raw_produce(cluster, "live-change", "live", 64 * KIB).throttle_time_ms > 0, 15, "the quota applies")
    acked = Traffic()
    stop = threading.Event()
    with Producer(cluster.bootstrap, acks=1, client_id="live", batch_size=16 * KIB, buffer_memory=128 * KIB, linger_ms=0) as producer:
        sender = threading.Thread(target=produce_until, args=(producer, "live-change", acked, stop.is_set), daemon=True)
        sender.start()
        try:
            wait_for(lambda: acked.total() > 0, 15, "the producer sends under its quota")
            set_quota(cluster, (None, "live"), producer_byte_rate=64 * 1024 * KIB)
            before = acked.total()
            wait_for(lambda: acked.total() - before > 4 * 1024 * KIB, 40, "4 MiB acknowledged after the quota was raised")
        finally:
            stop.set()
            sender.join(timeout=30)


def test_metadata_answers_carry_the_request_rate_throttle(cluster: TestCluster) -> None:
    set_quota(cluster, (None, "chatty"), request_rate=5)
    with grpc.insecure_channel(cluster.bootstrap.split(",")[0]) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)

        def throttled() -> bool:
            answers = [stub.Metadata(broker_pb2.MetadataRequest(), metadata=[(CLIENT_ID_METADATA_KEY, "chatty")], timeout=30)
                       for _ in range(15)]
            return any(a.throttle_time_ms > 0 for a in answers)

        wait_for(throttled, 30, "a Metadata answer to client id chatty throttled")
        calm = stub.Metadata(broker_pb2.MetadataRequest(), metadata=[(CLIENT_ID_METADATA_KEY, "calm")], timeout=30)
        assert calm.throttle_time_ms == 0


def test_quotas_cli_sets_describes_and_removes(cluster: TestCluster, capsys: pytest.CaptureFixture) -> None:
    def kraftlog(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--bootstrap", cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, out, err

    def described(*args: str) -> list[dict]:
        return [e for e in json.loads(kraftlog("quotas", "describe", "--json", *args)[1]) if e["user"] == "alice" or e["client_id"] == "<default>"]

    assert kraftlog("quotas", "set", "--user", "alice", "--client-id", "app", "--producer-byte-rate", "1MiB", "--request-rate", "50")[0] == 0
    assert kraftlog("quotas", "set", "--default", "--consumer-byte-rate", "2MB")[0] == 0
    assert described() == [{"user": "alice", "client_id": "app", "values": {"producer_byte_rate": 1048576.0, "request_rate": 50.0}},
                           {"user": None, "client_id": "<default>", "values": {"consumer_byte_rate": 2e6}}]
    code, table, _ = kraftlog("quotas", "describe", "--user", "alice")
    assert code == 0 and "alice" in table and "1048576" in table and "<default>" not in table
    code, _, err = kraftlog("quotas", "set", "--user", "alice", "--producer-byte-rate", "1MiB", "--request-rate", "99999999999999999999")
    assert code == 1 and "request_rate must be a number of requests per second" in err and "INVALID_REQUEST" in err
    code, _, err = kraftlog("quotas", "set", "--producer-byte-rate", "1MiB")
    assert code == 1 and "name the entity" in err
    code, out, _ = kraftlog("quotas", "remove", "--user", "alice", "--client-id", "app")
    assert code == 0 and out.strip() == "removed producer_byte_rate, request_rate for user alice, client id app"  # not the rate it never had
    assert kraftlog("quotas", "remove", "--default")[0] == 0
    assert described() == []
    code, out, _ = kraftlog("quotas", "remove", "--user", "alice", "--client-id", "app")
    assert code == 0 and "user alice, client id app has no quotas: nothing to remove" in out
