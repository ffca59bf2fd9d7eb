"""The transactional producer against a fake broker and a fake transaction coordinator that
decides with the real state machine (data_plane/transactions/state_machine.py) and writes its
markers into the fake broker's producer state: a partition is added before its first batch
reaches the leader (its leader adds it, KIP-890 part 2, and the producer makes no
AddPartitionsToTxn call for it); batches are transactional, under the coordinator's producer id and epoch;
after each end the epoch is bumped and every partition numbers from 0 again (the leader
accepts it); a fenced producer raises ProducerFencedError and stays fenced;
send_offsets_to_transaction adds the group's offsets partition before TxnOffsetCommit and
retries retriable answers."""

from __future__ import annotations

import pytest

from data_plane.client import KraftlogError, Producer
from data_plane.client.transactions import GroupMetadata, ProducerFencedError, txn_offset_commit_request
from server_common.internal_topics import OFFSETS_TOPIC, offsets_partition
from kraftlog_proto import common_pb2
from data_plane.transactions import state_machine as sm
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_txn_coordinator import FakeTxnCoordinator


OFFSETS_PARTITIONS = 5


@pytest.fixture
def cluster():
    broker = FakeBroker({"t": 2, "u": 2, OFFSETS_TOPIC: OFFSETS_PARTITIONS})
    coordinator = FakeTxnCoordinator(broker)
    with broker:
        yield broker, coordinator


def producer(broker: FakeBroker, transactional_id: str = "tx") -> Producer:
    return Producer(broker.address, transactional_id=transactional_id, linger_ms=0, max_block_ms=5000, delivery_timeout_ms=5000)


def test_partitions_are_added_before_their_batches_and_each_end_bumps_the_epoch(cluster):
    broker, coordinator = cluster
    with producer(broker) as p:
        p.init_transactions()
        for round_ in range(2):
            p.begin_transaction()
            for i in range(3):
                p.send("t", b"%d" % i, partition=i % 2)
            p.commit_transaction() if round_ == 0 else p.abort_transaction()
    adds = [i for i, e in enumerate(coordinator.events) if e.startswith("add")]
    for tp in ("t-0", "t-1"):
        first_add = coordinator.events.index(f"add {tp}")
        assert first_add < coordinator.events.index(f"append {tp}")
    assert coordinator.events.count("add t-0") == 2 and len(adds) == 4  # once per partition and transaction
    assert coordinator.events[-1] == "end abort" and "end commit" in coordinator.events
    headers = [b.header for b in broker.stored(("t", 0))]
    assert all(h.is_transactional for h in headers)
    epochs = sorted({(h.producer_epoch, h.base_sequence) for h in headers})
    assert epochs[0] == (0, 0) and (1, 0) in epochs  # the second transaction starts at sequence 0 under the bumped epoch
    assert coordinator.meta.state is sm.TxnState.COMPLETE_ABORT and coordinator.meta.producer_epoch == 2


def test_init_waits_out_concurrent_transactions(cluster):
    broker, coordinator = cluster
    coordinator.concurrent_answers = 2
    with producer(broker) as p:
        p.init_transactions()
    assert coordinator.meta is not None and coordinator.concurrent_answers == 0


def test_a_zombie_is_fenced_for_good(cluster):
    broker, coordinator = cluster
    with producer(broker) as zombie, producer(broker) as successor:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send("t", b"old", partition=0)
        successor.init_transactions()  # bumps the epoch: the zombie's open transaction is aborted
        late = zombie.send("t", b"late", partition=1)  # its leader's add is refused: fenced
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
        with pytest.raises(ProducerFencedError):
            zombie.send("t", b"later", partition=1)
        assert late.exception(timeout=5) is not None
        successor.begin_transaction()
        successor.send("t", b"new", partition=0)
        successor.commit_transaction()


def test_sends_outside_a_transaction_and_non_transactional_calls_are_refused(cluster):
    broker, _ = cluster
    with producer(broker) as p:
        with pytest.raises(KraftlogError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(KraftlogError, match="begin_transaction"):
            p.send("t", b"x", partition=0)
    with Producer(broker.address) as plain, pytest.raises(KraftlogError, match="transactional_id"):
        plain.init_transactions()


def test_send_offsets_adds_the_groups_offsets_partition_first_and_retries(cluster):
    broker, coordinator = cluster
    group = GroupMetadata("g", "member-1", 4)
    offsets_tp = f"{OFFSETS_TOPIC}-{offsets_partition('g', OFFSETS_PARTITIONS)}"
    coordinator.txn_offset_answers = [common_pb2.CONCURRENT_TRANSACTIONS, common_pb2.NOT_ENOUGH_REPLICAS]
    with producer(broker) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"out", partition=0)
        p.send_offsets_to_transaction({("t", 1): 8}, group)
        p.commit_transaction()
    sent = [e for e in coordinator.events if e.startswith("txn-offsets")]
    assert sent == [f"txn-offsets g member-1/4 {coordinator.meta.producer_id}/0 t-1@8"] * 3  # two retriable answers
    assert coordinator.events.index(f"add {offsets_tp}") < coordinator.events.index(sent[0])
    assert coordinator.events[-1] == "end commit" and coordinator.txn_offset_answers == []


