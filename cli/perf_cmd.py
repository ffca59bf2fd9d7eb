"""``kraftlog perf produce|consume``: throughput and latency, like Kafka's perf-test tools.

Produce sends ``--num-records`` records of ``--record-size`` bytes through the producer's bulk
path (``send_batch``: one encoded batch per call, spread round-robin over the topic's
partitions). At most ``OUTSTANDING_BATCHES_PER_PARTITION`` batches per partition wait for
their acknowledgement at a time, so that latency (measured per batch, from the call to its
acknowledgement, and counted once per record in it) is the time a batch takes to be written,
not the time it queued behind the whole run in client memory. The report says how many
batches the percentiles are drawn from: a p99.9 needs a thousand of them to differ from max.

With ``--transaction-records N`` the producer is transactional (a transactional id of its own)
and commits every N records: no batch spans two transactions, and a commit waits for every
batch of its transaction, as a transactional application's would. The report then adds each
transaction's time from ``begin_transaction`` to its answered ``commit_transaction``.

Consume reads from the earliest offset and counts exactly ``--num-records`` records (a poll
can return more than are left; the excess is neither counted nor timed).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from concurrent.futures import Future

from cli.bootstrap import resolve_bootstrap
from cli.output import emit
from cli.perf_common import Ticker, percentiles, topic_partitions

ACKS = {"all": "all", "1": 1, "0": 0}
OUTSTANDING_BATCHES_PER_PARTITION = 4


class ConsumeTally:
    """Counts polled batches up to a target number of records. The batch that crosses the
    target counts only the records still needed, and its bytes in proportion."""

    def __init__(self, target_records: int) -> None:
        self.target_records = target_records
        self.records = 0
        self.bytes = 0

    @property
    def done(self) -> bool:
        return self.records >= self.target_records

    def add(self, batches) -> int:
        """Counts `batches` (anything with header.record_count and header.batch_length);
        returns how many of their records counted."""
        counted = 0
        for batch in batches:
            needed = self.target_records - self.records
            if needed <= 0:
                break
            count = min(batch.header.record_count, needed)
            self.records += count
            self.bytes += batch.header.batch_length * count // batch.header.record_count
            counted += count
        return counted


def _report(
    args: argparse.Namespace, records: int, total_bytes: int, elapsed_s: float, latency: dict[str, float], samples: int,
    transactions_ms: list[float] | None = None,
) -> None:
    document = {
        "records": records,
        "elapsed_s": round(elapsed_s, 3),
        "records_per_sec": round(records / elapsed_s, 1) if elapsed_s else 0.0,
        "mb_per_sec": round(total_bytes / elapsed_s / 1e6, 2) if elapsed_s else 0.0,
        "latency_ms": latency,
        "latency_samples": samples,
    }
    human = (
        f"{records:,} records in {elapsed_s:.2f}s: {document['records_per_sec']:,.0f} records/s, "
        f"{document['mb_per_sec']:.1f} MB/s, latency p50 {latency['p50']} ms, p99 {latency['p99']} ms, "
        f"p99.9 {latency['p999']} ms, max {latency['max']} ms (over {samples:,} samples)"
    )
    if transactions_ms:
        per_transaction = document["transaction_ms"] = percentiles(transactions_ms)
        document["transactions"] = len(transactions_ms)
        human += (f"\n{len(transactions_ms):,} transactions, begin to answered commit: p50 {per_transaction['p50']} ms, "
                  f"p99 {per_transaction['p99']} ms, p99.9 {per_transaction['p999']} ms, max {per_transaction['max']} ms")
    emit(args.json, document, human)


def _progress(done: int, total: int, ticker: Ticker) -> None:
    print(f"  {done:,}/{total:,} records, {done / ticker.elapsed_s:,.0f} records/s", file=sys.stderr, flush=True)


def produce(args: argparse.Namespace) -> int:
    from data_plane.client import Producer

    if args.num_records < 1 or args.record_size < 1 or args.batch_records < 1:
        raise ValueError("--num-records, --record-size and --batch-records must be positive")
    if args.transaction_records < 0:
        raise ValueError("--transaction-records must be 0 (no transactions) or positive")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    partitions = topic_partitions(bootstrap, args.topic)
    value = os.urandom(args.record_size)
    batch = [value] * args.batch_records
    latencies: list[float] = []
    weights: list[int] = []
    futures: list[Future] = []
    window = threading.BoundedSemaphore(OUTSTANDING_BATCHES_PER_PARTITION * len(partitions))

    def record_latency(sent_at: float, count: int):
        def done(_: Future) -> None:
            latencies.append((time.perf_counter() - sent_at) * 1000)
            weights.append(count)
            window.release()

        return done

    per_transaction = args.transaction_records
    transactions_ms: list[float] = []
    transactional_id = f"perf-produce-{os.getpid()}-{time.time_ns()}" if per_transaction else None
    with Producer(bootstrap, acks=ACKS[args.acks], compression=args.compression, transactional_id=transactional_id) as producer:
        if per_transaction:
            producer.init_transactions()
        ticker = Ticker()
        sent = 0
        i = 0
        while sent < args.num_records:
            count = min(args.batch_records, args.num_records - sent)
            if per_transaction:
                if sent % per_transaction == 0:
                    producer.begin_transaction()
                    began = time.perf_counter()
                count = min(count, per_transaction - sent % per_transaction)
            window.acquire()
            future = producer.send_batch(args.topic, partitions[i % len(partitions)], batch[:count] if count < len(batch) else batch)
            future.add_done_callback(record_latency(time.perf_counter(), count))
            futures.append(future)
            sent += count
            i += 1
            if per_transaction and (sent % per_transaction == 0 or sent == args.num_records):
                producer.commit_transaction()
                transactions_ms.append((time.perf_counter() - began) * 1000)
            if ticker.due():
                _progress(sent, args.num_records, ticker)
        producer.flush()
        elapsed = ticker.elapsed_s
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        raise ValueError(f"{len(failed)} of {len(futures)} batches failed; first error: {failed[0]}")
    _report(args, sent, sent * args.record_size, elapsed, percentiles(latencies, weights), len(latencies), transactions_ms)
    return 0


def consume(args: argparse.Namespace) -> int:
    from data_plane.client import Consumer

    if getattr(args, "group", None):
        from cli.perf_group import run

        return run(args)
    if args.num_records < 1:
        raise ValueError("--num-records must be positive")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    partitions = topic_partitions(bootstrap, args.topic)
    tally = ConsumeTally(args.num_records)
    latencies: list[float] = []
    weights: list[int] = []
    with Consumer(bootstrap, isolation_level=args.isolation_level) as consumer:
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ticker = Ticker()
        last_data = ticker.started
        while not tally.done:
            poll_started = time.perf_counter()
            batches = consumer.poll_batches(timeout_ms=500)
            counted = tally.add(b for bs in batches.values() for b in bs)
            if counted:
                latencies.append((time.perf_counter() - poll_started) * 1000)
                weights.append(counted)
                last_data = time.monotonic()
            elif all(consumer.position(tp) >= consumer.high_watermark(tp) for tp in tps):
                print(f"the topic holds {tally.records:,} records, fewer than --num-records {args.num_records:,}: "
                      "the figures are for those", file=sys.stderr)
                break
            elif (time.monotonic() - last_data) * 1000 > args.timeout_ms:
                raise TimeoutError(
                    f"only {tally.records:,} of {args.num_records:,} records arrived within {args.timeout_ms} ms of the last data, "
                    f"and the reads have not reached the high watermark (an open transaction holds read_committed back?)"
                )
            if ticker.due():
                _progress(tally.records, args.num_records, ticker)
        elapsed = ticker.elapsed_s
    _report(args, tally.records, tally.bytes, elapsed, percentiles(latencies, weights), len(latencies))
    return 0
