"""Damaged bytes, with real broker processes: a CRC-valid batch with a garbage body is refused
on produce; a byte flipped in a leader's segment is found, repaired from a replica, and every
record stays readable; after kill -9, a damaged batch in the middle of the log keeps the
batches after it (RF=1: its range is lost, reported, and never reused; RF=3: it is fetched
back from a replica)."""

from __future__ import annotations

import json

import struct
import zlib
from pathlib import Path

import grpc
import pytest

from data_plane.record_batch import HEADER_SIZE, encode_batch, iter_headers
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

BATCH_RECORDS = 50


def produce_batches(cluster: TestCluster, topic: str, batches: int, acks: str | int = "all") -> None:
    """``batches`` batches of BATCH_RECORDS records; record i holds the value ``v<i>``."""
    from data_plane.client import Producer

    with Producer(cluster.bootstrap, acks=acks) as producer:
        futures = [
            producer.send_batch(topic, 0, [f"v{b * BATCH_RECORDS + i}".encode() for i in range(BATCH_RECORDS)])
            for b in range(batches)
        ]
        producer.flush(timeout=60)
    assert all(f.exception() is None for f in futures)


def read_offsets(cluster: TestCluster, topic: str, until_offset: int, timeout_s: float = 30) -> dict[int, bytes]:
    """offset -> value of every record a consumer from the beginning gets before ``until_offset``."""
    from data_plane.client import Consumer

    got: dict[int, bytes] = {}
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning([(topic, 0)])

        def reached_end() -> bool:
            got.update((r.offset, r.value) for r in consumer.poll(timeout_ms=200))
            return (consumer.position((topic, 0)) or 0) >= until_offset

        wait_for(reached_end, timeout_s, f"a consumer of {topic}-0 reaching offset {until_offset}")
    return got


def segment_of(cluster: TestCluster, broker_id: int, topic: str) -> Path:
    return sorted((cluster.data_dir / cluster.broker(broker_id).name / f"{topic}-0").glob("*.log"))[0]


def flip_byte_in_batch(segment: Path, base_offset: int) -> None:
    """Flip one byte in the body of the batch starting at ``base_offset`` (its header stays whole)."""
    raw = bytearray(segment.read_bytes())
    position = next(pos for pos, header in iter_headers(raw) if header.base_offset == base_offset)
    raw[position + HEADER_SIZE + 10] ^= 0xFF
    with open(segment, "r+b") as f:  # in place: a running broker sees it through the page cache
        f.seek(position + HEADER_SIZE + 10)
        f.write(raw[position + HEADER_SIZE + 10 : position + HEADER_SIZE + 11])


def replica_logs(cluster: TestCluster, topic: str) -> dict[int, broker_pb2.PartitionLogState]:
    """Each broker's DescribeLogs state of ``topic``-0, with its checksum below the log end."""
    states = {}
    for node in cluster.brokers:
        with grpc.insecure_channel(node.address) as channel:
            answer = broker_pb2_grpc.BrokerStub(channel).DescribeLogs(
                broker_pb2.DescribeLogsRequest(topics=[topic], include_checksums=True, checksum_upto_offset=1 << 62), timeout=5
            )
        states[node.node_id] = next(p for p in answer.partitions if p.partition == 0)
    return states


def broker_log(cluster: TestCluster, broker_id: int) -> str:
    return cluster.log_path(cluster.broker(broker_id)).read_text()


def last_load_was_clean(cluster: TestCluster, broker_id: int) -> bool:
    """Whether the broker's latest start found its logs shut down cleanly (no recovery)."""
    loads = [json.loads(line) for line in broker_log(cluster, broker_id).splitlines() if '"logs loaded"' in line]
    return bool(loads[-1]["clean_shutdown"])


# ---------------------------------------------------------------------------------- produce


