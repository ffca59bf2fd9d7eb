"""``kraftlog groups list | describe G | delete G | reset-offsets G``: consumer groups, as
kafka-consumer-groups does.

reset-offsets prints its plan and changes nothing unless ``--execute`` is given; executing
is refused while the group has members (their next commit would undo the reset), with the
advice to stop them first.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Callable

from cli.bootstrap import partitions_of, resolve_bootstrap
from cli.admin_clients import open_coordinator_admin, report_unanswered
from cli.output import emit, plural, table
from server_common.errors import ErrorCode


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``groups`` to the ``kraftlog`` parser."""
    groups = sub.add_parser("groups", help="consumer groups: list, describe with lag, delete, reset offsets").add_subparsers(dest="action", required=True)
    listing = groups.add_parser("list", help="every consumer group with its state, coordinator and member count")
    client_options(listing)
    listing.set_defaults(func=list_groups)
    describe = groups.add_parser("describe", help="a group's state, members and per partition: owner, committed offset, log end offset, lag")
    describe.add_argument("group", help="group id")
    client_options(describe)
    describe.set_defaults(func=describe_group)
    delete = groups.add_parser("delete", help="delete a group without members, with its committed offsets")
    delete.add_argument("group", help="group id")
    client_options(delete)
    delete.set_defaults(func=delete_group)
    reset = groups.add_parser("reset-offsets", help="plan (and with --execute, commit) new offsets for a group without members")
    reset.add_argument("group", help="group id")
    reset.add_argument("--topic", required=True, help="the topic whose partitions to reset (all of them)")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset (skip everything)")
    how.add_argument("--to-datetime", metavar="ISO", help="the first record at or after this time, e.g. 2026-11-23T21:00:00 (UTC unless an offset is given)")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N in every partition (clamped to the log)")
    how.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (negative: back)")
    reset.add_argument("--execute", action="store_true", help="commit the plan (default: only print it)")
    client_options(reset)
    reset.set_defaults(func=reset_offsets)


def _admin(args: argparse.Namespace):
    from data_plane.client.group_admin import GroupAdmin

    return open_coordinator_admin(args, GroupAdmin)


def list_groups(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        groups, unanswered = admin.list_groups()
    report_unanswered("groups list", unanswered, "groups")
    document = [g._asdict() for g in groups]
    human = table(["GROUP", "PROTOCOL", "STATE", "COORDINATOR", "MEMBERS"],
                  [(g.group_id, g.protocol, g.state, g.coordinator_id, g.member_count) for g in groups])
    emit(args.json, document, human if groups else "no consumer groups")
    return 0


def describe_group(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        d = admin.describe_group(args.group)
    members = [
        {
            "member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id, "host": m.client_host,
            "member_epoch": m.member_epoch,
            "assignment": {t.topic: sorted(t.partitions) for t in m.assignment},
            "target_assignment": {t.topic: sorted(t.partitions) for t in m.target_assignment},
        }
        for m in d.members
    ]
    document = {
        "group_id": d.group_id, "protocol": d.protocol, "state": d.state, "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor, "coordinator_id": d.coordinator_id, "members": members,
        "partitions": [p._asdict() for p in d.partitions],
    }
    clients = owner_labels(d.members)
    parts = [
        f"group {d.group_id} ({d.protocol} protocol): {d.state}, {'generation' if d.protocol == 'classic' else 'epoch'} {d.group_epoch}, "
        f"assignor {d.assignor or '-'}, coordinator broker {d.coordinator_id}, {plural(len(d.members), 'member')}",
    ]
    if d.members:
        parts.append(table(
            ["MEMBER", "INSTANCE", "CLIENT", "HOST", "EPOCH", "PARTITIONS"],
            [(m.member_id, m.instance_id or None, m.client_id, m.client_host, m.member_epoch,
              " ".join(f"{t.topic}-{p}" for t in m.assignment for p in t.partitions) or None) for m in d.members],
        ))
    if d.partitions:
        parts.append(table(
            ["TOPIC", "PARTITION", "OWNER", "COMMITTED", "LOG-END", "LAG"],
            [(p.topic, p.partition, clients.get(p.member_id, p.member_id) or None, p.committed, p.log_end, p.lag) for p in d.partitions],
        ))
    emit(args.json, document, "\n\n".join(parts))
    return 0


def owner_labels(members) -> dict[str, str]:
    """Each member's name in the OWNER column: ``client_id@host``, and where two members share
    that (two console consumers on one host), the start of the member id too, so that the
    column tells them apart (the MEMBER table above has the whole id)."""
    labels = {m.member_id: f"{m.client_id}@{m.client_host}" if m.client_host else m.client_id for m in members}
    shared = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    return {member_id: f"{label} ({member_id[:8]})" if label in shared else label for member_id, label in labels.items()}


def delete_group(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_group(args.group)
    emit(args.json, {"deleted": args.group}, f"deleted group {args.group}")
    return 0


def reset_offsets(args: argparse.Namespace) -> int:
    kind, value = _reset_spec(args)
    partitions = [(args.topic, p) for p in partitions_of(resolve_bootstrap(args.bootstrap, args.data_dir), args.topic)]
    with _admin(args) as admin:
        members = _member_count(admin, args.group)
        if members and args.execute:
            raise ValueError(
                f"group {args.group!r} has {plural(members, 'member')}: stop its consumers (or wait for their session timeout) "
                f"and run this again; 'kraftlog groups describe {args.group}' lists them"
            )
        steps = admin.plan_reset(args.group, partitions, kind, value)
        if args.execute:
            admin.execute_reset(args.group, steps)
    document = {"group_id": args.group, "executed": args.execute, "members": members, "plan": [s._asdict() for s in steps]}
    human = table(["TOPIC", "PARTITION", "CURRENT", "NEW"], [(s.topic, s.partition, s.current, s.target) for s in steps])
    if args.execute:
        human += f"\n\ncommitted new offsets for group {args.group}"
    else:
        human += "\n\ndry run: nothing changed; add --execute to commit these offsets"
        if members:
            human += f" (refused while the group has {plural(members, 'member')}: stop them first)"
    emit(args.json, document, human)
    return 0


def _member_count(admin, group_id: str) -> int:
    """Members of the group now (0 for a group the coordinator does not know)."""
    from data_plane.client.errors import KraftlogError

    try:
        return len(admin.describe_group(group_id).members)
    except KraftlogError as err:
        if err.error is ErrorCode.GROUP_ID_NOT_FOUND:
            return 0
        raise


def _reset_spec(args: argparse.Namespace) -> tuple[str, int | None]:
    if args.to_earliest:
        return "to-earliest", None
    if args.to_latest:
        return "to-latest", None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise ValueError("--to-offset must be >= 0")
        return "to-offset", args.to_offset
    if args.shift_by is not None:
        return "shift-by", args.shift_by
    try:
        when = datetime.fromisoformat(args.to_datetime)
    except ValueError:
        raise ValueError(f"--to-datetime {args.to_datetime!r} is not an ISO date-time: write e.g. 2026-11-23T21:00:00 or 2026-11-23T21:00:00+01:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return "to-datetime", int(when.timestamp() * 1000)
