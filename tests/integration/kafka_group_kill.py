"""The consumer-group check every Kafka client goes through (kafka-python, aiokafka,
librdkafka): three members of one classic group, each its own OS process, share a topic's
partitions; one is SIGKILLed and the other two take its partitions over. Each member writes
what it was assigned and every record it processed to a file, and commits after processing.

The checker (``problems``) is one pure function so that every client is judged alike, and so
that a test can show it catches what it is meant to: a record produced and never processed,
and a committed offset that went backwards between two samples of the coordinator's view.
Samples are taken while the test waits (``CommitWatch.sample`` inside its conditions), from
kraftlog's own group admin, so the view is the coordinator's, not a client's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from data_plane.client import Producer
from data_plane.client.group_admin import GroupAdmin
from server_common.waiting import wait_for
from tests.cluster import TestCluster

RECORDS_PER_ROUND = 300  # produced before the kill and again after it
WAIT_S = 60

# Each member: subscribes, and after every poll writes its assignment and the records it
# processed, then commits. A commit refused because the group is rebalancing is Kafka's
# normal answer then (the next owner reads from the last commit: at least once), so it is
# written down instead of ending the member.
_KAFKA_PYTHON = """
import json, sys
from tests.integration.kafka_group_kill import report
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError, RebalanceInProgressError
bootstrap, topic, group, out = sys.argv[1:]
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                         max_poll_interval_ms=20000, client_id=out.rsplit("/", 1)[-1])
consumer.subscribe([topic])
with open(out, "a") as f:
    while True:
        polled = consumer.poll(timeout_ms=200)
        report(f, consumer.assignment(), [(r.partition, r.offset, r.value) for batch in polled.values() for r in batch])
        if polled:
            try:
                consumer.commit()
            except (CommitFailedError, RebalanceInProgressError) as exc:
                f.write(json.dumps({"commit_refused": str(exc)}) + "\\n")
"""

_AIOKAFKA = """
import asyncio, json, sys
from tests.integration.kafka_group_kill import report
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, RebalanceInProgressError
bootstrap, topic, group, out = sys.argv[1:]

async def main():
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                                max_poll_interval_ms=20000, client_id=out.rsplit("/", 1)[-1])
    await consumer.start()
    with open(out, "a") as f:
        while True:
            polled = await consumer.getmany(timeout_ms=200)
            report(f, consumer.assignment(), [(r.partition, r.offset, r.value) for batch in polled.values() for r in batch])
            if polled:
                try:
                    await consumer.commit()
                except (CommitFailedError, RebalanceInProgressError) as exc:
                    f.write(json.dumps({"commit_refused": str(exc)}) + "\\n")

asyncio.run(main())
"""

_LIBRDKAFKA = """
import json, sys
from tests.integration.kafka_group_kill import report
from confluent_kafka import Consumer, KafkaException
bootstrap, topic, group, out = sys.argv[1:]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     "max.poll.interval.ms": 20000, "client.id": out.rsplit("/", 1)[-1]})
consumer.subscribe([topic])
with open(out, "a") as f:
    while True:
        messages = [m for m in consumer.consume(500, 0.2) if m.error() is None]
        report(f, consumer.assignment(), [(m.partition(), m.offset(), m.value()) for m in messages])
        if messages:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                f.write(json.dumps({"commit_refused": str(exc)}) + "\\n")
