"""Log compaction on a real cluster (one controller, three brokers, replication factor 3).

Keyed overwrites and tombstones, from the Python producer and the records path, compact to
exactly the latest value of each key on every replica, at the offsets the producer got; an
aborted transaction's records and marker are removed on every replica and its overwrite of a
committed value never wins; a broker SIGKILLed while its cleaner is rewriting a segment
loses nothing and never uses a half-written cleaned file. The cleaner reads slowly here (``--cleaner-io-bytes-per-second``)
so a pass lasts long enough to be caught in the middle.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from data_plane.client import Consumer, Producer
from data_plane.record_batch import decode_batches, encode_batch
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

KILLS = 3
# The aborted-transaction test writes a made-up producer's batch and marker itself, with no
# coordinator to verify it (KIP-890 verification off).
CLEANER_ARGS = ["--cleaner-interval-ms", "200", "--cleaner-io-bytes-per-second", "40000", "--no-transaction-partition-verification"]
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "min.insync.replicas": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("compaction"), controllers=1, brokers=3, broker_args=CLEANER_ARGS) as running:
        yield running


@dataclass(frozen=True)
class Produced:
    by_offset: dict[int, tuple[bytes, bytes | None]]  # offset -> (key, value) as acknowledged
    tombstoned: set[bytes]

    def latest(self) -> dict[bytes, tuple[int, bytes | None]]:
        out: dict[bytes, tuple[int, bytes | None]] = {}
        for offset in sorted(self.by_offset):
            key, value = self.by_offset[offset]
            out[key] = (offset, value)
        return out


def produce_overwrites(cluster: TestCluster, topic: str, keys: int, rounds: int, tombstones: int) -> Produced:
    """``rounds`` values for each key, then tombstones for the first ``tombstones`` keys (the
    last one through the records path), then filler records with keys of their own so every
    tombstone lies in a closed segment."""
    futures = []
    with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:
        for r in range(rounds):
            futures += [producer.send(topic, b"round %d of key %d " % (r, k) * 3, key=b"key-%d" % k, partition=0) for k in range(keys)]
        futures += [producer.send(topic, None, key=b"key-%d" % k, partition=0) for k in range(tombstones - 1)]
        producer.flush(timeout=60)
        by_offset = {f.result(0).offset: (kv[0], kv[1]) for f, kv in zip(futures, _sent(keys, rounds, tombstones - 1))}
    tombstone_key = b"key-%d" % (tombstones - 1)
    by_offset[_produce_tombstone(cluster, topic, tombstone_key)] = (tombstone_key, None)
    with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:
        fillers = [(b"filler-%d" % i, b"f" * 200) for i in range(30)]
        futures = [producer.send(topic, v, key=k, partition=0) for k, v in fillers]
        producer.flush(timeout=60)
        by_offset.update({f.result(0).offset: kv for f, kv in zip(futures, fillers)})
    return Produced(by_offset, {b"key-%d" % k for k in range(tombstones)})


def _sent(keys: int, rounds: int, tombstones: int) -> list[tuple[bytes, bytes | None]]:
    sent = [(b"key-%d" % k, b"round %d of key %d " % (r, k) * 3) for r in range(rounds) for k in range(keys)]
    return sent + [(b"key-%d" % k, None) for k in range(tombstones)]


def _produce_tombstone(cluster: TestCluster, topic: str, key: bytes) -> int:
    """A tombstone through the records path: a Record with a key and no value."""
    with grpc.insecure_channel(cluster.broker(cluster.leader(topic, 0)).address) as channel:
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, topics=[broker_pb2.TopicProduceData(
            topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=0, records=[common_pb2.Record(key=key)])])])
        answer = broker_pb2_grpc.BrokerStub(channel).Produce(request, timeout=20).topics[0].partitions[0]
    assert answer.error_code == common_pb2.NONE, answer.error_message
    return answer.base_offset


def replica_records(cluster: TestCluster, broker: int, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record in this broker's own copy of partition 0."""
    records: list[tuple[int, bytes, bytes | None]] = []
    offset = 0
    with grpc.insecure_channel(cluster.broker(broker).address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        while True:
            request = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, repair_read=True, topics=[
                broker_pb2.FetchTopic(topic=topic, partitions=[broker_pb2.FetchPartition(partition=0, fetch_offset=offset)])])
            answer = stub.Fetch(request, timeout=20).topics[0].partitions[0]
            assert answer.error_code == common_pb2.NONE, answer.error_message
            batches = list(decode_batches(answer.batches))
            if not batches:
                return records
            for batch in batches:
                records += list(zip(batch.offsets, batch.keys, batch.values))
            offset = batches[-1].header.next_offset


