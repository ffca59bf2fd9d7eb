"""``kraftlog perf e2e``: end-to-end latency, from ``send`` to the consumer's ``poll``, at a fixed rate.

Kafka's EndToEndLatency tool sends one record at a time; this one holds a rate (``--rate``
records/s for ``--duration`` s, paced by deadlines) so that batching, long polls and the
sender loop all work as they would under steady traffic. Each value starts with the run id,
a sequence number and the send time on CLOCK_MONOTONIC (one clock for every process on the
host), so the consumer computes a record's latency the moment ``poll`` hands it over, with
no clock skew to correct.

The consumer runs in a process of its own, as it would in production. On a thread of this
process it would share the GIL with the producer: with acks=all the produce answer and the
fetch answer arrive together, and the consumer would wait for the producer's callbacks
before it could look at its data (measured here: 1-2 ms at p50, more in the tail). It writes
what it sees into shared memory, which this process reads for progress lines and the report.

The producer's acknowledgement latency is measured alongside: with acks=all both the ack
and the fetch wait for the same high-watermark advance, so comparing the two tells the way
in (producer, append, replication) from the way out (fetch wake-up, response, consumer).
Each record's latency is also split into stages from the timestamps this process sees:
`producer_wait` (send until its Produce request left: linger, batching, a free in-flight
slot), `request` (the request's round trip: network, the leader's append, replication and
the high watermark's advance, the answer), split into `broker` (the time the leader says it
spent on the request, ProduceResponse.broker_time_us: the append and, with acks=all, the
wait for the in-sync replicas) and `network_and_grpc` (the rest: both processes' gRPC
layers, the loopback, the wait for each event loop), `callback` (answer until the delivery callback ran)
and `consumer_after_ack` (end-to-end minus ack latency: how much later the consumer's poll
returned the record than the producer heard of it; negative when the consumer was first).
Running once with ``--acks 1`` and once with ``--acks all`` separates the leader's append
from replication in `request`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import multiprocessing
import os
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING

from cli.bootstrap import resolve_bootstrap
from cli.output import emit
from cli.perf_cmd import ACKS
from cli.perf_common import DeliveryLog, Schedule, Ticker, percentiles, topic_partitions
from server_common.logging_setup import configure_logging
from server_common.waiting import wait_for

if TYPE_CHECKING:
    from data_plane.client.producer_batch import RecordFuture

# run id, sequence number, send time (CLOCK_MONOTONIC ns): the start of every value.
VALUE_HEADER = struct.Struct("<8sqq")
# How long the consumer's poll blocks before it looks at the stop flag again.
POLL_TIMEOUT_MS = 100
# Starting the consumer process (imports, metadata, positions) and, after the last send,
# every acknowledged record reaching it.
CONSUMER_START_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 150.0  # above the producer's default delivery timeout (120 s)


class Receipts:
    """What the consumer saw, per sequence number, in shared memory: written only by the
    consumer process, read by the sending process while the run goes on."""

    def __init__(self, run_id: bytes, expected: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.run_id = run_id
        self.expected = expected  # sequence numbers this run can send
        self.latencies_ms = context.RawArray("d", expected)
        self.seen = context.RawArray("B", expected)
        self._received = context.RawValue("q", 0)
        self._duplicates = context.RawValue("q", 0)
        self.positioned = context.RawValue("B", 0)  # set by the consumer: it may start sending
        self.finished = context.RawValue("B", 0)  # set by the sender: the consumer may stop

    @property
    def received(self) -> int:
        return self._received.value

    @property
    def duplicates(self) -> int:
        return self._duplicates.value

    def add(self, value: bytes | None, received_ns: int) -> None:
        """Counts one received value; records of other writers to the topic are passed over."""
        if value is None or len(value) < VALUE_HEADER.size:
            return
        run_id, seq, sent_ns = VALUE_HEADER.unpack_from(value)
        if run_id != self.run_id or not 0 <= seq < self.expected:
            return
        if self.seen[seq]:
            self._duplicates.value += 1
            return
        self.latencies_ms[seq] = (received_ns - sent_ns) / 1e6
        self.seen[seq] = 1
        self._received.value += 1

    def latencies(self, start: int = 0, end: int | None = None) -> list[float]:
        """Latencies of the records received among sequence numbers ``start`` to ``end``."""
        seen, latencies = self.seen, self.latencies_ms
        return [latencies[i] for i in range(start, self.expected if end is None else end) if seen[i]]


_receipts: Receipts | None = None  # in the consumer process: set once as it starts


def _adopt(receipts: Receipts) -> None:
    """Consumer process initializer: shared memory travels only at process start."""
    global _receipts
    _receipts = receipts


def _consume(bootstrap: str, tps: list[tuple[str, int]]) -> None:
    """The consumer process: every poll's records get one receipt time, taken as poll returns."""
    from data_plane.client import Consumer

    configure_logging(level="WARNING")
    receipts = _receipts
    assert receipts is not None, "_adopt runs before any task"
    with Consumer(bootstrap) as consumer:
        consumer.assign(tps)
        consumer.seek_to_end()  # positions are fixed before the first send: nothing is missed
        receipts.positioned.value = 1
        while not receipts.finished.value:
            polled = consumer.poll_batches(timeout_ms=POLL_TIMEOUT_MS)
            received_ns = time.monotonic_ns()
            for batches in polled.values():
                for batch in batches:
                    for value in batch.values:
                        receipts.add(value, received_ns)