"""

def report(f: TextIO, assigned: Iterable, records: list[tuple[int, int, bytes]]) -> None:
    """A member's account of one poll: its assignment (the client's topic-partitions), then
    each record it processed, flushed so the test reads it even after a SIGKILL."""
    f.write(json.dumps({"assigned": sorted(tp.partition for tp in assigned)}) + "\n")
    for partition, offset, value in records:
        f.write(json.dumps({"partition": partition, "offset": offset, "value": value.decode()}) + "\n")
    f.flush()


MEMBERS = {"kafka-python": _KAFKA_PYTHON, "aiokafka": _AIOKAFKA, "librdkafka": _LIBRDKAFKA}


def problems(produced: Iterable[str], processed: Iterable[str], samples: list[dict[int, int]]) -> list[str]:
    """What went wrong in a group run: records produced and never processed (each must be
    processed at least once), and any partition whose committed offset is lower in a sample
    than in an earlier one."""
    found = []
    lost = sorted(set(produced) - set(processed))
    if lost:
        found.append(f"{len(lost)} records produced and never processed, e.g. {lost[:5]}")
    highest: dict[int, int] = {}
    for at, sample in enumerate(samples):
        for partition, offset in sorted(sample.items()):
            if offset < highest.get(partition, -1):
                found.append(f"partition {partition}'s committed offset went back from {highest[partition]} to {offset} "
                             f"(sample {at})")
            highest[partition] = max(offset, highest.get(partition, -1))
    return found


def assert_survived(run: GroupRun) -> None:
    """The shared checker's verdict on a run, and its negative controls: the same evidence
    with one record never processed, or a commit that went back, is caught."""
    assert set(run.victim_partitions) <= {p for f in run.files[1:] for p in last_assignment(f)}
    processed = run.processed()
    assert problems(run.produced, processed, run.samples) == []
    assert set(run.produced) == processed  # nothing else was processed (a record may be processed twice: at least once)
    lost = problems(run.produced, processed - {run.produced[-1]}, run.samples)
    assert lost == [f"1 records produced and never processed, e.g. {[run.produced[-1]]}"], lost
    went_back = problems(run.produced, processed, [*run.samples, {0: run.samples[-1][0] - 1}])
    assert len(went_back) == 1 and "partition 0's committed offset went back" in went_back[0], went_back


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def last_assignment(path: Path) -> list[int] | None:
    assigned = [line["assigned"] for line in lines(path) if "assigned" in line]
    return assigned[-1] if assigned else None


@dataclass
class GroupRun:
    """One run's evidence: what was produced, the members' files, the commit samples."""

    topic: str
    partitions: int
    files: list[Path]
    produced: list[str] = field(default_factory=list)
    samples: list[dict[int, int]] = field(default_factory=list)
    victim_partitions: list[int] = field(default_factory=list)

    def processed(self) -> set[str]:
        return {line["value"] for f in self.files for line in lines(f) if "value" in line}

    def shared_by(self, live: list[Path]) -> bool:
        assigned = [last_assignment(f) for f in live]
        return all(assigned) and sorted(p for a in assigned for p in a) == list(range(self.partitions))


@contextmanager
def group_with_one_killed(cluster: TestCluster, client: str, topic: str, partitions: int, group: str,
                          directory: Path) -> Iterator[GroupRun]:
    """Runs the check up to its verdict and yields the run with the two survivors still up
    (so the caller may describe the group); every member is killed on the way out."""
    run = GroupRun(topic, partitions, [directory / f"{client}-member-{i}" for i in range(3)])
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    members = [subprocess.Popen([sys.executable, "-c", MEMBERS[client], cluster.kafka_bootstrap, topic, group, str(f)], env=env)
               for f in run.files]
    with GroupAdmin(cluster.bootstrap) as admin:
        def sample() -> None:
            committed = admin.committed_offsets(group)
            run.samples.append({p: offset for (t, p), offset in committed.items() if t == topic})

        def all_processed_and_committed(values: list[str], ends: dict[int, int]) -> bool:
            sample()
            return set(values) <= run.processed() and run.samples[-1] == ends

        try:
            wait_for(lambda: run.shared_by(run.files), WAIT_S, f"the three {client} members to share the {partitions} partitions")
            ends = _produce(cluster, run, topic, partitions, "before")
            wait_for(lambda: all_processed_and_committed(run.produced, ends), WAIT_S, "the first records processed and committed")

            run.victim_partitions = last_assignment(run.files[0]) or []
            members[0].send_signal(signal.SIGKILL)
            members[0].wait()
            wait_for(lambda: sample() or run.shared_by(run.files[1:]), WAIT_S,
                     "the two survivors to take over the killed member's partitions")
            ends = _produce(cluster, run, topic, partitions, "after")
            wait_for(lambda: all_processed_and_committed(run.produced, ends), WAIT_S,
                     "every record after the kill processed and committed by the survivors")
            yield run
        finally:
            for member in members:
                if member.poll() is None:
                    member.kill()
                    member.wait()


def _produce(cluster: TestCluster, run: GroupRun, topic: str, partitions: int, label: str) -> dict[int, int]:
    """``RECORDS_PER_ROUND`` more records, round robin over the partitions, through
    kraftlog's own producer (the client under test only consumes); each partition's end after."""
    values = [f"{label}-{i}" for i in range(RECORDS_PER_ROUND)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), partition=i % partitions)
    run.produced.extend(values)
    rounds = len(run.produced) // RECORDS_PER_ROUND
    return {p: rounds * (RECORDS_PER_ROUND // partitions + (p < RECORDS_PER_ROUND % partitions)) for p in range(partitions)}
