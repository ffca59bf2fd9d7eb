"""The live demo workload of ``kraftlog cluster up``: a producer writing numbered records with
acks=all and a consumer reading them back, printing progress every second until Ctrl-C.

The consumer checks what it reads: per partition, the record numbers it sees must rise
(the producer numbers records per partition), so a lost, duplicated or reordered record
shows at once. Nothing is hidden by the counters: records that failed are split into
failed (the cluster said they were not written) and unknown (an attempt reached a broker
without a definite answer, so they may be in the log), and a partition with records
waiting but no acknowledgement for STALL_AFTER_S is named on every line until it moves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cli.output import plural
from data_plane.client.errors import KraftlogError
from server_common.errors import ErrorCode

DEMO_TOPIC = "demo"
# The demo writes a few MB/s for as long as it runs: its topic keeps a bounded tail (segments
# of 16 MiB, at most 64 MiB or one hour per partition) instead of the default seven days.
DEMO_RETENTION = {"retention.bytes": str(64 << 20), "retention.ms": str(3_600_000), "segment.bytes": str(16 << 20)}
DEMO_RETENTION_NOTE = "64 MiB or one hour"
REPORT_INTERVAL_S = 1.0
STALL_AFTER_S = 5.0
TOPIC_READY_TIMEOUT_S = 60.0
# How long the producer may go on delivering its queued records after Ctrl-C.
DRAIN_S = 10.0
# The demo producer's settings (tests run the very same producer across restarts).
DEMO_PRODUCER_SETTINGS: dict[str, object] = {"acks": "all", "linger_ms": 5}


@dataclass
class Progress:
    """Counters shared by the demo's threads; `line()` renders one progress line."""

    partitions: int
    produced: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    consumed: int = 0
    out_of_order: int = 0
    last_error: str = ""
    sent_by_partition: list[int] = field(default_factory=list)
    acked_by_partition: list[int] = field(default_factory=list)
    last_ack_s: list[float] = field(default_factory=list)  # time.monotonic() of the last answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        now = time.monotonic()
        self.sent_by_partition = [0] * self.partitions
        self.acked_by_partition = [0] * self.partitions
        self.last_ack_s = [now] * self.partitions

    def on_sent(self, partition: int) -> None:
        with self.lock:
            self.produced += 1
            self.sent_by_partition[partition] += 1

    def on_answer(self, partition: int, error: BaseException | None, now_s: float) -> None:
        """One record's outcome (from the producer's delivery callback)."""
        with self.lock:
            self.last_ack_s[partition] = now_s
            if error is None:
                self.acked += 1
                self.acked_by_partition[partition] += 1
                return
            if isinstance(error, KraftlogError) and error.outcome_unknown:
                self.unknown += 1
            else:
                self.failed += 1
            self.last_error = f"p{partition}: {error}"

    def on_send_error(self, error: BaseException) -> None:
        """`send` itself refused a record (buffer full for max_block_ms, producer closed)."""
        with self.lock:
            self.failed += 1
            self.last_error = f"send: {error}"

    def stalled(self, now_s: float, after_s: float = STALL_AFTER_S) -> dict[int, float]:
        """Partitions with records awaiting an answer and none answered for `after_s`:
        {partition: seconds since its last answer}."""
        with self.lock:
            return {
                p: now_s - self.last_ack_s[p]
                for p in range(self.partitions)
                if now_s - self.last_ack_s[p] >= after_s and self.sent_by_partition[p] > self.acked_by_partition[p]
            }

    def line(self, elapsed_s: float, previous_acked: int, previous_consumed: int, now_s: float) -> str:
        stalled = self.stalled(now_s)
        with self.lock:
            acked, consumed = self.acked, self.consumed
            text = (
                f"t={elapsed_s:6.1f}s  acked={acked:,} ({acked - previous_acked:,}/s)  "
                f"consumed={consumed:,} ({consumed - previous_consumed:,}/s)  failed={self.failed}  "
                f"unknown={self.unknown}  out_of_order={self.out_of_order}"
            )
            if stalled:
                text += "  stalled=" + ",".join(f"p{p}({s:.0f}s)" for p, s in sorted(stalled.items()))
            if self.last_error:
                text += f"  last_error={self.last_error[:160]}"
        return text


