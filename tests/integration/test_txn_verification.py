"""KIP-890 with real broker processes, over raw gRPC so that the codes themselves are asserted:

- a late batch of an aborted transaction is refused by the partition leader (PRODUCER_FENCED:
  the abort bumped the epoch), on a partition that took part and on one that never did (there
  the coordinator answers, through the leader's verification), and a batch of the current
  epoch on a partition never added gets INVALID_TXN_STATE, and one in a produce without
  transactional_id TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers; the LSO stays at the HW. Negative
  control: the same raw batch on a partition the coordinator did add is appended and holds
  the LSO until the transaction ends;
- a zombie (same transactional id, older epoch) gets PRODUCER_FENCED from every partition
  leader it writes to; its non-transactional batch keeps INVALID_PRODUCER_EPOCH, as in Kafka;
- the group coordinator's TxnOffsetCommit is verified the same way (Kafka 3.6+): without the
  group's offsets partition in the transaction (AddOffsetsToTxn, here AddPartitionsToTxn of it)
  it is refused with INVALID_TXN_STATE and nothing is staged (OffsetFetch require_stable
  answers the group's plain offset, not UNSTABLE_OFFSET_COMMIT), also once the transaction
  ended; the negative control, the same TxnOffsetCommit after the add, is committed with the
  transaction;
- DeleteRecords past an open transaction's data frees the LSO (it never stays below the log
  start); a transaction with data left above the new log start holds it there;
- on a cluster with mutual TLS and ACLs the leaders' questions (broker to broker, CLUSTER_ACTION)
  are answered and the Python producer's transactions commit.
"""

from __future__ import annotations

from typing import Iterator

import grpc
import pytest

from data_plane import record_batch
from data_plane.client import Admin, Consumer, Producer
from server_common.internal_topics import offsets_partition
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2, group_pb2, transaction_pb2
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_group_coordinator import coordinator_stub
from tests.integration.test_transactions import coordinator_of, state_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BROKER_ARGS = ["--transaction-state-partitions", "1", "--offsets-topic-partitions", "1"]
COMMITTED, UNCOMMITTED = broker_pb2.READ_COMMITTED, broker_pb2.READ_UNCOMMITTED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("verification"), controllers=1, brokers=2, broker_args=BROKER_ARGS) as c:
        yield c


def leader_stub(cluster: TestCluster, topic: str, partition: int) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(grpc.insecure_channel(cluster.broker(cluster.leader(topic, partition)).address))


def raw_produce(cluster: TestCluster, transactional_id: str, topic: str, partition: int, producer_id: int, epoch: int,
                sequence: int, transactional: bool = True) -> broker_pb2.PartitionProduceResponse:
    """What a delayed (or zombie) producer's request looks like: its own batch, sent as is."""
    batch = record_batch.encode_batch([b"late"], producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                      transactional=transactional)
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id=transactional_id, topics=[
        broker_pb2.TopicProduceData(topic=topic, partitions=[broker_pb2.PartitionProduceData(partition=partition, batches=batch)])])
    return leader_stub(cluster, topic, partition).Produce(request, timeout=15).topics[0].partitions[0]


def ends(cluster: TestCluster, topic: str, partition: int) -> tuple[int, int]:
    """(LSO, HW) as the leader answers ListOffsets latest at each isolation level."""
    offsets = []
    for isolation in (COMMITTED, UNCOMMITTED):
        request = broker_pb2.ListOffsetsRequest(isolation_level=isolation, topics=[broker_pb2.ListOffsetsTopic(
            topic=topic, partitions=[broker_pb2.ListOffsetsPartition(partition=partition, timestamp=-1)])])
        answer = leader_stub(cluster, topic, partition).ListOffsets(request, timeout=10).topics[0].partitions[0]
        assert answer.error_code == common_pb2.NONE, answer.error_message
        offsets.append(answer.offset)
    return offsets[0], offsets[1]