def compaction_problems(records: list[tuple[int, bytes, bytes | None]], produced: Produced) -> list[str]:
    """What keeps this replica's records from being exactly the compacted log: a record not
    as produced at its offset, a key with more than one record (every overwrite and tombstone
    lies in a closed segment), a key whose latest value is missing, a tombstoned key still there."""
    problems = [f"offset {o}: {k!r}={v!r} was not produced there" for o, k, v in records if produced.by_offset.get(o) != (k, v)]
    seen: dict[bytes, list[int]] = {}
    for offset, key, _ in records:
        seen.setdefault(key, []).append(offset)
    problems += [f"key {k!r} has {len(offsets)} records" for k, offsets in seen.items() if len(offsets) > 1]
    for key, (offset, value) in produced.latest().items():
        if key in produced.tombstoned and key in seen:
            problems.append(f"tombstoned key {key!r} is still there")
        elif key not in produced.tombstoned and offset not in seen.get(key, []):
            problems.append(f"key {key!r}: latest value at offset {offset} missing")
    return problems


def wait_compacted(cluster: TestCluster, topic: str, produced: Produced, brokers=(1, 2, 3)) -> None:
    for broker in brokers:
        wait_for(lambda: not compaction_problems(replica_records(cluster, broker, topic), produced), timeout_s=90,
                 what=f"broker {broker}'s replica of {topic} to compact")


def kraftlog(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], capture_output=True, timeout=60, text=True)


def test_overwrites_and_tombstones_compact_to_the_latest_value_on_every_replica(cluster) -> None:
    topic = "compacted"
    configs = [arg for key, value in COMPACTED.items() for arg in ("--config", f"{key}={value}")]
    refused = kraftlog(cluster, "topics", "create", "bad-policy", "--config", "cleanup.policy=compress")
    assert refused.returncode != 0 and "compact,delete" in refused.stderr  # the error lists what is accepted
    created = kraftlog(cluster, "topics", "create", topic, "--partitions", "1", "--replication-factor", "3", *configs)
    assert created.returncode == 0, created.stderr
    cluster.wait_topic_ready(topic, 1)
    produced = produce_overwrites(cluster, topic, keys=20, rounds=15, tombstones=5)
    before = replica_records(cluster, cluster.leader(topic, 0), topic)
    assert any("records" in p for p in compaction_problems(before, produced))  # negative control: the raw log fails
    wait_compacted(cluster, topic, produced)
    for broker in (1, 2, 3):  # and no cleaned file is left lying around
        assert not list(partition_dir(cluster, broker, topic).glob("*.cleaned"))
    leader_view = replica_records(cluster, cluster.leader(topic, 0), topic)
    assert consume_all(cluster, topic, leader_view[-1][0] + 1) == leader_view  # consumers step over the gaps