def raw_produce(cluster: TestCluster, topic: str, batch: bytes) -> broker_pb2.PartitionProduceResponse:
    request = broker_pb2.ProduceRequest(acks=1, timeout_ms=5000, topics=[
        broker_pb2.TopicProduceData(topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=0, batches=batch)]),
    ])
    with grpc.insecure_channel(cluster.broker(1).address) as channel:
        return broker_pb2_grpc.BrokerStub(channel).Produce(request, timeout=10).topics[0].partitions[0]


def with_crc(raw: bytearray) -> bytes:
    struct.pack_into("<I", raw, 17, zlib.crc32(raw[21:]))
    return bytes(raw)


def test_crc_valid_garbage_and_out_of_range_fields_are_refused_and_the_partition_stays_readable(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic("bodies", partitions=1, replication_factor=1)
        assert raw_produce(cluster, "bodies", encode_batch([b"good"])).error_code == common_pb2.NONE

        garbage = bytearray(encode_batch([b"abc", b"def"]))
        garbage[HEADER_SIZE : HEADER_SIZE + 16] = b"\xf6\xff\xff\xff" * 4  # lengths and header counts of -10
        refusals = {
            "garbage body": (with_crc(garbage), common_pb2.INVALID_RECORD, "body does not parse"),
            "base_sequence=-7": (encode_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=-7), common_pb2.INVALID_RECORD, "base_sequence"),
            "producer_epoch=-3": (encode_batch([b"x"], producer_id=5, producer_epoch=-3, base_sequence=0), common_pb2.INVALID_RECORD, "producer_epoch"),
            "producer_id=-9": (encode_batch([b"x"], producer_id=-9, producer_epoch=0, base_sequence=0), common_pb2.INVALID_RECORD, "producer_id"),
            "negative timestamp": (encode_batch([b"x"], timestamps_ms=-5), common_pb2.INVALID_TIMESTAMP, "timestamps must be >= 0"),
        }
        for name, (batch, code, text) in refusals.items():
            answer = raw_produce(cluster, "bodies", batch)
            assert answer.error_code == code, f"{name}: {common_pb2.ErrorCode.Name(answer.error_code)} {answer.error_message}"
            assert text in answer.error_message and "nothing was written" in answer.error_message, name

        assert raw_produce(cluster, "bodies", encode_batch([b"after"])).base_offset == 1, "nothing refused took an offset"
        assert read_offsets(cluster, "bodies", 2) == {0: b"good", 1: b"after"}


# ---------------------------------------------------------------------------------- leader segment


def test_corrupt_leader_segment_is_found_repaired_from_a_replica_and_fully_readable(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=["--scrub-bytes-per-second", "0"]) as cluster:
        cluster.create_topic("flip", partitions=1, replication_factor=3)
        produce_batches(cluster, "flip", 10)
        wait_for(lambda: len({s.log_end_offset for s in replica_logs(cluster, "flip").values()}) == 1, 30, "replicas caught up")
        leader = cluster.leader("flip", 0)
        flip_byte_in_batch(segment_of(cluster, leader, "flip"), 4 * BATCH_RECORDS)

        values = read_offsets(cluster, "flip", 10 * BATCH_RECORDS)
        assert values == {o: f"v{o}".encode() for o in range(10 * BATCH_RECORDS)}, "every record, the damaged batch included"
        text = broker_log(cluster, leader)
        assert "damaged batch found" in text and "damaged range repaired" in text
        states = replica_logs(cluster, "flip")
        assert len({s.checksum_below_hw for s in states.values()}) == 1, "the leader's bytes match its replicas' again"
        assert not any(s.damaged_ranges for s in states.values())


