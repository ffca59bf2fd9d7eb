"""``kraftlog perf latency``: one record produced and its acknowledgement awaited at a time,
beside the floor and a peer, in one sitting.

Three figures, measured one after the other on the same machine so that a reader can compare
them (docs/performance.md keeps the results):

- **kraftlog**: ``--count`` 100-byte records, each sent with ``acks=all`` and awaited before
  the next (`Producer.send(...).result()`), on a topic of RF=3 and min.insync.replicas=2 (the
  topic is created if missing);
- **floor**: a bare ``grpc.aio`` server in another process answering the same bytes, as a
  unary call (what a Produce is) and as a message each way on an open stream (what a
  replication round is), both sides on uvloop as kraftlog's processes are (`cli/grpc_floor.py`);
- **peer** (``--peer nats``): NATS JetStream R3 with file storage, sync publish
  (`cli/nats_peer.py`; needs Debian's nats-server).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from cli.bootstrap import resolve_bootstrap
from cli.output import emit
from cli.perf_common import ensure_one_partition_topic, percentiles
from server_common.logging_setup import configure_logging

WARM_UP_FRACTION = 10  # the first count/10 sends open channels and fill caches; not recorded


def _kraftlog(bootstrap: str, topic: str, count: int, record_size: int, pause_s: float) -> dict[str, float]:
    from data_plane.client import Producer

    ensure_one_partition_topic(bootstrap, topic, 3, {"min.insync.replicas": "2"})
    value = bytes(record_size)
    samples_ms = []
    with Producer(bootstrap, acks="all") as producer:
        for i in range(count + count // WARM_UP_FRACTION):
            started = time.perf_counter()
            producer.send(topic, value, partition=0).result()
            if i >= count // WARM_UP_FRACTION:
                samples_ms.append((time.perf_counter() - started) * 1000)
                if pause_s > 0:
                    time.sleep(pause_s)  # pacing (--pause-ms), not a wait for anything
    return percentiles(samples_ms)


def _ratio(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    return {k: round(ours[k] / theirs[k], 2) for k in ("p50", "p99", "p999") if theirs.get(k)}


def run(args: argparse.Namespace) -> int:
    from cli.grpc_floor import measure_floor

    configure_logging(level="WARNING")
    if args.count < 10 or args.record_size < 1 or args.pause_ms < 0:
        raise ValueError("--count must be at least 10, --record-size at least 1 and --pause-ms at least 0")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    pause_s = args.pause_ms / 1000
    apart = f", {args.pause_ms:g} ms apart" if args.pause_ms else ""
    print(f"kraftlog: {args.count:,} records of {args.record_size} bytes, acks=all, one at a time{apart} ...", file=sys.stderr, flush=True)
    document: dict = {"count": args.count, "record_size": args.record_size, "pause_ms": args.pause_ms,
                      "kraftlog_ms": _kraftlog(bootstrap, args.topic, args.count, args.record_size, pause_s)}
    print("floor: bare grpc.aio server and client (uvloop) ...", file=sys.stderr, flush=True)
    floor = measure_floor(args.count, args.record_size, pause_s=pause_s)
    document["floor_unary_ms"], document["floor_stream_ms"] = floor.unary_ms, floor.stream_ms
    if args.peer == "nats":
        from cli.nats_peer import measure_jetstream

        print("peer: NATS JetStream R3, sync publish ...", file=sys.stderr, flush=True)
        document["nats_jetstream_r3_ms"] = measure_jetstream(args.count, args.record_size, pause_s)
        document["ratio_to_nats"] = _ratio(document["kraftlog_ms"], document["nats_jetstream_r3_ms"])
    document["load_average_1m"] = round(os.getloadavg()[0], 2)
    rows = [("kraftlog acks=all RF=3", document["kraftlog_ms"]), ("floor: gRPC unary", floor.unary_ms),
            ("floor: gRPC stream", floor.stream_ms)]
    if "nats_jetstream_r3_ms" in document:
        rows.append(("NATS JetStream R3", document["nats_jetstream_r3_ms"]))
    human = "\n".join(f"{name:<24} p50 {p['p50']:>7} ms  p99 {p['p99']:>7} ms  p99.9 {p['p999']:>7} ms  max {p['max']:>7} ms"
                      for name, p in rows)
    if "ratio_to_nats" in document:
        r = document["ratio_to_nats"]
        human += f"\nkraftlog / NATS: p50 {r.get('p50')}x  p99 {r.get('p99')}x  p99.9 {r.get('p999')}x"
    human += f"\nload average (1 min) at the end: {document['load_average_1m']}"
    emit(args.json, document, human)
    return 0


def add_parser(perf: argparse._SubParsersAction, client_options) -> None:
    """``kraftlog perf latency``'s options."""
    parser = perf.add_parser("latency", help="one acks=all record at a time: p50/p99 beside the gRPC floor and NATS JetStream R3")
    parser.add_argument("--topic", default="perf-latency", help="one-partition topic, RF=3, min.insync.replicas=2; created if missing (default: %(default)s)")
    parser.add_argument("--count", type=int, default=3000, help="records (and floor messages, and peer publishes) measured (default: %(default)s)")
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record (default: %(default)s)")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="pause after each measured write (and floor message, and peer publish): 0 measures back to back; "
                             "a pause shows what a sporadic write costs once every process on its path has gone idle "
                             "(default: %(default)s)")
    parser.add_argument("--peer", choices=["nats", "none"], default="nats",
                        help="nats: also measure NATS JetStream R3 (needs nats-server: apt-get install nats-server); none: skip (default: %(default)s)")
    client_options(parser)
    parser.set_defaults(func=run)
