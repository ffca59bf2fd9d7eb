"""The TransactionCoordinator gRPC service over the coordinator shell and a fake log: each
answer carries the decision's code with a message saying what to do, the ids and the bumped
epoch; list and describe read the coordinator's memory."""

from __future__ import annotations

import asyncio

from server_common.errors import ErrorCode
from data_plane.transactions.service import TransactionCoordinatorService
from kraftlog_proto import transaction_pb2 as pb
from tests.unit.transactions.test_coordinator_shell import FakeReplicas, loaded, settled


def test_the_rpcs_answer_codes_messages_and_epochs():
    async def scenario():
        coordinator = await loaded(FakeReplicas())
        service = TransactionCoordinatorService(coordinator)
        empty = await service.InitProducerId(pb.TxnInitProducerIdRequest(transaction_timeout_ms=1000), None)
        assert empty.error_code == ErrorCode.INVALID_REQUEST and "transactional_id is empty" in empty.error_message
        too_long = await service.InitProducerId(pb.TxnInitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=10**8), None)
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT and "--transaction-max-timeout-ms" in too_long.error_message
        init = await service.InitProducerId(pb.TxnInitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=5000), None)
        assert init.error_code == ErrorCode.NONE and init.producer_id > 0 and init.producer_epoch == 0
        topics = [pb.TxnTopicPartitions(topic="t", partitions=[0, 1])]
        stale = await service.AddPartitionsToTxn(pb.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=init.producer_id, producer_epoch=7, topics=topics), None)
        assert stale.error_code == ErrorCode.PRODUCER_FENCED and "close this producer" in stale.error_message
        added = await service.AddPartitionsToTxn(pb.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=init.producer_id, producer_epoch=0, topics=topics), None)
        assert added.error_code == ErrorCode.NONE
        [described] = (await service.DescribeTransactions(pb.DescribeTransactionsRequest(transactional_ids=["tx"]), None)).transactions
        assert (described.state, [list(t.partitions) for t in described.topics], described.transaction_timeout_ms) == ("Ongoing", [[0, 1]], 5000)
        listed = await service.ListTransactions(pb.ListTransactionsRequest(states_filter=["CompleteCommit"]), None)
        assert list(listed.transactions) == []
        end = await service.EndTxn(pb.EndTxnRequest(transactional_id="tx", producer_id=init.producer_id, producer_epoch=0, commit=True), None)
        assert end.error_code == ErrorCode.NONE and (end.producer_id, end.producer_epoch) == (init.producer_id, 1)
        await settled(coordinator)
        listed = await service.ListTransactions(pb.ListTransactionsRequest(states_filter=["CompleteCommit"]), None)
        assert [(t.transactional_id, t.state) for t in listed.transactions] == [("tx", "CompleteCommit")]
        again = await service.EndTxn(pb.EndTxnRequest(transactional_id="tx", producer_id=init.producer_id, producer_epoch=1, commit=True), None)
        assert again.error_code == ErrorCode.INVALID_TXN_STATE and "add partitions first" in again.error_message
        [unknown] = (await service.DescribeTransactions(pb.DescribeTransactionsRequest(transactional_ids=["nope"]), None)).transactions
        assert unknown.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND and "kraftlog transactions list" in unknown.error_message
    asyncio.run(scenario())