def described(cluster: TestCluster, transactional_id: str) -> transaction_pb2.DescribedTransaction:
    _, stub = coordinator_of(cluster, transactional_id)
    [answer] = stub.DescribeTransactions(transaction_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                                         timeout=10).transactions
    assert answer.error_code == common_pb2.NONE, answer.error_message
    return answer


def producer(cluster: TestCluster, transactional_id: str) -> Producer:
    return Producer(cluster.bootstrap, transactional_id=transactional_id, transaction_timeout_ms=60_000, linger_ms=0,
                    max_block_ms=60_000, delivery_timeout_ms=30_000)


def test_a_late_batch_of_an_aborted_transaction_is_refused_and_the_lso_moves_on(cluster: TestCluster) -> None:
    cluster.create_topic("late", partitions=3, replication_factor=2)
    with producer(cluster, "tx-late") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("late", b"in the transaction", partition=0)
        p.flush()
        p.abort_transaction()
    wait_for(lambda: state_of(cluster, "tx-late") == "CompleteAbort", 30, "the abort to complete")
    meta = described(cluster, "tx-late")
    pid, old = meta.producer_id, meta.producer_epoch - 1  # the abort bumped the epoch once

    on_marked = raw_produce(cluster, "tx-late", "late", 0, pid, old, 1)  # the partition holds the abort's newer epoch
    assert on_marked.error_code == common_pb2.PRODUCER_FENCED and "close this producer" in on_marked.error_message
    elsewhere = raw_produce(cluster, "tx-late", "late", 1, pid, old, 0)  # no marker there: the coordinator answers
    assert elsewhere.error_code == common_pb2.PRODUCER_FENCED, elsewhere.error_message
    not_added = raw_produce(cluster, "tx-late", "late", 1, pid, meta.producer_epoch, 0)
    assert not_added.error_code == common_pb2.INVALID_TXN_STATE and "add the partition" in not_added.error_message
    no_id = raw_produce(cluster, "", "late", 1, pid, meta.producer_epoch, 0)  # Kafka refuses it as a whole, so do we
    assert no_id.error_code == common_pb2.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and "transactional_id" in no_id.error_message
    for partition in (0, 1):
        lso, hw = ends(cluster, "late", partition)
        assert lso == hw, (partition, lso, hw)  # nothing hangs: read_committed readers reach the end

    # Negative control: the same raw batch, once the coordinator has the partition in the
    # transaction, is appended and holds the LSO until the transaction ends.
    _, coordinator = coordinator_of(cluster, "tx-late")
    added = coordinator.AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
        transactional_id="tx-late", producer_id=pid, producer_epoch=meta.producer_epoch,
        topics=[transaction_pb2.TxnTopicPartitions(topic="late", partitions=[2])]), timeout=10)
    assert added.error_code == common_pb2.NONE, added.error_message
    accepted = raw_produce(cluster, "tx-late", "late", 2, pid, meta.producer_epoch, 0)
    assert accepted.error_code == common_pb2.NONE, accepted.error_message
    lso, hw = ends(cluster, "late", 2)
    assert (lso, hw) == (accepted.base_offset, accepted.base_offset + 1)
    ended = coordinator.EndTxn(transaction_pb2.EndTxnRequest(transactional_id="tx-late", producer_id=pid,
                                                             producer_epoch=meta.producer_epoch, commit=False), timeout=10)
    assert ended.error_code == common_pb2.NONE, ended.error_message
    wait_for(lambda: (lambda e: e[0] == e[1] > hw)(ends(cluster, "late", 2)), 30, "the LSO to pass the abort marker")


