"""Offsets committed inside a transaction (KIP-447) with real broker processes, over raw gRPC:
TxnOffsetCommit writes them to the group's offsets partition as the producer's transactional
batch; a commit marker there (written through the internal WriteTxnMarkers, as the
transaction coordinator will) makes them the committed offsets, an abort marker drops them;
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while the transaction is open;
a stale member epoch and an older producer epoch are refused; after a SIGKILL of the offsets
partition's leader the new coordinator holds the same outcomes and the open transaction."""

from __future__ import annotations

from typing import Iterator

import grpc
import pytest

from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2, group_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_group_coordinator import RETRIABLE, TOPIC, RawMember, converge, coordinator_stub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

OFFSETS_TOPIC = "__consumer_offsets"
# The tests play the transaction coordinator (raw producer ids, markers through WriteTxnMarkers),
# so the offsets partition's leader does not verify with a real one (test_txn_verification.py does).
BROKER_ARGS = ["--offsets-topic-partitions", "1", "--group-heartbeat-interval-ms", "200", "--no-transaction-partition-verification"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("txn-offsets"), controllers=1, brokers=3, broker_args=BROKER_ARGS) as c:
        c.create_topic(TOPIC, partitions=6, replication_factor=1)
        yield c


def txn_commit(stub, group: str, producer_id: int, offsets: dict[int, int], member: RawMember | None = None,
               producer_epoch: int = 0, member_epoch: int | None = None) -> group_pb2.TxnOffsetCommitResponse:
    """TxnOffsetCommit of ``offsets`` (partition -> offset) of TOPIC; without ``member``, as a
    producer outside the group (empty member id, epoch -1)."""
    parts = [group_pb2.OffsetCommitPartition(partition=p, committed_offset=o, committed_leader_epoch=1) for p, o in offsets.items()]
    return stub.TxnOffsetCommit(group_pb2.TxnOffsetCommitRequest(
        group_id=group, transactional_id=f"tx-{producer_id}", producer_id=producer_id, producer_epoch=producer_epoch,
        member_id=member.member_id if member else "", member_epoch=member_epoch if member_epoch is not None else (member.epoch if member else -1),
        topics=[group_pb2.OffsetCommitTopic(topic=TOPIC, partitions=parts)]), timeout=10)


def accepted(answer) -> bool:
    return answer.error_code == 0 and all(p.error_code == 0 for t in answer.topics for p in t.partitions)


def end_txn(cluster: TestCluster, leader: int, producer_id: int, commit: bool) -> None:
    """The transaction coordinator's marker on the offsets partition (its leader: ``leader``),
    with the epoch bumped as KIP-890 does."""
    marker = broker_pb2.TxnMarker(producer_id=producer_id, producer_epoch=1, commit=commit, coordinator_epoch=0,
                                  topic=OFFSETS_TOPIC, partitions=[0])
    with grpc.insecure_channel(cluster.broker(leader).address) as channel:
        [result] = broker_pb2_grpc.BrokerStub(channel).WriteTxnMarkers(
            broker_pb2.WriteTxnMarkersRequest(markers=[marker]), timeout=10).results
    assert result.error_code == common_pb2.NONE, result.error_message


def fetch(stub, group: str, require_stable: bool) -> dict[int, tuple[int, int]]:
    """partition -> (error code, committed offset) for every partition of TOPIC."""
    request = group_pb2.OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        group_pb2.TopicPartitions(topic=TOPIC, partitions=list(range(6)))])
    answer = stub.OffsetFetch(request, timeout=10)
    assert answer.error_code == 0, answer
    return {p.partition: (p.error_code, p.committed_offset) for t in answer.topics for p in t.partitions}


def stable_offsets(stub, group: str) -> dict[int, int] | None:
    """The committed offsets once no partition is unstable (None while one is)."""
    got = fetch(stub, group, require_stable=True)
    if any(code == common_pb2.UNSTABLE_OFFSET_COMMIT for code, _ in got.values()):
        return None
    assert all(code == 0 for code, _ in got.values()), got
    return {p: o for p, (_, o) in got.items() if o >= 0}


def wait_stable(stub, group: str, expected: dict[int, int]) -> None:
    def settled() -> bool:
        got = stable_offsets(stub, group)
        return got == expected
    wait_for(settled, 30, f"group {group}'s offsets stable at {expected}")


