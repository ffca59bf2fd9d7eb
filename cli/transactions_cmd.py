"""``kraftlog transactions list | describe ID | abort ID``: transactional ids and their
transactions, as kafka-transactions does."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Callable

from cli.bootstrap import resolve_bootstrap
from cli.admin_clients import open_coordinator_admin, report_unanswered
from cli.output import emit, table


def register(sub: argparse._SubParsersAction, client_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``transactions`` to the ``kraftlog`` parser."""
    transactions = sub.add_parser("transactions", help="transactional ids: list, describe, abort").add_subparsers(dest="action", required=True)
    listing = transactions.add_parser("list", help="every transactional id with its producer id, state and coordinator")
    listing.add_argument("--state", action="append", default=[],
                         help="only ids in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable")
    client_options(listing)
    listing.set_defaults(func=list_transactions)
    describe = transactions.add_parser("describe", help="an id's state, producer, timeout, start time and partitions")
    describe.add_argument("transactional_id", help="transactional id")
    client_options(describe)
    describe.set_defaults(func=describe_transaction)
    abort = transactions.add_parser(
        "abort", help="abort an id's open transaction (its producer is fenced: it must init again)")
    abort.add_argument("transactional_id", help="transactional id whose open transaction to abort")
    client_options(abort)
    abort.set_defaults(func=abort_transaction)


def _admin(args: argparse.Namespace):
    from data_plane.client.transaction_admin import TransactionAdmin

    return open_coordinator_admin(args, TransactionAdmin)


def list_transactions(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        listed, unanswered = admin.list_transactions(args.state)
    report_unanswered("transactions list", unanswered, "ids")
    document = [t._asdict() for t in listed]
    human = table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"],
                  [(t.transactional_id, t.producer_id, t.state, t.coordinator_id) for t in listed])
    emit(args.json, document, human if listed else "no transactional ids")
    return 0


def describe_transaction(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        d = admin.describe_transaction(args.transactional_id)
    partitions = {t.topic: sorted(t.partitions) for t in d.topics}
    document = {
        "transactional_id": d.transactional_id, "state": d.state, "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
        "transaction_timeout_ms": d.transaction_timeout_ms, "transaction_start_ms": d.transaction_start_ms,
        "last_update_ms": d.last_update_ms, "coordinator_id": d.coordinator_id, "partitions": partitions,
    }
    human = table(["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "STARTED (UTC)", "COORDINATOR", "PARTITIONS"],
                  [(d.transactional_id, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
                    utc_time(d.transaction_start_ms), d.coordinator_id,
                    " ".join(f"{t}-{p}" for t, ps in partitions.items() for p in ps) or None)])
    emit(args.json, document, human)
    return 0


def utc_time(epoch_ms: int) -> str | None:
    """A wall-clock time in ms for people (``2026-11-27T08:06:44.897Z``); None for -1 (no open
    transaction). ``--json`` keeps the milliseconds."""
    if epoch_ms < 0:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def abort_transaction(args: argparse.Namespace) -> int:
    """Abort what the id has open the way a new incarnation of its producer would: an
    InitProducerId bumps the epoch, so the coordinator aborts the open transaction (markers on
    every partition, the LSO moves on) and fences the producer that opened it. Kafka's tool
    aborts by producer id on a partition instead; here every transactional write is known to
    its coordinator, so the id is enough."""
    from data_plane.client import Producer

    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    with _admin(args) as admin:
        before = admin.describe_transaction(args.transactional_id)
    if before.state != "Ongoing":
        emit(args.json, {"transactional_id": args.transactional_id, "state": before.state, "aborted": False},
             f"{args.transactional_id} has no open transaction (state {before.state}): nothing to abort")
        return 0
    with Producer(bootstrap, transactional_id=args.transactional_id,
                  transaction_timeout_ms=before.transaction_timeout_ms) as producer:
        producer.init_transactions()  # returns once the aborted transaction's markers are written
    with _admin(args) as admin:
        after = admin.describe_transaction(args.transactional_id)
    document = {"transactional_id": args.transactional_id, "state": after.state, "producer_epoch": after.producer_epoch,
                "aborted": True}
    emit(args.json, document, f"aborted the open transaction of {args.transactional_id} (now {after.state}, epoch "
                              f"{after.producer_epoch}); its producer is fenced and must call init_transactions() again")
    return 0