def ensure_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    """Create the demo topic (or keep the existing one) and wait until the brokers' metadata
    gives every partition a leader, so the workload starts without the producer's "waiting
    for the topic" warning telling the person at the terminal to create it."""
    from data_plane.client import Admin
    from metadata_quorum.controller_client import ControllerClient, ControllerError
    from server_common.waiting import wait_for

    with Admin(bootstrap) as admin:
        controllers = admin.controller_endpoints()
        with ControllerClient(controllers) as client:
            try:
                configs = dict(DEMO_RETENTION, **({"min.insync.replicas": "2"} if replication_factor >= 3 else {}))
                client.create_topic(topic, partitions, replication_factor, configs)
                print(f"created topic {topic} ({plural(partitions, 'partition')}, replication factor {replication_factor}; "
                      f"keeps the last {DEMO_RETENTION_NOTE} of each partition)")
            except ControllerError as exc:
                if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
                print(f"using existing topic {topic}")
        wait_for(lambda: all(p.leader >= 0 for p in admin.describe_topics([topic])[topic].partitions.values()),
                 TOPIC_READY_TIMEOUT_S, f"every partition of {topic} to have a leader in the brokers' metadata")


def produce_numbered(producer, topic: str, partitions: int, progress: Progress, stop: threading.Event) -> int:
    """Sends record numbers 0, 1, 2, ... to each partition in turn until `stop`; returns how
    many records were handed to the producer. A refused `send` is counted and shown."""
    n = 0
    while not stop.is_set():
        partition = n % partitions

        def answered(error, _metadata, partition=partition) -> None:
            progress.on_answer(partition, error, time.monotonic())

        try:
            producer.send(topic, f"{n // partitions}".encode(), partition=partition, on_delivery=answered)
        except KraftlogError as error:
            progress.on_send_error(error)
            if error.code == "BUFFER_EXHAUSTED":
                continue  # send blocked for max_block_ms: brokers are not taking records
            return n  # the producer cannot go on (closed, or its producer id was refused)
        progress.on_sent(partition)
        n += 1
    return n


def _produce(bootstrap: str, topic: str, partitions: int, progress: Progress, stop: threading.Event, drain_s: Callable[[], float]) -> None:
    from data_plane.client import Producer

    producer = Producer(bootstrap, **DEMO_PRODUCER_SETTINGS)
    try:
        produce_numbered(producer, topic, partitions, progress, stop)
    finally:
        producer.close(timeout=drain_s())  # what is still undelivered then counts as failed or unknown


def _consume(bootstrap: str, topic: str, partitions: int, progress: Progress, stop: threading.Event) -> None:
    from data_plane.client import Consumer

    last_seen: dict[int, int] = {}
    with Consumer(bootstrap) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_end()
        while not stop.is_set():
            records = consumer.poll(timeout_ms=500)
            with progress.lock:
                for record in records:
                    number = int(record.value)
                    if number <= last_seen.get(record.partition, -1):
                        progress.out_of_order += 1
                    last_seen[record.partition] = number
                    progress.consumed += 1


def run_demo(bootstrap: str, partitions: int, replication_factor: int, cluster_running: Callable[[], bool], topic: str = DEMO_TOPIC) -> None:
    """Print one progress line a second until KeyboardInterrupt, or until ``cluster_running``
    says every process of the cluster has exited (``kraftlog cluster down`` from another shell):
    then there is nothing to wait for, and the producer gives up its undelivered records at once
    instead of draining them for DRAIN_S."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    progress = Progress(partitions)
    stop = threading.Event()

    def drain_s() -> float:
        return DRAIN_S if cluster_running() else 0.0

    workers = [
        threading.Thread(target=_produce, args=(bootstrap, topic, partitions, progress, stop, drain_s), name="demo-producer", daemon=True),
        threading.Thread(target=_consume, args=(bootstrap, topic, partitions, progress, stop), name="demo-consumer", daemon=True),
    ]
    for worker in workers:
        worker.start()
    print("producing and consuming; press Ctrl-C to stop")
    started = time.monotonic()
    previous_acked = previous_consumed = 0
    try:
        while cluster_running():
            stop.wait(REPORT_INTERVAL_S)
            now = time.monotonic()
            print(progress.line(now - started, previous_acked, previous_consumed, now), flush=True)
            previous_acked, previous_consumed = progress.acked, progress.consumed
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=DRAIN_S + 5)
