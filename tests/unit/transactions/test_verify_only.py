"""AddPartitionsToTxn with verify_only (KIP-890 part 1): the pure query on an id's metadata and
the service's answer, which changes nothing and is for brokers only; and add_for_produce
(KIP-890 part 2), a leader's add on a producer's behalf, durable, for brokers only."""

from __future__ import annotations

import asyncio

from server_common.errors import ErrorCode
from data_plane.transactions.service import TransactionCoordinatorService
from data_plane.transactions.state_machine import TopicPartition, TxnMetadata, TxnState, verify_partitions
from kraftlog_proto import transaction_pb2 as pb
from server_common.authorization import AccessControl
from tests.unit.transactions.test_coordinator_shell import FakeReplicas, loaded, settled

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
ONGOING = TxnMetadata("tx", 7, 3, 1000, TxnState.ONGOING, frozenset({P0}))


def test_only_a_partition_of_the_ongoing_transaction_at_its_epoch_is_verified() -> None:
    assert verify_partitions(ONGOING, 7, 3, frozenset({P0})) is ErrorCode.NONE
    assert verify_partitions(ONGOING, 7, 3, frozenset({P0, P1})) is ErrorCode.INVALID_TXN_STATE
    assert verify_partitions(ONGOING, 7, 2, frozenset({P0})) is ErrorCode.PRODUCER_FENCED
    assert verify_partitions(ONGOING, 8, 3, frozenset({P0})) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert verify_partitions(None, 7, 3, frozenset({P0})) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    for ended in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT, TxnState.EMPTY):
        closed = TxnMetadata("tx", 7, 3, 1000, ended, frozenset({P0}))
        assert verify_partitions(closed, 7, 3, frozenset({P0})) is ErrorCode.INVALID_TXN_STATE, ended


def test_the_service_verifies_without_changing_anything_and_only_for_brokers() -> None:
    async def scenario():
        coordinator = await loaded(FakeReplicas())
        service = TransactionCoordinatorService(coordinator)
        init = await service.InitProducerId(pb.TxnInitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=5000), None)

        def verify(partition: int, epoch: int = 0) -> pb.AddPartitionsToTxnRequest:
            return pb.AddPartitionsToTxnRequest(transactional_id="tx", producer_id=init.producer_id, producer_epoch=epoch,
                                                topics=[pb.TxnTopicPartitions(topic="t", partitions=[partition])], verify_only=True)

        before = await service.AddPartitionsToTxn(verify(0), None)
        assert before.error_code == ErrorCode.INVALID_TXN_STATE and "add the partition" in before.error_message
        assert coordinator.describe("tx").state is TxnState.EMPTY  # verify_only opened nothing
        await service.AddPartitionsToTxn(pb.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=init.producer_id, producer_epoch=0,
            topics=[pb.TxnTopicPartitions(topic="t", partitions=[0])]), None)
        assert (await service.AddPartitionsToTxn(verify(0), None)).error_code == ErrorCode.NONE
        other = await service.AddPartitionsToTxn(verify(1), None)
        assert other.error_code == ErrorCode.INVALID_TXN_STATE and "t-1" in other.error_message
        assert coordinator.describe("tx").partitions == frozenset({P0})
        await service.EndTxn(pb.EndTxnRequest(transactional_id="tx", producer_id=init.producer_id, producer_epoch=0, commit=False), None)
        await settled(coordinator)
        late = await service.AddPartitionsToTxn(verify(0), None)  # the aborted transaction's epoch
        assert late.error_code == ErrorCode.PRODUCER_FENCED and "close this producer" in late.error_message
        empty = await service.AddPartitionsToTxn(pb.AddPartitionsToTxnRequest(transactional_id="tx", verify_only=True), None)
        assert empty.error_code == ErrorCode.INVALID_REQUEST

        locked = TransactionCoordinatorService(coordinator, AccessControl(dict, (), enabled=True))
        refused = await locked.AddPartitionsToTxn(verify(0, 1), None)  # no identity: not a broker
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    asyncio.run(scenario())


def test_a_leaders_add_for_produce_adds_durably_and_only_for_brokers() -> None:
    """KIP-890 part 2: a partition leader adds the partition of a producer's first
    transactional batch there; the decision is the producer's own add (same answers)."""
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        service = TransactionCoordinatorService(coordinator)
        init = await service.InitProducerId(pb.TxnInitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=5000), None)

        def add(partition: int, epoch: int = 0) -> pb.AddPartitionsToTxnRequest:
            return pb.AddPartitionsToTxnRequest(transactional_id="tx", producer_id=init.producer_id, producer_epoch=epoch,
                                                topics=[pb.TxnTopicPartitions(topic="t", partitions=[partition])], add_for_produce=True)

        written = replicas.writes
        assert (await service.AddPartitionsToTxn(add(0), None)).error_code == ErrorCode.NONE
        assert coordinator.describe("tx").state is TxnState.ONGOING and coordinator.describe("tx").partitions == frozenset({P0})
        assert replicas.writes == written + 1  # durable before the answer
        assert (await service.AddPartitionsToTxn(add(0), None)).error_code == ErrorCode.NONE and replicas.writes == written + 1
        fenced = await service.AddPartitionsToTxn(add(1, epoch=1), None)
        assert fenced.error_code == ErrorCode.PRODUCER_FENCED and coordinator.describe("tx").partitions == frozenset({P0})
        empty = await service.AddPartitionsToTxn(pb.AddPartitionsToTxnRequest(transactional_id="tx", add_for_produce=True), None)
        assert empty.error_code == ErrorCode.INVALID_REQUEST

        locked = TransactionCoordinatorService(coordinator, AccessControl(dict, (), enabled=True))
        refused = await locked.AddPartitionsToTxn(add(1), None)  # no identity: not a broker
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and coordinator.describe("tx").partitions == frozenset({P0})
    asyncio.run(scenario())
