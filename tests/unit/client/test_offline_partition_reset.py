"""A consumer keeps reading the partitions whose offset reset was answered while another's
leader cannot answer (here: ListOffsets for it fails with LEADER_NOT_AVAILABLE, as when its
only replica's broker is down): poll returns the others' records, position() of the stuck
one raises after its timeout, the stuck one warns (not once per poll) and is retried in the
background, and once its leader answers it is read from the reset position. Before, the
whole poll raised REQUEST_TIMED_OUT for the one partition. For assign() and group consumers,
in both fetch modes. Likewise a position resumed from a commit whose check against the leader's
log (KIP-320, OffsetForLeaderEpoch) goes unanswered for one partition: before, no partition was
read at all."""

from __future__ import annotations

import time

import pytest

from data_plane.client import Consumer, KraftlogError, Producer
from data_plane.client import consumer as consumer_module
from data_plane.client.consumer import RESET_BACKOFF_S_MAX, RESET_WARN_INTERVAL_S
from kraftlog_proto import common_pb2
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_coordinator import FakeCoordinator

pytestmark = pytest.mark.timeout(60)
PARTITIONS = 3
STUCK = ("t", 1)
PER_PARTITION = 5


@pytest.fixture
def broker():
    with FakeBroker({"t": PARTITIONS}) as fake:
        with Producer(fake.address, linger_ms=5) as producer:
            for i in range(PARTITIONS * PER_PARTITION):
                producer.send("t", b"%d" % i, partition=i % PARTITIONS)
            producer.flush(10)
        fake.list_offsets_error[STUCK] = common_pb2.LEADER_NOT_AVAILABLE
        yield fake


class LogRecorder:
    """Stands in for the consumer module's logger: structlog's capture_logs misses a logger
    cached under an earlier configuration (another test may have configured logging first)."""

    def __init__(self) -> None:
        self.entries: list[dict] = []

    def __getattr__(self, level: str):
        return lambda event, **fields: self.entries.append({"log_level": level, "event": event, **fields})


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    recorder = LogRecorder()
    monkeypatch.setattr(consumer_module, "log", recorder)
    return recorder.entries


def read_until(consumer: Consumer, seen: set, wanted: set, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not wanted <= seen and time.monotonic() < deadline:
        seen.update((r.partition, r.offset) for r in consumer.poll(50))
    assert wanted <= seen, sorted(wanted - seen)


def every_record(partitions) -> set:
    return {(p, o) for p in partitions for o in range(PER_PARTITION)}


def check_reads_around_the_stuck_partition(consumer: Consumer, broker: FakeBroker, logs: list[dict]) -> None:
    seen: set = set()
    started = time.monotonic()
    read_until(consumer, seen, every_record([0, 2]))
    polled_until = time.monotonic() + 1.0
    while time.monotonic() < polled_until:  # many polls while the partition stays stuck
        seen.update((r.partition, r.offset) for r in consumer.poll(20))
    elapsed_s = time.monotonic() - started
    assert not {o for p, o in seen if p == STUCK[1]}
    warnings = [e for e in logs if e["log_level"] == "warning" and e.get("partition") == STUCK[1]]
    assert 1 <= len(warnings) <= 1 + elapsed_s / RESET_WARN_INTERVAL_S, warnings
    assert warnings[0]["topic"] == "t" and "LEADER_NOT_AVAILABLE" in warnings[0]["error"]
    backoff_doublings = 4  # 0.1, 0.2, 0.4, 0.8 s, then RESET_BACKOFF_S_MAX
    assert broker.list_offsets_asked[STUCK] <= 1 + backoff_doublings + elapsed_s / RESET_BACKOFF_S_MAX, "retried with backoff, not per poll"
    with pytest.raises(KraftlogError) as err:
        consumer.position(STUCK, timeout_ms=300)
    assert err.value.code == "REQUEST_TIMED_OUT" and "no position for t-1" in str(err.value)
    del broker.list_offsets_error[STUCK]  # its leader is back
    read_until(consumer, seen, every_record(range(PARTITIONS)))
    assert consumer.position(STUCK) == PER_PARTITION


@pytest.mark.parametrize("fetch_mode", ["fetch", "stream"])
def test_an_assigned_consumer_reads_the_others_while_one_reset_is_unanswered(broker, fetch_mode, logs):
    with Consumer(broker.address, auto_offset_reset="earliest", fetch_mode=fetch_mode, fetch_max_wait_ms=50) as consumer:
        consumer.assign([("t", p) for p in range(PARTITIONS)])
        check_reads_around_the_stuck_partition(consumer, broker, logs)


@pytest.mark.parametrize("fetch_mode", ["fetch", "stream"])
def test_a_group_member_reads_the_others_while_one_reset_is_unanswered(broker, fetch_mode, logs):
    coordinator = FakeCoordinator({"t": PARTITIONS})
    server = coordinator.start()
    try:
        with Consumer(f"{broker.address},{coordinator.address}", group_id="g", auto_offset_reset="earliest",
                      fetch_mode=fetch_mode, fetch_max_wait_ms=50) as consumer:
            consumer.subscribe(["t"])
            check_reads_around_the_stuck_partition(consumer, broker, logs)
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize("fetch_mode", ["fetch", "stream"])
def test_an_unanswered_position_check_of_one_partition_holds_up_no_other(broker, fetch_mode):
    del broker.list_offsets_error[STUCK]  # no reset here: every position comes from a commit
    broker.epoch_end_error[STUCK] = common_pb2.LEADER_NOT_AVAILABLE
    with Consumer(broker.address, auto_offset_reset="none", fetch_mode=fetch_mode, fetch_max_wait_ms=50) as consumer:
        consumer.assign([("t", p) for p in range(PARTITIONS)])
        for p in range(PARTITIONS):
            consumer._seek_committed(("t", p), 0, broker.leader_epoch)  # as a group member resuming from its commits
        seen: set = set()
        read_until(consumer, seen, every_record([0, 2]))
        assert not {o for p, o in seen if p == STUCK[1]}
        del broker.epoch_end_error[STUCK]
        read_until(consumer, seen, every_record(range(PARTITIONS)))


def test_auto_offset_reset_none_still_raises_at_once(broker):
    with Consumer(broker.address, auto_offset_reset="none") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(KraftlogError) as err:
            consumer.poll(10)
        assert err.value.code == "NO_POSITION"
        with pytest.raises(KraftlogError) as err:
            consumer.position(("t", 0))
        assert err.value.code == "NO_POSITION"
