"""``kraftlog produce`` and ``kraftlog consume``: stdin lines in, record values out."""

from __future__ import annotations

import argparse
import sys
import time

from cli import partition_check
from cli.admin_clients import open_clients
from cli.output import plural
from cli.bootstrap import check_partition, partitions_of, resolve_bootstrap, topic_partitions

ACKS = {"all": "all", "1": 1, "0": 0}
MAX_REQUEST_SIZE_DEFAULT = 16 * 1024 * 1024  # the Producer's
BATCH_SIZE_DEFAULT = 256 * 1024  # the Producer's; a smaller --max-request-size lowers it
NULL = b"null"  # how consume prints a null key or value


# The Producer's settings `kraftlog produce --producer-setting NAME=VALUE` may set (the others
# have options of their own, or are not for a command-line producer: security, transactions).
PRODUCER_SETTINGS = ("linger_ms", "batch_size", "retries", "delivery_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms",
                     "max_in_flight_per_broker", "max_in_flight_per_partition", "buffer_memory", "max_block_ms",
                     "request_timeout_ms", "enable_idempotence", "client_id", "partitioner")


# Settings whose default's type is not theirs (None, or an int where the producer takes any number).
_SETTING_TYPES = {"enable_idempotence": bool, "max_in_flight_per_partition": int, **dict.fromkeys(
    ("linger_ms", "delivery_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms", "max_block_ms", "request_timeout_ms"), float)}
_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


def producer_settings(pairs: list[str]) -> dict[str, object]:
    """``NAME=VALUE`` pairs as Producer keyword arguments, each VALUE read as the type of the
    setting's default; a name the producer does not take, or a value of the wrong type, is a
    ValueError that lists what is accepted."""
    from dataclasses import fields

    from data_plane.client.producer_options import ProducerOptions

    defaults = {f.name: f.default for f in fields(ProducerOptions) if f.name in PRODUCER_SETTINGS}
    settings: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or name not in defaults:
            raise ValueError(f"--producer-setting {pair!r}: write NAME=VALUE with NAME one of {', '.join(PRODUCER_SETTINGS)}")
        kind = _SETTING_TYPES.get(name) or type(defaults[name])
        try:
            if kind is bool and text not in ("true", "false"):
                raise ValueError(text)
            settings[name] = text == "true" if kind is bool else kind(text)
        except ValueError:
            raise ValueError(f"--producer-setting {name}={text!r}: the value must be {_TYPE_NAMES[kind]}") from None
    return settings


def produce(args: argparse.Namespace) -> int:
    from data_plane.client import Producer

    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    _check_writable(bootstrap, args)
    futures = []
    null = None if args.null_marker is None else args.null_marker.encode()
    settings = {"acks": ACKS[args.acks], "compression": args.compression, "max_request_size": args.max_request_size,
                "batch_size": min(BATCH_SIZE_DEFAULT, args.max_request_size), **producer_settings(args.producer_setting)}
    with Producer(bootstrap, **settings) as producer:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            key = None
            if args.key_separator:
                sep = args.key_separator.encode()
                if sep not in line:
                    raise ValueError(f"line {len(futures) + 1} has no key separator '{args.key_separator}': write KEY{args.key_separator}VALUE; "
                                     f"the {len(futures)} line(s) before it were sent, nothing from it on")
                key, line = line.split(sep, 1)
                key = None if key == null else key
            value = None if line == null else line
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
        producer.flush()
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        print(f"kraftlog produce: {len(errors)} of {len(futures)} records failed; first error: {errors[0]}", file=sys.stderr)
        return 1
    print(f"sent {plural(len(futures), 'record')} to {args.topic}", file=sys.stderr)
    return 0


def _targets(bootstrap: str, args: argparse.Namespace) -> tuple[dict, list[int]]:
    """The topic's partitions as a broker describes them, and the numbers the command uses:
    --partition (which must exist) or all."""
    partitions = topic_partitions(bootstrap, args.topic)
    check_partition(args.topic, args.partition, sorted(partitions))
    return partitions, [args.partition] if args.partition is not None else sorted(partitions)


def _check_writable(bootstrap: str, args: argparse.Namespace) -> None:
    """Refuse at once when no partition the command writes to takes writes now; warn when
    some do not (cli/partition_check.py says why)."""
    partitions, targets = _targets(bootstrap, args)
    min_insync = _min_insync_replicas(args) if args.acks == "all" else None
    refused = partition_check.refusals(partitions, targets, min_insync)
    if refused and len(refused) == len(targets):
        raise ValueError(partition_check.refusal_message(args.topic, refused))
    if refused:
        print(f"kraftlog produce: {partition_check.warning_message(args.topic, refused)}", file=sys.stderr)


def _readable(bootstrap: str, args: argparse.Namespace) -> list[int]:
    """The partitions ``consume`` reads without --group: --partition or all, less those
    without a leader (said on stderr); none left is an error saying why."""
    partitions, targets = _targets(bootstrap, args)
    refused = partition_check.refusals(partitions, targets, None)
    if len(refused) == len(targets):
        raise ValueError(partition_check.refusal_message(args.topic, refused, "read"))
    if refused:
        print(f"kraftlog consume: {partition_check.unread_message(args.topic, refused)}", file=sys.stderr)
    return [p for p in targets if p not in refused]


