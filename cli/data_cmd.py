"""``kraftlog produce`` and ``kraftlog consume``: stdin lines in, record values out."""

from __future__ import annotations

import argparse
import sys
import time

from cli.bootstrap import partitions_of, resolve_bootstrap

ACKS = {"all": "all", "1": 1, "0": 0}


def produce(args: argparse.Namespace) -> int:
    from data_plane.client import Producer

    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    _check_partition(args.topic, args.partition, partitions_of(bootstrap, args.topic))
    futures = []
    with Producer(bootstrap, acks=ACKS[args.acks], compression=args.compression) as producer:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            key = None
            if args.key_separator:
                sep = args.key_separator.encode()
                if sep not in line:
                    raise ValueError(f"line {len(futures) + 1} has no key separator '{args.key_separator}': write KEY{args.key_separator}VALUE")
                key, line = line.split(sep, 1)
            futures.append(producer.send(args.topic, line, key=key, partition=args.partition))
        producer.flush()
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        print(f"kraftlog produce: {len(errors)} of {len(futures)} records failed; first error: {errors[0]}", file=sys.stderr)
        return 1
    print(f"sent {len(futures)} records to {args.topic}", file=sys.stderr)
    return 0


def consume(args: argparse.Namespace) -> int:
    from data_plane.client import Consumer

    if args.offset is not None and args.partition is None:
        raise ValueError("--offset needs --partition: say which partition the offset belongs to")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    partitions = partitions_of(bootstrap, args.topic)
    _check_partition(args.topic, args.partition, partitions)
    if args.partition is not None:
        partitions = [args.partition]
    printed = 0
    out = sys.stdout.buffer
    with Consumer(bootstrap) as consumer:
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        if args.offset is not None:
            consumer.seek((args.topic, args.partition), args.offset)
        elif args.from_beginning:
            consumer.seek_to_beginning(tps)
        else:
            consumer.seek_to_end(tps)
        last_record = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            records = consumer.poll(timeout_ms=200)
            if not records:
                if args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                    break
                continue
            last_record = time.monotonic()
            for record in records:
                if args.print_key:
                    out.write((record.key or b"null") + b"\t")
                out.write((record.value or b"") + b"\n")
                printed += 1
                if args.max_messages is not None and printed >= args.max_messages:
                    break
            out.flush()
    return 0


def _check_partition(topic: str, partition: int | None, partitions: list[int]) -> None:
    if partition is not None and partition not in partitions:
        raise ValueError(f"{topic} has no partition {partition}; it has partitions 0..{len(partitions) - 1}")