def test_a_zombie_is_fenced_by_every_partition_leader(cluster: TestCluster) -> None:
    cluster.create_topic("zombie", partitions=4, replication_factor=2)
    with producer(cluster, "tx-zombie") as zombie, producer(cluster, "tx-zombie") as successor:
        zombie.init_transactions()
        zombie_epoch = described(cluster, "tx-zombie").producer_epoch
        zombie.begin_transaction()
        zombie.send("zombie", b"zombie", partition=0)
        zombie.flush()
        successor.init_transactions()  # fences the zombie and aborts its transaction
        successor.begin_transaction()
        successor.send("zombie", b"successor", partition=0)
        successor.commit_transaction()
    pid = described(cluster, "tx-zombie").producer_id
    leaders = {p: cluster.leader("zombie", p) for p in range(4)}
    fenced_by = set()
    for partition in range(4):  # the one it wrote to (sequence 1 next) and ones it never did
        answer = raw_produce(cluster, "tx-zombie", "zombie", partition, pid, zombie_epoch, 1 if partition == 0 else 0)
        assert answer.error_code == common_pb2.PRODUCER_FENCED, (partition, answer.error_code, answer.error_message)
        fenced_by.add(leaders[partition])
    assert fenced_by == {1, 2}  # both brokers lead some partition of the topic
    plain = raw_produce(cluster, "", "zombie", 0, pid, zombie_epoch, 1, transactional=False)
    assert plain.error_code == common_pb2.INVALID_PRODUCER_EPOCH, plain.error_message  # idempotent: Kafka's code kept


def offsets_at(stub, group: str, topic: str) -> tuple[int, int]:
    """(error code, committed offset) of ``topic``-0 for ``group``, as OffsetFetch with require_stable answers."""
    answer = stub.OffsetFetch(group_pb2.OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        group_pb2.TopicPartitions(topic=topic, partitions=[0])]), timeout=10)
    assert answer.error_code == common_pb2.NONE, answer.error_message
    [partition] = answer.topics[0].partitions
    return partition.error_code, partition.committed_offset


def test_txn_offset_commit_needs_the_offsets_partition_in_the_transaction(cluster: TestCluster) -> None:
    cluster.create_topic("consumed", partitions=1, replication_factor=2)
    group, tid = "verified-group", "tx-offsets"
    _, groups = coordinator_stub(cluster.bootstrap, group)

    def commit(offset: int, transactional: tuple[int, int] | None = None):
        part = [group_pb2.OffsetCommitPartition(partition=0, committed_offset=offset)]
        topics = [group_pb2.OffsetCommitTopic(topic="consumed", partitions=part)]
        if transactional is None:
            return groups.OffsetCommit(group_pb2.OffsetCommitRequest(group_id=group, member_epoch=-1, topics=topics), timeout=10)
        return groups.TxnOffsetCommit(group_pb2.TxnOffsetCommitRequest(
            group_id=group, transactional_id=tid, producer_id=transactional[0], producer_epoch=transactional[1],
            member_epoch=-1, topics=topics), timeout=10)

    assert commit(3).topics[0].partitions[0].error_code == common_pb2.NONE  # the group's plain offset
    _, coordinator = coordinator_of(cluster, tid)
    request = transaction_pb2.TxnInitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000)
    init = wait_for(lambda: (lambda a: a if a.error_code == common_pb2.NONE else None)(coordinator.InitProducerId(request, timeout=10)),
                    30, "the transaction coordinator to load and give a producer id")
    producer = (init.producer_id, init.producer_epoch)

    def add(topic: str, partition: int) -> None:
        added = coordinator.AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=producer[0], producer_epoch=producer[1],
            topics=[transaction_pb2.TxnTopicPartitions(topic=topic, partitions=[partition])]), timeout=10)
        assert added.error_code == common_pb2.NONE, added.error_message

    add("consumed", 0)  # an ongoing transaction, without the group's offsets partition
    refused = commit(7, producer)
    assert refused.error_code == common_pb2.INVALID_TXN_STATE, (refused.error_code, refused.error_message)
    assert "__consumer_offsets-0" in refused.error_message and "AddPartitionsToTxn" in refused.error_message
    assert offsets_at(groups, group, "consumed") == (common_pb2.NONE, 3)  # nothing staged: no pending offset, 3 stays

    # Negative control: the same TxnOffsetCommit once the offsets partition is in the transaction.
    add("__consumer_offsets", offsets_partition(group, 1))
    staged = commit(7, producer)
    assert staged.error_code == common_pb2.NONE and staged.topics[0].partitions[0].error_code == common_pb2.NONE, staged
    assert offsets_at(groups, group, "consumed")[0] == common_pb2.UNSTABLE_OFFSET_COMMIT
    ended = coordinator.EndTxn(transaction_pb2.EndTxnRequest(transactional_id=tid, producer_id=producer[0],
                                                             producer_epoch=producer[1], commit=True), timeout=10)
    assert ended.error_code == common_pb2.NONE, ended.error_message
    wait_for(lambda: offsets_at(groups, group, "consumed") == (common_pb2.NONE, 7), 30, "the offset committed with the transaction")

    # After the transaction ended: its epoch is fenced; the bumped one has no transaction open.
    after = (ended.producer_id, ended.producer_epoch)
    assert commit(9, producer).error_code == common_pb2.PRODUCER_FENCED
    late = commit(9, after)
    assert late.error_code == common_pb2.INVALID_TXN_STATE, (late.error_code, late.error_message)
    assert offsets_at(groups, group, "consumed") == (common_pb2.NONE, 7)