def test_an_aborted_transaction_is_removed_by_compaction(cluster) -> None:
    """A transactional batch overwrites a committed key and is aborted: every replica's cleaner
    removes its records and (delete.retention.ms=0) its marker, and keeps the committed value."""
    topic = "compacted-txn"
    cluster.create_topic(topic, 1, 3, COMPACTED)
    with grpc.insecure_channel(cluster.broker(cluster.leader(topic, 0)).address) as channel:
        leader = broker_pb2_grpc.BrokerStub(channel)
        committed = _produce_batch(leader, topic, encode_batch([b"committed"], [b"key-x"]))
        aborted = _produce_batch(leader, topic, encode_batch([b"aborted", b"aborted too"], [b"key-x", b"key-y"], producer_id=900,
                                                             producer_epoch=0, base_sequence=0, transactional=True),
                                 transactional_id="compaction-txn")
        marker = broker_pb2.TxnMarker(producer_id=900, producer_epoch=1, commit=False, coordinator_epoch=0, topic=topic, partitions=[0])
        [written] = leader.WriteTxnMarkers(broker_pb2.WriteTxnMarkersRequest(markers=[marker]), timeout=10).results
        assert written.error_code == common_pb2.NONE, written.error_message
    removed = {aborted, aborted + 1, written.offset}

    def problems(broker: int) -> list[str]:
        records = replica_records(cluster, broker, topic)
        found = [f"offset {o} of the aborted transaction is still there" for o, _, _ in records if o in removed]
        if (committed, b"key-x", b"committed") not in records:
            found.append(f"key-x's committed value at offset {committed} is gone")
        return found

    assert problems(cluster.leader(topic, 0))  # negative control: the raw log (its active segment, never cleaned) holds them
    with Producer(cluster.bootstrap, acks="all", linger_ms=2) as producer:  # filler: the transaction's segment closes
        for i in range(30):
            producer.send(topic, b"f" * 200, key=b"filler-%d" % i, partition=0)
        producer.flush(timeout=60)
    for broker in (1, 2, 3):
        wait_for(lambda: not problems(broker), timeout_s=90, what=f"broker {broker}'s cleaner to remove the aborted transaction")


def _produce_batch(leader: broker_pb2_grpc.BrokerStub, topic: str, batch: bytes, transactional_id: str = "") -> int:
    """One batch through the batches path with acks=all; its base offset."""
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id=transactional_id, topics=[broker_pb2.TopicProduceData(
        topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=0, batches=batch)])])
    answer = leader.Produce(request, timeout=20).topics[0].partitions[0]
    assert answer.error_code == common_pb2.NONE, answer.error_message
    return answer.base_offset


def consume_all(cluster: TestCluster, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    """What the Python consumer reads of partition 0 from the beginning up to ``end``."""
    got: list[tuple[int, bytes, bytes | None]] = []
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        wait_for(lambda: bool(got.extend((r.offset, r.key, r.value) for r in consumer.poll(200))) or consumer.position((topic, 0)) >= end,
                 timeout_s=30, what=f"the consumer to read {topic} to offset {end}")
    return got


def partition_dir(cluster: TestCluster, broker: int, topic: str) -> Path:
    [found] = list((cluster.data_dir / cluster.broker(broker).name).rglob(f"{topic}-0"))
    return found


def cleaning_since(directory: Path, started: float) -> bool:
    """A cleaned file written after ``started`` is there (not one a killed process left)."""
    for path in directory.glob("*.cleaned"):
        try:
            if path.stat().st_mtime > started:
                return True
        except FileNotFoundError:
            continue  # installed or deleted meanwhile
    return False


def test_a_broker_killed_while_cleaning_loses_nothing(cluster) -> None:
    topic = "compacted-kill"
    cluster.create_topic(topic, 1, 3, COMPACTED)
    produced = produce_overwrites(cluster, topic, keys=40, rounds=60, tombstones=5)
    victim = next(b for b in (1, 2, 3) if b != cluster.leader(topic, 0))
    directory = partition_dir(cluster, victim, topic)
    node = cluster.broker(victim)
    started = 0.0
    for _ in range(KILLS):  # SIGKILL while this process's cleaner writes cleaned files, restart, again
        wait_for(lambda: cleaning_since(directory, started), timeout_s=60, what=f"broker {victim} to be mid-cleaning")
        cluster.kill(node)
        started = time.time()
        cluster.start_node(node)
    wait_compacted(cluster, topic, produced, brokers=(victim,))
    assert compaction_problems(replica_records(cluster, victim, topic), produced) == []