def _progress(ticker: Ticker, sent: int, acks: DeliveryLog, receipts: Receipts, window_start: int) -> None:
    """One line per interval; the percentiles cover the records sent in that interval."""
    window = percentiles(receipts.latencies(window_start, sent))
    print(
        f"  {ticker.elapsed_s:5.1f}s sent {sent:,} acked {acks.acked:,} received {receipts.received:,}"
        f" | this interval: p50 {window['p50']} ms p99 {window['p99']} ms max {window['max']} ms",
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    from data_plane.client import Producer
    from data_plane.client.producer_options import ProducerOptions

    configure_logging(level="WARNING")  # client logs go to stderr, never into --json output
    linger_ms = ProducerOptions.linger_ms if args.linger_ms is None else args.linger_ms
    if args.duration <= 0 or args.record_size < VALUE_HEADER.size or linger_ms < 0:
        raise ValueError(f"--duration must be positive, --record-size at least {VALUE_HEADER.size}, --linger-ms >= 0")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    tps = [(args.topic, p) for p in topic_partitions(bootstrap, args.topic)]
    run_id = os.urandom(8)
    receipts = Receipts(run_id, math.ceil(args.rate * args.duration) + 1)  # at least the schedule's ticks
    acks = DeliveryLog()
    padding = bytes(args.record_size - VALUE_HEADER.size)

    with (
        concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=_adopt, initargs=(receipts,)
        ) as pool,
        Producer(
            bootstrap,
            acks=ACKS[args.acks],
            linger_ms=linger_ms,
            max_in_flight_per_partition=args.max_in_flight_per_partition,
        ) as producer,
    ):
        consuming = pool.submit(_consume, bootstrap, tps)
        consumer_ended = threading.Event()  # early only when the consumer failed: stop sending
        consuming.add_done_callback(lambda _: consumer_ended.set())
        try:
            wait_for(lambda: receipts.positioned.value or consuming.done(), CONSUMER_START_TIMEOUT_S, "the consumer process to start")
            schedule = Schedule(args.rate)
            sends: list[tuple[int, RecordFuture]] = []  # per sequence number: send time, future
            ticker = Ticker()
            window_start = sent = 0
            for seq in schedule.ticks(consumer_ended, args.duration):
                sent_ns = time.monotonic_ns()
                future = producer.send(
                    args.topic, VALUE_HEADER.pack(run_id, seq, sent_ns) + padding, on_delivery=acks.callback(seq, sent_ns)
                )
                sends.append((sent_ns, future))
                sent += 1
                if ticker.due():
                    _progress(ticker, sent, acks, receipts, window_start)
                    window_start = sent
            producer.flush(FLUSH_TIMEOUT_S)
            wait_for(
                lambda: consuming.done() or receipts.received >= acks.acked,
                DRAIN_TIMEOUT_S,
                f"the consumer to receive all {acks.acked:,} acknowledged records",
            )
        finally:
            receipts.finished.value = 1
        consuming.result()  # raises the consumer's error, if it had one
    document = {
        "topic": args.topic,
        "acks": args.acks,
        "rate": args.rate,
        "duration_s": args.duration,
        "record_size": args.record_size,
        "linger_ms": linger_ms,
        "max_in_flight_per_partition": args.max_in_flight_per_partition,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "sent": sent,
        "acked": acks.acked,
        "failed": acks.failed,
        "received": receipts.received,
        "lost": sum(1 for seq in acks.acked_seqs if not receipts.seen[seq]),
        "duplicates": receipts.duplicates,
        "send_lag_ms_max": round(schedule.lag_s_max * 1000, 3),
        "latency_ms": percentiles(receipts.latencies()),
        "ack_latency_ms": percentiles(acks.latencies_ms),
        "stages_ms": {name: percentiles(samples) for name, samples in _stages(sends, acks, receipts).items()},
    }
    _report(args.json, document, acks.first_error)
    return 1 if document["failed"] or document["lost"] else 0


