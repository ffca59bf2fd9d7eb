"""``kraftlog perf consume --group G --members N``: a consumer group's read throughput and
its rebalance time, with each member in its own process (as a real fleet runs, and so that
members do not share one interpreter lock).

Throughput: once the group is balanced (before that, members seek back whatever they poll),
the members read the topic from the group's committed offsets (earliest where none) until
``--num-records`` have been read in total; records/s is counted from that start to the
moment the total was reached (members report counts every 0.2 s, so the end is late by up
to that much).

Rebalance time (``--joins K`` rounds): with the group stable, one more member subscribes,
and the time runs from its ``subscribe()`` to the moment the assignment is stable again:
every partition owned by exactly one member, the newcomer among them, and each member
owning ``floor(P/M)`` or ``ceil(P/M)`` partitions (M members). It then closes and the time
until the others own everything again is the leave time. Members report what they own after
every poll (polls of ``POLL_MS``), so the times are what the members saw, within a poll.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import statistics
import sys
import time
from typing import NamedTuple

from cli.bootstrap import resolve_bootstrap
from cli.output import emit
from cli.perf_common import topic_partitions

POLL_MS = 10
REPORT_INTERVAL_S = 0.2
READY_TIMEOUT_S = 60.0


class Event(NamedTuple):
    """What a member process tells the parent: ``kind`` "joined" (value: its subscribe
    time), "owned" (value: the partitions it owns), "count" (records read since the last
    count) or "failed" (value: the error)."""

    member: int
    kind: str
    at_s: float  # time.time(): comparable across processes on one machine
    value: object


def _member_main(bootstrap: str, topic: str, group: str, index: int, events, stop, go) -> None:
    """One member: subscribe, poll until told to stop, report ownership and counts. Until
    ``go`` is set it reads nothing for good: each poll's partitions are sought back to where
    the poll started, so the timed read starts with the group already balanced."""
    from data_plane.client import Consumer
    from server_common.logging_setup import configure_logging

    configure_logging(level="WARNING")

    try:
        with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", client_id=f"perf-member-{index}") as consumer:
            events.put(Event(index, "joined", time.time(), None))
            consumer.subscribe([topic])
            owned: frozenset = frozenset()
            counted, last_report = 0, time.monotonic()
            while not stop.is_set():
                batches = consumer.poll_batches(timeout_ms=POLL_MS)
                if not go.is_set():
                    for tp, bs in batches.items():
                        consumer.seek(tp, bs[0].header.base_offset)
                    batches = {}
                counted += sum(b.header.record_count for bs in batches.values() for b in bs)
                now_owned = frozenset(consumer.assignment())
                if now_owned != owned:
                    owned = now_owned
                    events.put(Event(index, "owned", time.time(), sorted(owned)))
                if counted and time.monotonic() - last_report >= REPORT_INTERVAL_S:
                    events.put(Event(index, "count", time.time(), counted))
                    counted, last_report = 0, time.monotonic()
            if counted:
                events.put(Event(index, "count", time.time(), counted))
    except Exception as err:  # noqa: BLE001 - reported to the parent, which fails the run
        events.put(Event(index, "failed", time.time(), f"{type(err).__name__}: {err}"))


class Fleet:
    """The member processes and what they reported."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self.events = self._ctx.Queue()
        self._args = (bootstrap, topic, group)
        self.partitions = partitions
        self.procs: dict[int, tuple] = {}
        self.owned: dict[int, frozenset] = {}
        self.joined_at: dict[int, float] = {}
        self.records = 0
        self.go = self._ctx.Event()

    def start(self, index: int) -> None:
        stop = self._ctx.Event()
        proc = self._ctx.Process(target=_member_main, args=(*self._args, index, self.events, stop, self.go), daemon=True)
        proc.start()
        self.procs[index] = (proc, stop)

    def stop(self, index: int) -> None:
        proc, stop = self.procs.pop(index)
        stop.set()
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
        self.owned.pop(index, None)

    def close(self) -> None:
        for index in list(self.procs):
            self.stop(index)

    def drain(self, wait_s: float) -> float | None:
        """Takes reported events (waiting up to ``wait_s`` for the first); returns the
        report time of the last ownership change, if any."""
        changed = None
        try:
            event = self.events.get(timeout=wait_s)
        except queue.Empty:
            return None
        while True:
            if event.kind == "failed":
                raise RuntimeError(f"member {event.member} failed: {event.value}")
            if event.kind == "joined":
                self.joined_at[event.member] = event.at_s
            elif event.kind == "owned" and event.member in self.procs:
                self.owned[event.member] = frozenset(map(tuple, event.value))
                changed = event.at_s
            elif event.kind == "count":
                self.records += event.value
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return changed

    def balanced(self) -> bool:
        """Every partition owned once, by the members running now, each with its fair share."""
        members = list(self.procs)
        shares = [len(self.owned.get(m, ())) for m in members]
        owned = [tp for m in members for tp in self.owned.get(m, ())]
        low, high = self.partitions // len(members), -(-self.partitions // len(members))
        return len(owned) == len(set(owned)) == self.partitions and all(low <= s <= high for s in shares)

    def wait_balanced(self, timeout_s: float) -> float:
        """Waits until ``balanced``; returns the time of the ownership change that made it so."""
        deadline = time.monotonic() + timeout_s
        last_change = time.time()
        while time.monotonic() < deadline:
            changed = self.drain(0.05)
            if changed is not None:
                last_change = changed
            if self.balanced():
                return last_change
        raise TimeoutError(f"the group's assignment was not balanced within {timeout_s:.0f}s: owned {dict(self.owned)}")