def test_send_offsets_refusals_are_raised_and_fencing_is_for_good(cluster):
    broker, coordinator = cluster
    with producer(broker) as p:
        p.init_transactions()
        with pytest.raises(KraftlogError, match="begin_transaction"):
            p.send_offsets_to_transaction({("t", 0): 1}, GroupMetadata("g", "m", 1))
        p.begin_transaction()
        coordinator.txn_offset_answers = [common_pb2.STALE_MEMBER_EPOCH]
        with pytest.raises(KraftlogError) as stale:
            p.send_offsets_to_transaction({("t", 0): 1}, GroupMetadata("g", "m", 1))
        assert stale.value.code == "STALE_MEMBER_EPOCH"
        coordinator.txn_offset_answers = [common_pb2.PRODUCER_FENCED]
        with pytest.raises(ProducerFencedError):
            p.send_offsets_to_transaction({("t", 0): 1}, GroupMetadata("g", "m", 1))
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()


def test_txn_offset_commit_carries_the_consumers_leader_epochs():
    group = GroupMetadata("g", "m", 3, {("t", 0): 7})
    request = txn_offset_commit_request("tx", 11, 2, {("t", 0): 40, ("t", 1): 9}, group)
    epochs = {(t.topic, p.partition): (p.committed_offset, p.committed_leader_epoch) for t in request.topics for p in t.partitions}
    assert epochs == {("t", 0): (40, 7), ("t", 1): (9, -1)}  # unknown epoch: -1
    assert (request.producer_id, request.producer_epoch, request.member_id, request.member_epoch) == (11, 2, "m", 3)


def test_close_aborts_an_open_transaction_and_never_commits(cluster):
    broker, coordinator = cluster
    p = producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"unfinished", partition=0)
    p.close()
    assert coordinator.events[-1] == "end abort" and "end commit" not in coordinator.events
    assert coordinator.meta.state is sm.TxnState.COMPLETE_ABORT


def test_close_with_no_transaction_open_ends_nothing(cluster):
    broker, coordinator = cluster
    with producer(broker) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"done", partition=0)
        p.commit_transaction()
    assert [e for e in coordinator.events if e.startswith("end")] == ["end commit"]


def test_the_leader_adds_each_partition_before_its_first_batch_and_the_producer_does_not(cluster):
    broker, coordinator = cluster
    with producer(broker) as p:
        p.init_transactions()
        for _ in range(2):
            p.begin_transaction()
            futures = [p.send_batch("t", 0, [b"a"]), p.send_batch("u", 0, [b"b"]), p.send_batch("u", 1, [b"c"]),
                       p.send_batch("t", 0, [b"d"])]
            p.commit_transaction()
            assert all(f.result().offset >= 0 for f in futures)
    assert coordinator.add_requests == []  # no AddPartitionsToTxn round trip before the batches
    assert coordinator.events.count("add t-0") == 2  # by its leader, once per transaction
    for tp in ("t-0", "u-0", "u-1"):
        assert coordinator.events.index(f"add {tp}") < coordinator.events.index(f"append {tp}")
    values = [v for b in broker.stored(("t", 0)) for v in b.values]
    assert values == [b"a", b"d"] * 2
    assert coordinator.events[-1] == "end commit"


def test_a_refused_add_fails_its_batches_and_the_commit(cluster):
    broker, coordinator = cluster
    with producer(broker) as zombie, producer(broker) as successor:
        zombie.init_transactions()
        zombie.begin_transaction()
        successor.init_transactions()  # the zombie's next add is refused: fenced
        future = zombie.send_batch("t", 0, [b"late"])
        with pytest.raises(KraftlogError) as refused:  # its leader's add is refused: fenced
            future.result(timeout=5)
        assert refused.value.code == "PRODUCER_FENCED"
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
    assert not any(e == "append t-0" for e in coordinator.events)


def test_close_of_a_fenced_producer_leaves_its_transaction_to_the_coordinator(cluster):
    broker, coordinator = cluster
    zombie, successor = producer(broker), producer(broker)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send("t", b"old", partition=0)
        successor.init_transactions()  # fences the zombie and aborts its transaction
        before = coordinator.meta
        zombie.close()  # its abort is refused (fenced): logged, not raised
        assert coordinator.meta == before and before.state is sm.TxnState.EMPTY  # the successor's state: untouched
    finally:
        successor.close()
