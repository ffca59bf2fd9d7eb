"""KIP-320 with real processes, the two cases test_elections_cli.py does not cover: a group
member resuming from an offset its group committed before an unclean election truncated
the log below it, and the negative control, a position without an epoch.

Three brokers, one controller. Topic ``t`` (one partition, two replicas, unclean elections
allowed): N1 records reach both replicas; the second replica is stopped and N2 more reach the
first alone; a group member reads all N1 + N2 and commits (with the leader epoch of the last
record). Then the first replica stops and the second comes back: the unclean election makes
it leader with only N1 records, and N3 > N2 new records are written, so the committed offset
N1 + N2 exists again with different records before it. The first broker then returns (and
truncates to follow), so that the group's offsets partition, which lost both brokers too,
has its ISR back to min.insync.replicas and its coordinator loads.

- a new member of the group resumes from the commit, detects the truncation and reads from
  N1: exactly the new records;
- the negative control: a consumer positioned at N1 + N2 without an epoch (a plain seek)
  reads on from there, skipping the new records at N1..N1+N2-1 unseen: what validation prevents.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from data_plane.client import Consumer, Producer
from kraftlog_proto import controller_pb2 as pb
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC, TP = "t", ("t", 0)
N1, N2, N3 = 5, 3, 6


def partition_state(cluster: TestCluster) -> pb.PartitionState | None:
    with cluster.controller_client() as client:
        return next((p for t in client.describe_cluster().topics if t.name == TOPIC for p in t.partitions), None)


def produce(cluster: TestCluster, values: list[bytes]) -> None:
    with Producer(cluster.bootstrap, acks="all") as producer:
        for future in [producer.send(TOPIC, value=v, partition=0) for v in values]:
            future.result(timeout=30)


def read(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    """Exactly ``count`` records from the consumer's position on (offset, value)."""
    got: list[tuple[int, bytes]] = []
    wait_for(lambda: got.extend((r.offset, r.value) for r in consumer.poll(200)) or len(got) >= count, 30, f"{count} records")
    assert len(got) == count, got
    return got


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


@pytest.fixture(scope="module")
def truncated() -> Iterator[TestCluster]:
    """The cluster after the unclean election and the new records; group ``g`` committed
    N1 + N2 before it."""
    with tempfile.TemporaryDirectory(prefix="kraftlog-truncation-") as tmp, \
            local_cluster(Path(tmp), controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, 1, 2, {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
        first, second = wait_for(lambda: (s := partition_state(cluster)) and s.leader >= 0 and list(s.replicas), 30, "the topic")
        produce(cluster, values("both", N1))
        cluster.stop_node(cluster.broker(second))  # controlled shutdown: out of the ISR
        wait_for(lambda: list(partition_state(cluster).isr) == [first], 30, f"ISR [{first}]")
        produce(cluster, values("first-only", N2))
        with Consumer(cluster.bootstrap, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as member:
            member.subscribe([TOPIC])
            assert [o for o, _ in read(member, N1 + N2)] == list(range(N1 + N2))
            assert member.commit()[TP].offset == N1 + N2

        cluster.stop_node(cluster.broker(first))  # the last in-sync replica: the partition goes offline
        cluster.restart(cluster.broker(second))
        wait_for(lambda: partition_state(cluster).leader == second, 60, f"the unclean election of broker {second}")
        produce(cluster, values("after", N3))
        cluster.restart(cluster.broker(first))
        wait_for(lambda: sorted(partition_state(cluster).isr) == sorted([first, second]), 60, f"broker {first} back in the ISR")
        yield cluster


def test_a_group_member_resuming_from_a_commit_goes_on_from_the_divergent_offset(truncated) -> None:
    with Consumer(truncated.bootstrap, group_id="g", auto_offset_reset="latest", enable_auto_commit=False) as member:
        member.subscribe([TOPIC])
        assert read(member, N3) == list(zip(range(N1, N1 + N3), values("after", N3)))


def test_negative_control_a_position_without_an_epoch_skips_the_new_records(truncated) -> None:
    with Consumer(truncated.bootstrap, auto_offset_reset="none") as blind:
        blind.assign([TP])
        blind.seek(TP, N1 + N2)
        got = read(blind, N3 - N2)
    assert got == list(zip(range(N1 + N2, N1 + N3), values("after", N3)[N2:])), "records at N1..N1+N2-1 skipped unseen"
