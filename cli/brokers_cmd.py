"""``kraftlog brokers list``: every registered broker, its state, and the replicas it holds
against what it registered it can host (``max_replicas``, docs/operations.md, Sizing)."""

from __future__ import annotations

import argparse
from typing import Callable

from cli.admin_clients import open_clients
from cli.output import emit, table
from kraftlog_proto import controller_pb2 as pb


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``brokers list`` to the ``kraftlog`` parser."""
    brokers = sub.add_parser("brokers", help="the registered brokers").add_subparsers(dest="action", required=True)
    listing = brokers.add_parser("list", help="brokers with their state and replicas against capacity")
    client_options(listing)
    listing.set_defaults(func=list_brokers)


def broker_rows(cluster: pb.DescribeClusterResponse) -> list[dict]:
    """One row per broker (pure: the controller's answer in, rows out)."""
    return [{
        "broker_id": b.endpoint.broker_id,
        "address": f"{b.endpoint.host}:{b.endpoint.port}",
        "rack": b.endpoint.rack or None,
        "state": "shutting down" if b.in_controlled_shutdown else "fenced" if b.endpoint.fenced else "active",
        "broker_epoch": b.broker_epoch,
        "replicas": b.replicas,
        "max_replicas": b.max_replicas or None,  # None: the broker states no limit
        "used_percent": round(100 * b.replicas / b.max_replicas, 1) if b.max_replicas else None,
    } for b in sorted(cluster.brokers, key=lambda b: b.endpoint.broker_id)]


def list_brokers(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    with admin, controller:
        rows = broker_rows(controller.describe_cluster())
    human = table(
        ["ID", "ADDRESS", "RACK", "STATE", "EPOCH", "REPLICAS", "CAPACITY", "USED"],
        [[r["broker_id"], r["address"], r["rack"], r["state"], r["broker_epoch"], r["replicas"],
          r["max_replicas"] if r["max_replicas"] is not None else "no limit",
          f"{r['used_percent']}%" if r["used_percent"] is not None else None] for r in rows],
    ) if rows else "no broker registered"
    emit(args.json, {"brokers": rows}, human)
    return 0
