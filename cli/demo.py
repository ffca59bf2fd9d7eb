"""The live demo workload of ``kraftlog cluster up``: a producer writing numbered records with
acks=all and a consumer reading them back, printing progress every second until Ctrl-C.

The consumer checks what it reads: per partition, the record numbers it sees must rise
(the producer numbers records per partition), so a lost or reordered record shows at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

DEMO_TOPIC = "demo"
REPORT_INTERVAL_S = 1.0


@dataclass
class Progress:
    produced: int = 0
    acked: int = 0
    failed: int = 0
    consumed: int = 0
    out_of_order: int = 0
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def ensure_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    from data_plane.client import Admin
    from metadata_quorum.controller_client import ControllerClient, ControllerError

    with Admin(bootstrap) as admin:
        controllers = admin.controller_endpoints()
    with ControllerClient(controllers) as client:
        try:
            configs = {"min.insync.replicas": "2"} if replication_factor >= 3 else {}
            client.create_topic(topic, partitions, replication_factor, configs)
            print(f"created topic {topic} ({partitions} partitions, replication factor {replication_factor})")
        except ControllerError as exc:
            if exc.code_name != "TOPIC_ALREADY_EXISTS":
                raise
            print(f"using existing topic {topic}")


def _produce(bootstrap: str, topic: str, partitions: int, progress: Progress, stop: threading.Event) -> None:
    from data_plane.client import Producer

    def on_done(future) -> None:
        with progress.lock:
            if future.exception() is None:
                progress.acked += 1
            else:
                progress.failed += 1
                progress.last_error = str(future.exception())

    with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        n = 0
        while not stop.is_set():
            partition = n % partitions
            future = producer.send(topic, f"{n // partitions}".encode(), partition=partition)
            future.add_done_callback(on_done)
            n += 1
            with progress.lock:
                progress.produced += 1
        producer.flush(timeout=30)


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


def run_demo(bootstrap: str, partitions: int, replication_factor: int, topic: str = DEMO_TOPIC) -> None:
    """Run until KeyboardInterrupt; print one progress line a second."""
    ensure_topic(bootstrap, topic, partitions, replication_factor)
    progress = Progress()
    stop = threading.Event()
    workers = [
        threading.Thread(target=_produce, args=(bootstrap, topic, partitions, progress, stop), name="demo-producer", daemon=True),
        threading.Thread(target=_consume, args=(bootstrap, topic, partitions, progress, stop), name="demo-consumer", daemon=True),
    ]
    for worker in workers:
        worker.start()
    print("producing and consuming; press Ctrl-C to stop")
    started = time.monotonic()
    previous_acked = previous_consumed = 0
    try:
        while True:
            stop.wait(REPORT_INTERVAL_S)
            with progress.lock:
                acked, consumed = progress.acked, progress.consumed
                line = (
                    f"t={time.monotonic() - started:6.1f}s  acked={acked:,} ({acked - previous_acked:,}/s)  "
                    f"consumed={consumed:,} ({consumed - previous_consumed:,}/s)  failed={progress.failed}  "
                    f"out_of_order={progress.out_of_order}"
                )
                if progress.last_error:
                    line += f"  last_error={progress.last_error[:120]}"
            print(line, flush=True)
            previous_acked, previous_consumed = acked, consumed
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=35)
