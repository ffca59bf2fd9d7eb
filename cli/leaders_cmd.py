"""``kraftlog leaders elect``: ask the active controller for preferred (or unclean) leader
elections, as kafka-leader-election does, and show what happened per partition.

Preferred: leadership goes back to each partition's first replica where it is a usable
in-sync replica. Unclean: partitions without a leader get one, from outside the ISR if no
in-sync replica is alive (committed data may be lost; counted per partition). The command
exits 1 when any selected partition could not be elected, after showing every result.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from cli.admin_clients import open_clients
from cli.bootstrap import check_partition, partitions_of, resolve_bootstrap
from cli.output import emit, table
from cli.partition_view import ids, partition_fields
from server_common.errors import ErrorCode, error_code_name

_OK = {ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED}


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``leaders elect`` to the ``kraftlog`` parser."""
    leaders = sub.add_parser("leaders", help="partition leadership: preferred and unclean elections").add_subparsers(dest="action", required=True)
    elect_parser = leaders.add_parser("elect", help="elect preferred (or unclean) leaders; every partition unless --topic")
    elect_parser.add_argument("--topic", help="only this topic's partitions")
    elect_parser.add_argument("--partition", type=int, help="only this partition (with --topic)")
    elect_parser.add_argument("--election-type", choices=["preferred", "unclean"], default="preferred",
                              help="preferred: back to the first replica when it is in sync; unclean: leaderless partitions, outside the ISR if needed")
    client_options(elect_parser)
    elect_parser.set_defaults(func=elect)


def elect(args: argparse.Namespace) -> int:
    if args.partition is not None and not args.topic:
        raise ValueError("--partition needs --topic, e.g. kraftlog leaders elect --topic orders --partition 0")
    if args.topic:  # a typo is one line naming what exists, not a table row of zeros
        check_partition(args.topic, args.partition, partitions_of(resolve_bootstrap(args.bootstrap, args.data_dir), args.topic))
    selection = {args.topic: [] if args.partition is None else [args.partition]} if args.topic else None
    admin, controller = open_clients(args)
    with admin, controller:
        results = controller.elect_leaders(selection, unclean=args.election_type == "unclean")
    rows = [partition_fields(r) | {"result": "elected" if r.error_code == ErrorCode.NONE else error_code_name(r.error_code), "message": r.error_message} for r in results]
    failed = [r for r in results if r.error_code not in _OK]
    acted = [row for row, r in zip(rows, results) if r.error_code != ErrorCode.ELECTION_NOT_NEEDED]
    not_needed = len(rows) - len(acted)
    human = table(
        ["TOPIC", "PARTITION", "RESULT", "LEADER", "EPOCH", "ISR", "MESSAGE"],
        [[r["topic"], r["partition"], r["result"], r["leader"] if r["leader"] >= 0 else "none", r["leader_epoch"], ids(r["isr"]), r["message"]] for r in acted],
    ) if acted else "no election needed"
    if acted and not_needed:
        human += f"\n{not_needed} other partition(s) need no election"
    emit(args.json, rows, human)
    if failed:
        print(f"kraftlog leaders: {len(failed)} partition(s) could not be elected; see RESULT and MESSAGE above", file=sys.stderr)
        return 1
    return 0
