"""``kraftlog records delete``: move a partition's log start offset (Kafka's
kafka-delete-records), so the records below it are no longer served by any replica and
their segments are freed. Only committed records (below the high watermark) can go."""

from __future__ import annotations

import argparse
from typing import Callable

from cli.bootstrap import check_partition, partitions_of, resolve_bootstrap
from cli.output import emit
from server_common.errors import ErrorCode


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``records delete`` to the ``kraftlog`` parser."""
    records = sub.add_parser("records", help="delete records from the start of a partition").add_subparsers(dest="action", required=True)
    delete_parser = records.add_parser("delete", help="delete every record of a partition below an offset (moves its log start offset)")
    delete_parser.add_argument("--topic", required=True, help="topic of the partition")
    delete_parser.add_argument("--partition", type=int, required=True, help="partition number")
    delete_parser.add_argument("--before", type=int, required=True, metavar="OFFSET",
                               help="delete records with offsets below this one; -1: every committed record (up to the high watermark)")
    client_options(delete_parser)
    delete_parser.set_defaults(func=delete)


def delete(args: argparse.Namespace) -> int:
    from data_plane.client import Admin
    from data_plane.client.errors import KraftlogError

    if args.partition < 0:
        raise ValueError(f"--partition must be >= 0, got {args.partition}")
    if args.before < -1:
        raise ValueError(f"--before must be -1 (every committed record) or an offset >= 0, got {args.before}")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    check_partition(args.topic, args.partition, partitions_of(bootstrap, args.topic))  # not 30 s of retries for a typo
    with Admin(bootstrap) as admin:
        try:
            low_watermark = admin.delete_records((args.topic, args.partition), args.before)
        except KraftlogError as exc:
            if exc.error is ErrorCode.OFFSET_OUT_OF_RANGE:  # the broker's message says what to do; the client's
                raise ValueError(f"{exc.code}: {exc.detail}") from None  # advice is for consumers
            raise
    emit(args.json, {"topic": args.topic, "partition": args.partition, "low_watermark": low_watermark},
         f"{args.topic}-{args.partition}: records below offset {low_watermark} deleted (log start offset is now {low_watermark})")
    return 0