def _stages(sends: list[tuple[int, RecordFuture]], acks: DeliveryLog, receipts: Receipts) -> dict[str, list[float]]:
    """Each acknowledged record's latency split at the timestamps this process sees (the
    module docstring names the stages)."""
    stages: dict[str, list[float]] = {"producer_wait": [], "request": [], "broker": [], "network_and_grpc": [], "callback": [],
                                      "consumer_after_ack": []}
    for seq, acked_at_s, ack_ms in zip(acks.acked_seqs, acks.acked_at_s, acks.latencies_ms):
        sent_ns, future = sends[seq]
        request_sent_ns, answered_ns = future.request_times_ns()
        if not answered_ns:
            continue  # acks=0: no answer to time
        stages["producer_wait"].append((request_sent_ns - sent_ns) / 1e6)
        stages["request"].append((answered_ns - request_sent_ns) / 1e6)
        stages["broker"].append(future.broker_time_ns() / 1e6)
        stages["network_and_grpc"].append((answered_ns - request_sent_ns - future.broker_time_ns()) / 1e6)
        stages["callback"].append(acked_at_s * 1000 - answered_ns / 1e6)
        if receipts.seen[seq]:
            stages["consumer_after_ack"].append(receipts.latencies_ms[seq] - ack_ms)
    return stages


def _report(as_json: bool, document: dict, first_error: str) -> None:
    e2e, ack = document["latency_ms"], document["ack_latency_ms"]
    human = (
        f"{document['sent']:,} records sent at {document['rate']:,}/s for {document['duration_s']}s (acks={document['acks']}): "
        f"{document['acked']:,} acked, {document['failed']:,} failed, {document['received']:,} received, "
        f"{document['lost']:,} lost, {document['duplicates']:,} duplicates; sender fell behind its schedule by at most "
        f"{document['send_lag_ms_max']} ms\n"
        f"end-to-end latency  p50 {e2e['p50']} ms  p99 {e2e['p99']} ms  p99.9 {e2e['p999']} ms  max {e2e['max']} ms\n"
        f"ack latency         p50 {ack['p50']} ms  p99 {ack['p99']} ms  p99.9 {ack['p999']} ms  max {ack['max']} ms\n"
        + "".join(
            f"  {name:<19} p50 {p['p50']} ms  p99 {p['p99']} ms  p99.9 {p['p999']} ms  max {p['max']} ms\n"
            for name, p in document["stages_ms"].items()
        )
        + f"load average (1 min) at the end: {document['load_average_1m']}"
    )
    emit(as_json, document, human)
    if first_error:
        print(f"first delivery error: {first_error}", file=sys.stderr)
