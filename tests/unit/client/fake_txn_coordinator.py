"""An in-process stand-in for a transaction coordinator, added to a FakeBroker's server: one
transactional id, decided with the real state machine (data_plane/transactions/state_machine.py),
markers written at once into the fake broker's producer state. FindCoordinator (any key type)
names the fake broker, whose leader adds a transactional batch's partition through
``leader_add`` (KIP-890 part 2). ``events`` records adds that changed the transaction and ends
next to the broker's appends;
``concurrent_answers`` answers that many InitProducerId calls CONCURRENT_TRANSACTIONS first;
TxnOffsetCommit (as the group's coordinator) answers the codes in ``txn_offset_answers`` first,
then NONE, and records each call in ``events``."""

from __future__ import annotations

import threading

from data_plane.transactions import state_machine as sm
from data_plane.transactions.service import described
from data_plane.transactions.state_machine import TopicPartition
from kraftlog_proto import common_pb2, group_pb2, group_pb2_grpc, transaction_pb2, transaction_pb2_grpc
from tests.unit.client.fake_broker import BROKER_ID, FakeBroker


class FakeTxnCoordinator(transaction_pb2_grpc.TransactionCoordinatorServicer, group_pb2_grpc.GroupCoordinatorServicer):
    """One transactional id's coordinator in memory; markers land in ``broker``'s producer state
    at once. ``events`` records adds and ends next to the broker's appends (FakeBroker.on_append)."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.meta: sm.TxnMetadata | None = None
        self.events: list[str] = []
        self.concurrent_answers = 0  # answer that many InitProducerId calls CONCURRENT_TRANSACTIONS first
        self.next_id = 500
        self.txn_offset_answers: list[int] = []  # TxnOffsetCommit answers before NONE
        self.lock = threading.Lock()
        self.add_requests: list[list[str]] = []  # the partitions of each AddPartitionsToTxn, in order
        self.leader_adds: list[str] = []  # the partition of each add a leader asked for, in order
        group_pb2_grpc.add_GroupCoordinatorServicer_to_server(self, broker._server)
        transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(self, broker._server)
        broker.on_append = lambda tp: self.events.append(f"append {tp[0]}-{tp[1]}")
        broker.leader_add = self.leader_add

    def FindCoordinator(self, request, context):
        return group_pb2.FindCoordinatorResponse(coordinators=[
            group_pb2.Coordinator(key=k, node_id=BROKER_ID, host="127.0.0.1", port=self.broker.port) for k in request.keys])

    def _fresh(self) -> int:
        self.next_id += 1
        return self.next_id

    def _apply(self, decision: sm.Decision) -> sm.Decision:
        if decision.log:
            self.meta = decision.log[-1]
        if decision.markers is not None:
            with self.broker._cond:
                for tp in decision.markers.partitions:
                    key = (tp.topic, tp.partition)
                    self.broker.producers[key].on_marker(decision.markers.producer_id, decision.markers.producer_epoch,
                                                         self.broker.end_offsets[key])
                    self.broker.end_offsets[key] += 1
            self.meta = sm.markers_written(self.meta, 0)
        return decision

    def InitProducerId(self, request, context):
        with self.lock:
            if self.concurrent_answers:
                self.concurrent_answers -= 1
                return transaction_pb2.TxnInitProducerIdResponse(error_code=common_pb2.CONCURRENT_TRANSACTIONS)
            d = self._apply(sm.init_producer_id(self.meta, request.transactional_id, request.transaction_timeout_ms, 60_000, 0, self._fresh()))
            return transaction_pb2.TxnInitProducerIdResponse(error_code=d.error, producer_id=d.answer.producer_id,
                                                             producer_epoch=d.answer.producer_epoch)

    def AddPartitionsToTxn(self, request, context):
        tps = frozenset(TopicPartition(t.topic, p) for t in request.topics for p in t.partitions)
        self.add_requests.append([f"{tp.topic}-{tp.partition}" for tp in sorted(tps)])
        return transaction_pb2.AddPartitionsToTxnResponse(error_code=self._add(request.producer_id, request.producer_epoch, tps))

    def leader_add(self, transactional_id: str, tp: tuple[str, int], producer_id: int, producer_epoch: int) -> int:
        """The fake broker's leader adding a transactional batch's partition (KIP-890 part 2)."""
        self.leader_adds.append(f"{tp[0]}-{tp[1]}")
        return self._add(producer_id, producer_epoch, frozenset({TopicPartition(*tp)}))

    def _add(self, producer_id: int, producer_epoch: int, tps: frozenset[TopicPartition]) -> int:
        with self.lock:
            d = self._apply(sm.add_partitions(self.meta, producer_id, producer_epoch, tps, 0))
            self.events += [f"add {tp.topic}-{tp.partition}" for tp in sorted(tps)] if d.log else []
            return d.error

    def EndTxn(self, request, context):
        with self.lock:
            d = self._apply(sm.end_txn(self.meta, request.producer_id, request.producer_epoch, request.commit, 0, self._fresh()))
            self.events.append(f"end {'commit' if request.commit else 'abort'}")
            return transaction_pb2.EndTxnResponse(error_code=d.error, producer_id=d.answer.producer_id,
                                                  producer_epoch=d.answer.producer_epoch)

    def TxnOffsetCommit(self, request, context):
        with self.lock:
            offsets = ",".join(f"{t.topic}-{p.partition}@{p.committed_offset}" for t in request.topics for p in t.partitions)
            self.events.append(f"txn-offsets {request.group_id} {request.member_id}/{request.member_epoch} "
                               f"{request.producer_id}/{request.producer_epoch} {offsets}")
            code = self.txn_offset_answers.pop(0) if self.txn_offset_answers else common_pb2.NONE
            return group_pb2.TxnOffsetCommitResponse(error_code=code)

    def ListTransactions(self, request, context):
        listed = [self.meta] if self.meta is not None and (not request.states_filter or self.meta.state.value in request.states_filter) else []
        return transaction_pb2.ListTransactionsResponse(transactions=[transaction_pb2.ListedTransaction(
            transactional_id=m.transactional_id, producer_id=m.producer_id, state=m.state.value, coordinator_id=BROKER_ID) for m in listed])

    def DescribeTransactions(self, request, context):
        return transaction_pb2.DescribeTransactionsResponse(transactions=[
            described(self.meta, BROKER_ID) if self.meta is not None and self.meta.transactional_id == tid else
            transaction_pb2.DescribedTransaction(transactional_id=tid, error_code=common_pb2.TRANSACTIONAL_ID_NOT_FOUND,
                                                 error_message="unknown: check the id")
            for tid in request.transactional_ids])