def test_byte_flipped_while_stopped_is_found_by_the_scrub_after_a_clean_restart_and_repaired(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic("scrub", partitions=1, replication_factor=3)
        produce_batches(cluster, "scrub", 10)
        wait_for(lambda: len({s.log_end_offset for s in replica_logs(cluster, "scrub").values()}) == 1, 30, "replicas caught up")
        victim = cluster.leader("scrub", 0)
        cluster.stop_node(cluster.broker(victim))  # clean: leadership moves away, .clean_shutdown written
        flip_byte_in_batch(segment_of(cluster, victim, "scrub"), 4 * BATCH_RECORDS)
        cluster.restart(cluster.broker(victim))

        def repaired() -> bool:
            states = replica_logs(cluster, "scrub")
            return "damaged range repaired" in broker_log(cluster, victim) and len({s.checksum_below_hw for s in states.values()}) == 1

        wait_for(repaired, 30, f"the scrub on broker {victim} finding the flipped byte and a replica's copy repairing it")
        # A stop that outlives its timeout on a loaded machine ends in SIGKILL: then the
        # restart's recovery finds the flipped byte before the scrub can.
        found_by = "damaged batch found" if last_load_was_clean(cluster, victim) else "damaged batch in the middle of the log"
        assert found_by in broker_log(cluster, victim)
        assert read_offsets(cluster, "scrub", 10 * BATCH_RECORDS) == {o: f"v{o}".encode() for o in range(10 * BATCH_RECORDS)}


# ---------------------------------------------------------------------------------- recovery


def test_rf1_recovery_keeps_the_batches_after_a_damaged_one_and_never_reuses_its_offsets(tmp_path: Path, capsys) -> None:
    from cli.main import main as kraftlog

    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic("rf1", partitions=1, replication_factor=1, configs={"flush.ms": "3600000"})
        produce_batches(cluster, "rf1", 20, acks=1)
        broker = cluster.broker(1)
        cluster.kill(broker)
        flip_byte_in_batch(segment_of(cluster, 1, "rf1"), 500)
        cluster.restart(broker)
        cluster.wait_topic_ready("rf1", 1, timeout_s=60)

        lost = range(500, 550)
        values = read_offsets(cluster, "rf1", 1000)
        assert values == {o: f"v{o}".encode() for o in range(1000) if o not in lost}, "only the damaged batch's records are gone"
        assert raw_produce(cluster, "rf1", encode_batch([b"new"])).base_offset == 1000, "offsets of the lost range are not reused"
        text = broker_log(cluster, 1)
        assert "damaged batch in the middle of the log" in text and "RECORDS LOST" in text
        assert replica_logs(cluster, "rf1")[1].damaged_ranges == ["corrupt 500-549"]
        capsys.readouterr()
        assert kraftlog(["topics", "describe", "rf1", "--bootstrap", cluster.bootstrap]) == 0
        assert "broker 1 corrupt 500-549" in capsys.readouterr().out


def test_rf3_recovery_fetches_the_damaged_batch_back_from_a_replica(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3, broker_args=["--scrub-bytes-per-second", "0"]) as cluster:
        cluster.create_topic("rf3", partitions=1, replication_factor=3, configs={"flush.ms": "3600000"})
        produce_batches(cluster, "rf3", 20)
        wait_for(lambda: len({s.log_end_offset for s in replica_logs(cluster, "rf3").values()}) == 1, 30, "replicas caught up")
        victim = cluster.leader("rf3", 0)
        cluster.kill(cluster.broker(victim))
        flip_byte_in_batch(segment_of(cluster, victim, "rf3"), 500)
        cluster.restart(cluster.broker(victim))

        def repaired() -> bool:
            states = replica_logs(cluster, "rf3")
            return not states[victim].damaged_ranges and len({s.checksum_below_hw for s in states.values()}) == 1

        wait_for(repaired, 30, f"broker {victim} repairing offsets 500-549 from a replica")
        assert replica_logs(cluster, "rf3")[victim].log_end_offset == 1000, "nothing after the damage was cut"
        text = broker_log(cluster, victim)
        assert "damaged batch in the middle of the log" in text and "damaged range repaired" in text
        assert read_offsets(cluster, "rf3", 1000) == {o: f"v{o}".encode() for o in range(1000)}