def test_delete_records_past_an_open_transaction_moves_the_lso_to_the_log_start_or_past_it(cluster: TestCluster) -> None:
    cluster.create_topic("trimmed", partitions=1, replication_factor=2)
    with producer(cluster, "tx-trimmed") as txn, Producer(cluster.bootstrap, linger_ms=0) as plain, Admin(cluster.bootstrap) as admin:
        txn.init_transactions()
        txn.begin_transaction()
        txn.send("trimmed", b"open", partition=0).result(timeout=30)                      # 0: opens the transaction
        for value in (b"p1", b"p2"):
            plain.send("trimmed", value, partition=0).result(timeout=30)                   # 1, 2
        assert ends(cluster, "trimmed", 0) == (0, 3)
        assert admin.delete_records(("trimmed", 0), 1) == 1  # the transaction's data is all below the log start
        assert ends(cluster, "trimmed", 0) == (3, 3)          # it no longer holds the LSO (it was 0, below the log start)
        txn.send("trimmed", b"more", partition=0).result(timeout=30)                      # 3: the same transaction goes on
        plain.send("trimmed", b"p4", partition=0).result(timeout=30)                       # 4
        assert admin.delete_records(("trimmed", 0), 2) == 2
        assert ends(cluster, "trimmed", 0) == (3, 5)          # its data at 3 is still in the log: held there
        txn.abort_transaction()
    wait_for(lambda: (lambda e: e[0] == e[1] == 6)(ends(cluster, "trimmed", 0)), 30, "the LSO to pass the abort marker")


def test_leaders_verify_over_mutual_tls_with_acls(tmp_path) -> None:
    args = ["--authentication-required", "--authorization", "--super-users", "User:admin,User:broker-1,User:broker-2,User:controller-1"]
    with local_cluster(tmp_path, controllers=1, brokers=2, secure=True, controller_args=args, broker_args=[*args, *BROKER_ARGS]) as secure:
        secure.create_topic("secured", partitions=2, replication_factor=2)
        with Producer(secure.bootstrap, security=secure.client_security, transactional_id="tx-secure", linger_ms=0,
                      max_block_ms=60_000, delivery_timeout_ms=30_000) as p:
            p.init_transactions()
            p.begin_transaction()
            for i in range(4):
                p.send("secured", b"s%d" % i, partition=i % 2)
            p.commit_transaction()
        with Consumer(secure.bootstrap, security=secure.client_security, isolation_level="read_committed", fetch_max_wait_ms=100) as c:
            c.assign([("secured", 0), ("secured", 1)])
            c.seek_to_beginning()
            got: list[bytes] = []
            wait_for(lambda: got.extend(r.value for r in c.poll(200)) or len(got) >= 4, 30, "the committed records")
        assert sorted(got) == [b"s0", b"s1", b"s2", b"s3"]
