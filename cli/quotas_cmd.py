"""``kraftlog quotas set | remove | describe``: client quotas (docs/quotas.md), as Kafka's
``kafka-configs --entity-type users/clients --alter --add-config producer_byte_rate=...``.

An entity is ``--user NAME``, ``--client-id ID`` or both; ``<default>`` as a name is that
dimension's default, and ``--default`` alone is short for ``--client-id '<default>'`` (every
client id that has no quota of its own, each measured on its own).
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Callable

from cli.admin_clients import open_clients
from cli.output import emit, table
from metadata_quorum.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QUOTA_KEYS, REQUEST_RATE, entity_of

if TYPE_CHECKING:  # the CLI imports the controller client only when a command needs it
    from metadata_quorum.controller_client import ControllerClient

DEFAULT_NAME = "<default>"
# option name -> quota key, in the order tables show them
RATE_OPTIONS = {"producer_byte_rate": PRODUCER_BYTE_RATE, "consumer_byte_rate": CONSUMER_BYTE_RATE, "request_rate": REQUEST_RATE}
_UNITS = {"": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}
_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*")


def parse_rate(raw: str) -> float:
    """A rate per second: a number, optionally with a unit (256KiB, 1MB, 5M)."""
    match = _RATE.fullmatch(raw)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected a number per second, optionally with a unit (1048576, 256KiB, 1MB), got '{raw}'")
    value = float(match.group(1)) * _UNITS[unit]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a quota must be above 0, got '{raw}' (to lift it: kraftlog quotas remove)")
    return value


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``quotas set | remove | describe`` to the ``kraftlog`` parser."""
    quotas = sub.add_parser("quotas", help="client quotas: produce and fetch byte rates and request rates per user and client id").add_subparsers(dest="action", required=True)
    set_parser = quotas.add_parser("set", help="set quota values of a user, a client id, both, or a default")
    _entity_options(set_parser)
    set_parser.add_argument("--producer-byte-rate", type=parse_rate, help="bytes per second of Produce requests (e.g. 1MiB)")
    set_parser.add_argument("--consumer-byte-rate", type=parse_rate, help="bytes per second of Fetch answers and Consume messages")
    set_parser.add_argument("--request-rate", type=parse_rate, help="requests per second to each broker")
    client_options(set_parser)
    set_parser.set_defaults(func=set_quotas)
    remove = quotas.add_parser("remove", help="remove quota values of an entity (all of them unless named)")
    _entity_options(remove)
    for option in RATE_OPTIONS:
        remove.add_argument("--" + option.replace("_", "-"), action="store_true", help=f"remove {option}")
    client_options(remove)
    remove.set_defaults(func=remove_quotas)
    describe = quotas.add_parser("describe", help="entities with quotas and their values")
    describe.add_argument("--user", help=f"only entities naming this user ('{DEFAULT_NAME}': the default user)")
    describe.add_argument("--client-id", help=f"only entities naming this client id ('{DEFAULT_NAME}': the default)")
    client_options(describe)
    describe.set_defaults(func=describe_quotas)


def _entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", help=f"the user (principal name without 'User:'); '{DEFAULT_NAME}': every user without a quota of their own")
    parser.add_argument("--client-id", help=f"the client id; '{DEFAULT_NAME}': every client id without a quota of its own")
    parser.add_argument("--default", action="store_true", help=f"short for --client-id '{DEFAULT_NAME}'")


def _name(raw: str | None) -> str | None:
    """A CLI name as the protocol carries it: "" for the default."""
    if raw is None:
        return None
    if raw == "":
        raise ValueError(f"an empty name is not an entity: give a name, or '{DEFAULT_NAME}' for the default")
    return "" if raw == DEFAULT_NAME else raw


def _entity(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.default and args.client_id is not None:
        raise ValueError(f"--default is short for --client-id '{DEFAULT_NAME}': give one of them, not both")
    entity = (_name(args.user), "" if args.default else _name(args.client_id))
    if entity == (None, None):
        raise ValueError("name the entity: --user NAME, --client-id ID (or both), or --default; e.g. kraftlog quotas set --user alice --producer-byte-rate 1MiB")
    return entity


def _shown(name: str | None) -> str | None:
    return DEFAULT_NAME if name == "" else name


def set_quotas(args: argparse.Namespace) -> int:
    entity = _entity(args)
    values = {key: getattr(args, option) for option, key in RATE_OPTIONS.items() if getattr(args, option) is not None}
    if not values:
        raise ValueError("give at least one of --producer-byte-rate, --consumer-byte-rate, --request-rate")
    admin, controller = open_clients(args)
    with admin, controller:
        controller.alter_client_quotas(entity, set_values=values)
    _report(args, "set", entity, values)
    return 0


def remove_quotas(args: argparse.Namespace) -> int:
    """Remove the named rates of the entity; without any named, every rate it has, and the
    report names only those (not rates it never had)."""
    entity = _entity(args)
    named = [key for option, key in RATE_OPTIONS.items() if getattr(args, option)]
    admin, controller = open_clients(args)
    with admin, controller:
        keys = named or _rates_of(controller, entity)
        if not keys:
            user, client_id = (_shown(name) for name in entity)
            emit(args.json, {"action": "removed", "user": user, "client_id": client_id, "values": {}},
                 f"{_who(entity)} has no quotas: nothing to remove (kraftlog quotas describe lists the entities that have)")
            return 0
        controller.alter_client_quotas(entity, remove_keys=keys)
    _report(args, "removed", entity, {key: None for key in keys})
    return 0


def _rates_of(controller: ControllerClient, entity: tuple[str | None, str | None]) -> list[str]:
    """The quota keys set on exactly ``entity``, in the order tables show them."""
    response = controller.describe_client_quotas(*entity)
    values = next((dict(e.values) for e in response.entries if entity_of(e.entity) == entity), {})
    return [key for key in QUOTA_KEYS if key in values]


def _report(args: argparse.Namespace, action: str, entity: tuple[str | None, str | None], values: dict) -> None:
    user, client_id = (_shown(name) for name in entity)
    changes = ", ".join(key if value is None else f"{key}={value:g}" for key, value in values.items())
    emit(args.json, {"action": action, "user": user, "client_id": client_id, "values": values}, f"{action} {changes} for {_who(entity)}")


def _who(entity: tuple[str | None, str | None]) -> str:
    """The entity as people read it: "user alice, client id app"."""
    user, client_id = (_shown(name) for name in entity)
    return ", ".join(f"{label} {name}" for label, name in (("user", user), ("client id", client_id)) if name is not None)


def describe_quotas(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    with admin, controller:
        response = controller.describe_client_quotas(_name(args.user), _name(args.client_id))
    rows = []
    for entry in response.entries:
        user, client_id = entity_of(entry.entity)
        rows.append({"user": _shown(user), "client_id": _shown(client_id), "values": dict(entry.values)})
    human = table(
        ["USER", "CLIENT-ID", *(key.upper() for key in QUOTA_KEYS)],
        [[r["user"], r["client_id"], *(_figure(r["values"].get(key)) for key in QUOTA_KEYS)] for r in rows],
    ) if rows else "no client quotas set"
    emit(args.json, rows, human)
    return 0


def _figure(value: float | None) -> str | None:
    if value is None:
        return None
    return str(int(value)) if value.is_integer() else f"{value:g}"