def _min_insync_replicas(args: argparse.Namespace) -> int | None:
    """The topic's min.insync.replicas as the controllers have it; None when they cannot be
    asked within a few seconds (the check is then left to the brokers, which have the last word)."""
    from data_plane.client import KraftlogError
    from metadata_quorum.controller_client import ControllerError

    try:
        admin, controller = open_clients(args, controller_timeout_s=5.0)
        with admin, controller:
            entries = controller.describe_configs([args.topic]).get(args.topic, [])
    except (KraftlogError, ControllerError):
        return None
    return next((int(e.value) for e in entries if e.key == "min.insync.replicas"), None)


def consume(args: argparse.Namespace) -> int:
    from data_plane.client import Consumer

    if args.offset is not None and args.partition is None:
        raise ValueError("--offset needs --partition: say which partition the offset belongs to")
    if args.group and args.partition is not None:
        raise ValueError("--group reads the partitions the group assigns: drop --partition/--offset, or drop --group to pick them")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    if args.group:
        partitions_of(bootstrap, args.topic)  # a missing topic: an error saying how to create it, not a member waiting for it
        reset = "earliest" if args.from_beginning else "latest"
        consumer = Consumer(bootstrap, group_id=args.group, auto_offset_reset=reset, enable_auto_commit=False, client_id="kraftlog-console",
                            isolation_level=args.isolation_level)
        printed_upto = GroupProgress(consumer, args.commit_interval_ms / 1000.0)
        consumer.subscribe([args.topic], on_revoked=printed_upto.commit_revoked, on_lost=printed_upto.forget)
    else:
        # The start (log start or end) is the consumer's offset reset, which poll resolves per
        # partition leader: a leader that does not answer holds up only its own partitions
        # (retried with a backoff), not every partition up to the request timeout as a seek would.
        reset = "earliest" if args.from_beginning else "latest"
        consumer = Consumer(bootstrap, auto_offset_reset=reset, isolation_level=args.isolation_level)
        printed_upto = None
        consumer.assign([(args.topic, p) for p in _readable(bootstrap, args)])
        if args.offset is not None:
            consumer.seek((args.topic, args.partition), args.offset)
    printed = 0
    out = sys.stdout.buffer
    with consumer:
        last_record = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            records = consumer.poll(timeout_ms=200)
            if printed_upto is not None:
                printed_upto.commit_async_when_due()  # also while idle: the last records printed before it
            if not records:
                if args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                    break
                continue
            last_record = time.monotonic()
            for record in records:
                if args.print_key:
                    out.write((NULL if record.key is None else record.key) + b"\t")
                out.write((NULL if record.value is None else record.value) + b"\n")
                printed += 1
                if printed_upto is not None:
                    printed_upto.printed(record)
                if args.max_messages is not None and printed >= args.max_messages:
                    break
            out.flush()
        if printed_upto is not None:
            printed_upto.commit()
    return 0


class GroupProgress:
    """``consume --group``: commits exactly what was printed (a poll may return more than
    --max-messages lets through), every interval, before a revocation and at exit.

    Every interval, not once per poll: a poll hands out at most ``max_poll_records``, so a
    consumer working through a backlog still commits on time, and a crash re-reads about one
    interval's worth of records (plus one poll's), never everything since it started."""

    def __init__(self, consumer, interval_s: float) -> None:
        self._consumer = consumer
        self._interval_s = interval_s
        self._next_commit = time.monotonic() + interval_s
        self._next: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}

    def printed(self, record) -> None:
        self._next[(record.topic, record.partition)] = record.offset + 1

    def _due(self, tps=None) -> dict[tuple[str, int], int]:
        return {tp: o for tp, o in self._next.items() if self._committed.get(tp) != o and (tps is None or tp in tps)}

    def commit_async_when_due(self) -> None:
        """Commits (without waiting) what was printed, once the interval has passed."""
        if time.monotonic() < self._next_commit:
            return
        self._next_commit = time.monotonic() + self._interval_s
        due = self._due()
        if due:
            self._consumer.commit_async(due, self._async_done)
            self._committed.update(due)

    def _async_done(self, offsets, error) -> None:
        """A failed async commit is said, and its partitions go again with the next commit."""
        if error is not None:
            print(f"kraftlog consume: commit failed, retried with the next one: {error}", file=sys.stderr)
            for tp, committed in offsets.items():
                if self._committed.get(tp) == committed.offset:
                    self._committed.pop(tp, None)

    def commit(self, tps=None) -> None:
        due = self._due(tps)
        if due:
            self._consumer.commit(due)
            self._committed.update(due)

    def commit_revoked(self, revoked: set[tuple[str, int]]) -> None:
        self.commit(revoked)
        self.forget(revoked)

    def forget(self, tps: set[tuple[str, int]]) -> None:
        for tp in tps:
            self._next.pop(tp, None)
            self._committed.pop(tp, None)

