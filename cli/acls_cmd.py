"""``kraftlog acls create | list | delete``: ACLs kept in the metadata quorum (docs/security.md),
as Kafka's ``kafka-acls.sh --add/--list/--remove``.

The resource is one of ``--topic``, ``--group``, ``--transactional-id`` or ``--cluster``;
``--prefixed`` makes its name a prefix; ``*`` names every resource of the type.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Callable

from cli.admin_clients import open_security_client
from cli.output import emit, table
from server_common.authorizer import CLUSTER_NAME, OPERATIONS, AclBinding

COLUMNS = ["principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission"]


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    acls = sub.add_parser("acls", help="access control lists: who may do what to which topics, groups and the cluster").add_subparsers(dest="action", required=True)
    for action, func, text in (("create", create_acls, "allow or deny operations"), ("delete", delete_acls, "remove the ACLs with exactly these fields")):
        parser = acls.add_parser(action, help=text)
        parser.add_argument("--principal", required=True, help="User:NAME, or User:* for everyone")
        parser.add_argument("--host", default="*", help="the client's IP address, or * (default)")
        parser.add_argument("--operation", action="append", required=True, choices=OPERATIONS, help="repeatable")
        parser.add_argument("--deny", action="store_true", help="a DENY ACL (deny wins over any allow)")
        _resource_options(parser)
        parser.add_argument("--prefixed", action="store_true", help="the resource name is a prefix")
        client_options(parser)
        parser.set_defaults(func=func)
    listing = acls.add_parser("list", help="the ACLs, optionally of one principal or resource")
    listing.add_argument("--principal", default="", help="only this principal's ACLs")
    _resource_options(listing)
    client_options(listing)
    listing.set_defaults(func=list_acls)


def _resource_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--topic", help="a topic name, a prefix with --prefixed, or * for every topic")
    group.add_argument("--group", help="a consumer group id, a prefix with --prefixed, or * for every group")
    group.add_argument("--transactional-id", help="a transactional id, a prefix with --prefixed, or *")
    group.add_argument("--cluster", action="store_true", help="the cluster itself (CLUSTER_ACTION, IDEMPOTENT_WRITE, ALTER, ...)")


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    if args.cluster:
        return "cluster", CLUSTER_NAME
    for kind in ("topic", "group", "transactional_id"):
        if getattr(args, kind) is not None:
            return kind, getattr(args, kind)
    return "", ""


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    kind, name = _resource(args)
    if not kind:
        raise ValueError("name the resource: --topic NAME, --group NAME, --transactional-id NAME or --cluster (NAME * for all)")
    bindings = [AclBinding(args.principal, args.host, kind, name, "prefixed" if args.prefixed else "literal", op, "deny" if args.deny else "allow")
                for op in args.operation]
    for binding in bindings:
        binding.validate()
    return bindings


def _show(args: argparse.Namespace, action: str, bindings: list[AclBinding]) -> None:
    rows = [asdict(b) for b in bindings]
    emit(args.json, {"action": action, "acls": rows}, f"{action} {len(rows)} ACL(s):\n" + table(COLUMNS, [list(r.values()) for r in rows]))


def create_acls(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    with open_security_client(args) as client:
        client.create_acls(bindings)
    _show(args, "created", bindings)
    return 0


def delete_acls(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    with open_security_client(args) as client:
        client.delete_acls(bindings)
    _show(args, "deleted", bindings)
    return 0


def list_acls(args: argparse.Namespace) -> int:
    kind, name = _resource(args)
    with open_security_client(args) as client:
        bindings = client.list_acls(args.principal, kind, name)
    rows = [asdict(b) for b in bindings]
    emit(args.json, rows, table(COLUMNS, [list(r.values()) for r in rows]) if rows else "no ACLs")
    return 0