def run(args: argparse.Namespace) -> int:
    if args.members < 1 or args.num_records < 1 or args.joins < 0:
        raise ValueError("--members and --num-records must be positive, --joins >= 0")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    partitions = len(topic_partitions(bootstrap, args.topic))
    fleet = Fleet(bootstrap, args.topic, args.group, partitions)
    try:
        for i in range(args.members):
            fleet.start(i)
        fleet.wait_balanced(READY_TIMEOUT_S)
        started_at = time.time()
        fleet.go.set()
        deadline = time.monotonic() + args.timeout_ms / 1000.0
        while fleet.records < args.num_records:
            before = fleet.records
            fleet.drain(0.5)
            if fleet.records > before:
                deadline = time.monotonic() + args.timeout_ms / 1000.0
            elif time.monotonic() > deadline:
                raise TimeoutError(f"only {fleet.records:,} of {args.num_records:,} records read: does the topic hold that many "
                                   f"past the group's committed offsets? (lower --num-records, or use a new --group)")
        elapsed = time.time() - started_at
        joins, leaves = [], []
        for round_ in range(args.joins):
            newcomer = args.members + round_
            fleet.start(newcomer)
            stable_at = fleet.wait_balanced(READY_TIMEOUT_S)
            joins.append(round((stable_at - fleet.joined_at[newcomer]) * 1000, 1))
            left_at = time.time()
            fleet.stop(newcomer)
            leaves.append(round((fleet.wait_balanced(READY_TIMEOUT_S) - left_at) * 1000, 1))
            print(f"  join {round_ + 1}: {joins[-1]} ms to a stable assignment, leave: {leaves[-1]} ms", file=sys.stderr, flush=True)
    finally:
        fleet.close()
    document = {
        "members": args.members, "partitions": partitions, "records": fleet.records, "elapsed_s": round(elapsed, 3),
        "records_per_sec": round(fleet.records / elapsed, 1) if elapsed > 0 else 0.0,
        "join_rebalance_ms": joins, "leave_rebalance_ms": leaves,
        "join_rebalance_ms_median": round(statistics.median(joins), 1) if joins else None,
    }
    human = f"{args.members} members on {partitions} partitions: {fleet.records:,} records in {elapsed:.2f}s, {document['records_per_sec']:,.0f} records/s"
    if joins:
        human += f"; a member joining: {document['join_rebalance_ms_median']} ms median to a stable assignment ({joins}), leaving: {leaves} ms"
    emit(args.json, document, human)
    return 0


def run_commits(args: argparse.Namespace) -> int:
    """``kraftlog perf commit``: offset commits per second to one group's coordinator.

    Admin commits (no member; the group must have none) of every partition of ``--topic``
    in each request, ``--in-flight`` requests outstanding at once, for ``--duration`` s. A
    request committing P partitions counts as P commits (each is one record at the
    coordinator); requests/s is reported too."""
    from data_plane.client.group_admin import GroupAdmin
    from data_plane.client.group_membership import offset_commit_request

    if args.duration <= 0 or args.in_flight < 1:
        raise ValueError("--duration and --in-flight must be positive")
    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    partitions = topic_partitions(bootstrap, args.topic)
    with GroupAdmin(bootstrap) as admin:
        stub, link = admin.coordinator_stub(args.group)

        def request(i: int):
            return offset_commit_request(args.group, "", -1, {(args.topic, p): (i, -1) for p in partitions})

        started = time.monotonic()
        end = started + args.duration
        in_flight, sent, answered, latencies = [], 0, 0, []
        while time.monotonic() < end or in_flight:
            while len(in_flight) < args.in_flight and time.monotonic() < end:
                in_flight.append((time.perf_counter(), stub.OffsetCommit.future(request(sent), timeout=30)))
                sent += 1
            sent_at, future = in_flight.pop(0)
            answer = future.result()
            latencies.append((time.perf_counter() - sent_at) * 1000)
            if answer.error_code or any(p.error_code for t in answer.topics for p in t.partitions):
                raise RuntimeError(f"commit refused: {answer}")
            answered += 1
        elapsed = time.monotonic() - started
    commits = answered * len(partitions)
    document = {
        "requests": answered, "partitions_per_request": len(partitions), "commits": commits, "elapsed_s": round(elapsed, 3),
        "commits_per_sec": round(commits / elapsed, 1), "requests_per_sec": round(answered / elapsed, 1),
        "latency_ms_p50": round(statistics.median(latencies), 2), "coordinator": link.coordinator_id,
    }
    human = (f"{commits:,} offset commits ({answered:,} requests of {len(partitions)} partitions) in {elapsed:.2f}s to broker "
             f"{link.coordinator_id}: {document['commits_per_sec']:,.0f} commits/s, {document['requests_per_sec']:,.0f} requests/s, "
             f"p50 {document['latency_ms_p50']} ms per request")
    emit(args.json, document, human)
    return 0
