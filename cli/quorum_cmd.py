"""``kraftlog quorum add-controller`` and ``remove-controller``: change the controller quorum's
voters one at a time (KIP-853; docs/operations.md, Replacing a controller)."""

from __future__ import annotations

import argparse

from cli.admin_clients import open_clients
from cli.output import emit, table
from kraftlog_proto import controller_pb2 as pb


def add_controller(args: argparse.Namespace) -> int:
    from metadata_quorum.endpoints import parse_quorum

    try:
        [new] = parse_quorum(args.controller)
    except ValueError as exc:
        raise ValueError(f"--controller {args.controller}: {exc}") from None
    admin, controller = open_clients(args, controller_timeout_s=args.catch_up_timeout_s + 30)
    with admin, controller:
        response = controller.add_controller(new.node_id, new.host, new.raft_port, new.grpc_port, args.catch_up_timeout_s)
    report_quorum(args.json, f"controller {new.node_id} is a voter", response)
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    with admin, controller:
        response = controller.remove_controller(args.controller_id)
    report_quorum(args.json, f"controller {args.controller_id} left the quorum; stop its process", response)
    return 0


def report_quorum(as_json: bool, what: str, response: pb.QuorumChangeResponse) -> None:
    rows = [[m.controller_id, m.role, m.raft_address, m.grpc_address] for m in [*response.voters, *response.observers]]
    document = {"voters": [m.controller_id for m in response.voters], "observers": [m.controller_id for m in response.observers],
                "controllers": [dict(zip(["controller_id", "role", "raft_address", "grpc_address"], row)) for row in rows]}
    emit(as_json, document, f"{what}\n" + table(["ID", "ROLE", "RAFT ADDRESS", "GRPC ADDRESS"], rows))


def register(quorum: argparse._SubParsersAction, client_options) -> None:
    add = quorum.add_parser("add-controller", help="make a controller started with --join a voter once it has caught up (one change at a time)")
    add.add_argument("--controller", required=True, metavar="ID@HOST:RAFT_PORT:GRPC_PORT", help="the new controller, as its --join and --node-id say")
    add.add_argument("--catch-up-timeout-s", type=float, default=30.0, help="how long it may take to catch up before the add fails (default: %(default)s)")
    client_options(add)
    add.set_defaults(func=add_controller)
    remove = quorum.add_parser("remove-controller", help="remove a voter or observer (the active controller hands over first)")
    remove.add_argument("controller_id", type=int, help="the controller's id (`kraftlog quorum describe`)")
    client_options(remove)
    remove.set_defaults(func=remove_controller)
