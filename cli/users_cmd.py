"""``kraftlog users create | list | delete``: SCRAM-SHA-256 users kept in the metadata quorum
(docs/security.md), as Kafka's ``kafka-configs --alter --add-config SCRAM-SHA-256=[password=...]``.

The password is read from ``--password`` or, without it, from standard input (so it stays
out of shell history); it travels to the controller over the client's channel, which must be
TLS outside a local test cluster. The controller stores only the salted, iterated keys.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from cli.admin_clients import open_security_client
from cli.output import emit, table


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    users = sub.add_parser("users", help="users who authenticate with a password (SCRAM-SHA-256 and SCRAM-SHA-512 from the one password)").add_subparsers(dest="action", required=True)
    create = users.add_parser("create", help="create a user or change its password")
    create.add_argument("--name", required=True, help="the user name (its principal is User:NAME)")
    create.add_argument("--password", help="the password (default: read one line from standard input)")
    create.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations, 4096 to 16384 (default: %(default)s)")
    client_options(create)
    create.set_defaults(func=create_user)
    listing = users.add_parser("list", help="users and their SCRAM mechanisms")
    client_options(listing)
    listing.set_defaults(func=list_users)
    delete = users.add_parser("delete", help="delete a user (its open calls are refused from the next one)")
    delete.add_argument("--name", required=True, help="the user to delete")
    client_options(delete)
    delete.set_defaults(func=delete_user)


def create_user(args: argparse.Namespace) -> int:
    password = args.password if args.password is not None else sys.stdin.readline().rstrip("\n")
    with open_security_client(args) as client:
        client.upsert_user(args.name, password, args.iterations)
    emit(args.json, {"action": "created", "user": args.name}, f"user {args.name} created (principal User:{args.name})")
    return 0


def list_users(args: argparse.Namespace) -> int:
    with open_security_client(args) as client:
        users = client.list_users()
    rows = [{"name": u.name, "principal": f"User:{u.name}", "mechanism": u.mechanism, "iterations": u.iterations} for u in users]
    emit(args.json, rows, table(["name", "principal", "mechanism", "iterations"], [list(r.values()) for r in rows]) if rows else "no users")
    return 0


def delete_user(args: argparse.Namespace) -> int:
    with open_security_client(args) as client:
        client.delete_user(args.name)
    emit(args.json, {"action": "deleted", "user": args.name}, f"user {args.name} deleted")
    return 0