def test_a_commit_marker_makes_the_offsets_committed(cluster) -> None:
    node, stub = coordinator_stub(cluster.bootstrap, "gc")
    member = RawMember(stub, "gc", "m0")
    converge(stub, [member], "gc")
    assert accepted(txn_commit(stub, "gc", 101, {0: 10, 1: 11}, member))
    assert fetch(stub, "gc", require_stable=False)[0] == (0, -1)  # not committed before the marker
    unstable = fetch(stub, "gc", require_stable=True)
    assert unstable[0][0] == unstable[1][0] == common_pb2.UNSTABLE_OFFSET_COMMIT and unstable[2] == (0, -1)
    end_txn(cluster, node, 101, commit=True)
    wait_stable(stub, "gc", {0: 10, 1: 11})
    fenced = txn_commit(stub, "gc", 101, {0: 99}, member)  # epoch 0, after the marker's epoch 1
    assert fenced.error_code == common_pb2.PRODUCER_FENCED, fenced
    assert stable_offsets(stub, "gc") == {0: 10, 1: 11}


def test_an_abort_marker_drops_the_offsets(cluster) -> None:
    node, stub = coordinator_stub(cluster.bootstrap, "ga")
    plain = stub.OffsetCommit(group_pb2.OffsetCommitRequest(group_id="ga", member_id="", member_epoch=-1, topics=[
        group_pb2.OffsetCommitTopic(topic=TOPIC, partitions=[group_pb2.OffsetCommitPartition(partition=0, committed_offset=5)])]),
        timeout=10)
    assert accepted(plain), plain
    assert accepted(txn_commit(stub, "ga", 102, {0: 50, 3: 53}))
    assert stable_offsets(stub, "ga") is None
    end_txn(cluster, node, 102, commit=False)
    wait_stable(stub, "ga", {0: 5})


def test_a_stale_member_epoch_is_refused(cluster) -> None:
    _, stub = coordinator_stub(cluster.bootstrap, "gs")
    member = RawMember(stub, "gs", "m0")
    converge(stub, [member], "gs")
    stale = txn_commit(stub, "gs", 103, {0: 7}, member, member_epoch=member.epoch - 1)
    assert stale.error_code == common_pb2.STALE_MEMBER_EPOCH, stale
    unknown = txn_commit(stub, "gs", 103, {0: 7}, RawMember(stub, "gs", "nobody"), member_epoch=1)
    assert unknown.error_code == common_pb2.UNKNOWN_MEMBER_ID, unknown
    assert stable_offsets(stub, "gs") == {}  # nothing staged: nothing unstable
    assert accepted(txn_commit(stub, "gs", 103, {0: 7}, member))  # negative control: the current epoch is accepted
    assert stable_offsets(stub, "gs") is None


def test_a_coordinator_failover_keeps_every_outcome_and_the_open_transaction(cluster) -> None:
    node, stub = coordinator_stub(cluster.bootstrap, "gf")
    assert accepted(txn_commit(stub, "gf", 201, {0: 100, 1: 101}))
    end_txn(cluster, node, 201, commit=True)
    assert accepted(txn_commit(stub, "gf", 202, {0: 999, 2: 999}))
    end_txn(cluster, node, 202, commit=False)
    assert accepted(txn_commit(stub, "gf", 203, {1: 301}))  # left open across the failover
    before = {0: (0, 100), 1: (common_pb2.UNSTABLE_OFFSET_COMMIT, -1), **{p: (0, -1) for p in range(2, 6)}}
    wait_for(lambda: fetch(stub, "gf", require_stable=True) == before, 30,
             "both markers applied (so below the HW, replicated) before the failover")

    cluster.kill(cluster.broker(node))
    survivors = ",".join(b.address for b in cluster.brokers if b.node_id != node)
    moved: dict = {}

    def taken_over() -> bool:
        new_node, new_stub = coordinator_stub(survivors, "gf")
        if new_node == node:
            return False
        answer = new_stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id="gf", require_stable=True), timeout=10)
        if answer.error_code in RETRIABLE:
            return False
        moved.update(node=new_node, stub=new_stub)
        return True

    wait_for(taken_over, 60, "group gf at a new coordinator")
    new_stub = moved["stub"]
    after = fetch(new_stub, "gf", require_stable=True)
    assert after[0] == (0, 100) and after[2] == (0, -1), after  # the commit kept, the abort still dropped
    assert after[1][0] == common_pb2.UNSTABLE_OFFSET_COMMIT, after  # producer 203's transaction is still open
    end_txn(cluster, moved["node"], 203, commit=True)
    wait_stable(new_stub, "gf", {0: 100, 1: 301})
