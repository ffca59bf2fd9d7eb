"""``kraftlog partitions reassign`` and ``kraftlog partitions reassignments``: move a
partition's replicas to other brokers (KIP-455 semantics, see metadata_quorum/reassignment.py)
and follow or cancel the moves in progress.

A reassignment adds the new replicas, which catch up as followers; once the leader has
brought them all into the ISR the controller drops the old ones (moving leadership if the
leader is one of them). Progress shows as adding/removing replicas here and in
``kraftlog topics describe``.
"""

from __future__ import annotations

import argparse
from typing import Callable

from cli.admin_clients import open_clients
from cli.output import emit, table
from cli.partition_view import ids, partition_fields
from metadata_quorum.controller_client import ControllerError


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``partitions reassign`` and ``partitions reassignments`` to the ``kraftlog`` parser."""
    partitions = sub.add_parser("partitions", help="move partition replicas between brokers").add_subparsers(dest="action", required=True)
    reassign_parser = partitions.add_parser("reassign", help="start (or cancel) moving one partition's replicas")
    reassign_parser.add_argument("--topic", required=True, help="topic of the partition to move")
    reassign_parser.add_argument("--partition", type=int, required=True, help="partition to move")
    target = reassign_parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--replicas", type=broker_ids, metavar="ID,ID,...", help="the target replicas, preferred leader first, e.g. 2,3,4")
    target.add_argument("--cancel", action="store_true", help="cancel the reassignment in progress (the replicas being added are dropped)")
    client_options(reassign_parser)
    reassign_parser.set_defaults(func=reassign)
    listing = partitions.add_parser("reassignments", help="reassignments in progress")
    listing.add_argument("--topic", help="only this topic")
    client_options(listing)
    listing.set_defaults(func=list_reassignments)


def broker_ids(raw: str) -> tuple[int, ...]:
    """``2,3,4`` -> (2, 3, 4); argparse shows the error with the option's name."""
    try:
        values = tuple(int(part) for part in raw.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{raw}' is not a comma-separated list of broker ids, e.g. 2,3,4") from None
    return values


def _progress(row: dict) -> str:
    if row["adding_replicas"] or row["removing_replicas"]:
        return f"in progress: adding {ids(row['adding_replicas'])}, removing {ids(row['removing_replicas'])}"
    return "complete"


def reassign(args: argparse.Namespace) -> int:
    tp = f"{args.topic}-{args.partition}"
    admin, controller = open_clients(args)
    with admin, controller:
        (result,) = controller.alter_partition_reassignments({(args.topic, args.partition): None if args.cancel else args.replicas})
    if result.error_code:
        raise ControllerError.from_wire(result.error_code, result.error_message)
    row = partition_fields(result)
    row["status"] = "cancelled" if args.cancel else _progress(row)
    human = f"{'cancelled the reassignment of' if args.cancel else 'reassignment of'} {tp}: {row['status']}; replicas {ids(row['replicas'])}, leader {row['leader']}, ISR {ids(row['isr'])}"
    if row["adding_replicas"]:
        human += f"\nit completes once the new replicas ({ids(row['adding_replicas'])}) have caught up and joined the ISR; follow it with `kraftlog partitions reassignments` or `kraftlog topics describe {args.topic}`"
    emit(args.json, row, human)
    return 0


def list_reassignments(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    with admin, controller:
        ongoing = controller.list_partition_reassignments({args.topic: []} if args.topic else None)
    rows = [partition_fields(r) for r in ongoing]
    human = table(
        ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "LEADER", "ISR"],
        [[r["topic"], r["partition"], ids(r["replicas"]), ids(r["adding_replicas"]), ids(r["removing_replicas"]), r["leader"] if r["leader"] >= 0 else "none", ids(r["isr"])] for r in rows],
    ) if rows else "no reassignments in progress"
    emit(args.json, rows, human)
    return 0
