"""The ``kraftlog.v1.TransactionCoordinator`` gRPC service: protobuf in and out,
`TransactionCoordinator` calls in between. Every refusal is an ErrorCode with a message saying
what to do next. Authorization is Kafka's: WRITE on the transactional id (and, to add
partitions, WRITE on their topics); DESCRIBE on the id to describe it, on the cluster to list."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from data_plane.partition_errors import negative_partition
from data_plane.coordination import Refused, describe_each
from server_common.errors import ErrorCode
from data_plane.transactions.coordinator import TransactionCoordinator
from data_plane.transactions.state_machine import Decision, TopicPartition, TxnMetadata, verify_partitions
from kraftlog_proto import transaction_pb2 as pb
from kraftlog_proto import transaction_pb2_grpc
from server_common.authorization import AccessControl

R = TypeVar("R")


def explain(error: ErrorCode, transactional_id: str, meta: TxnMetadata | None, max_timeout_ms: int) -> str:
    """The message for a decision's error code: what happened and what to do next."""
    if error is ErrorCode.NONE:
        return ""
    state = meta.state.value if meta is not None else "unknown"
    return {
        ErrorCode.INVALID_TRANSACTION_TIMEOUT: f"transaction_timeout_ms must be in (0, {max_timeout_ms}] (the broker's "
                                               "--transaction-max-timeout-ms): ask for a shorter timeout",
        ErrorCode.CONCURRENT_TRANSACTIONS: f"the last transaction of {transactional_id!r} is still completing (its markers are "
                                           "being written): retry shortly",
        ErrorCode.PRODUCER_FENCED: f"a newer producer with transactional id {transactional_id!r} (epoch "
                                   f"{meta.producer_epoch if meta else -1}) has fenced this one: close this producer",
        ErrorCode.INVALID_PRODUCER_ID_MAPPING: f"this producer id does not hold transactional id {transactional_id!r} (it expired "
                                               "or was never registered): call InitProducerId again",
        ErrorCode.INVALID_TXN_STATE: f"transactional id {transactional_id!r} is {state}: commit needs an open transaction "
                                     "(add partitions first), and a retried EndTxn must ask for the same outcome",
    }.get(error, f"{error.name} for transactional id {transactional_id!r}")


class TransactionCoordinatorService(transaction_pb2_grpc.TransactionCoordinatorServicer):
    def __init__(self, coordinator: TransactionCoordinator, access: AccessControl | None = None) -> None:
        self.coordinator = coordinator
        self.access = access or AccessControl(dict, (), enabled=False)

    async def _answer(self, response_type: Callable[..., R], transactional_id: str, call, topics: tuple[str, ...] = ()) -> R:
        """Checks the request, runs ``call`` and turns its Decision (or refusal) into ``response_type``."""
        if not transactional_id:
            return response_type(error_code=ErrorCode.INVALID_REQUEST, error_message="transactional_id is empty: give one "
                                 "(an idempotent producer without transactions calls Broker.InitProducerId)")
        refused = self.access.first_refusal("write", "transactional_id", (transactional_id,)) \
            or self.access.first_refusal("write", "topic", topics)
        if refused is not None:
            return response_type(error_code=refused[0], error_message=refused[1])
        try:
            decision: Decision = await call()
        except Refused as refusal:
            return response_type(error_code=refusal.code, error_message=refusal.message)
        response = response_type(error_code=decision.error, error_message=explain(
            decision.error, transactional_id, decision.answer, self.coordinator.settings.max_timeout_ms))
        if decision.answer is not None and hasattr(response, "producer_id") and decision.error is ErrorCode.NONE:
            response.producer_id, response.producer_epoch = decision.answer.producer_id, decision.answer.producer_epoch
        return response

    async def InitProducerId(self, request: pb.TxnInitProducerIdRequest, context) -> pb.TxnInitProducerIdResponse:
        tid = request.transactional_id
        return await self._answer(pb.TxnInitProducerIdResponse, tid,
                                  lambda: self.coordinator.init_producer_id(tid, request.transaction_timeout_ms))

    async def AddPartitionsToTxn(self, request: pb.AddPartitionsToTxnRequest, context) -> pb.AddPartitionsToTxnResponse:
        tid = request.transactional_id
        partitions = frozenset(TopicPartition(t.topic, p) for t in request.topics for p in t.partitions)
        if (problem := next(filter(None, (negative_partition(tp.topic, tp.partition) for tp in sorted(partitions))), None)) is not None:
            return pb.AddPartitionsToTxnResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
        if request.verify_only or request.add_for_produce:
            return self._refused_unless_a_broker() or await self._leaders_question(request, partitions)
        return await self._answer(pb.AddPartitionsToTxnResponse, tid, lambda: self.coordinator.add_partitions(
            tid, request.producer_id, request.producer_epoch, partitions), tuple(t.topic for t in request.topics))

    def _refused_unless_a_broker(self) -> pb.AddPartitionsToTxnResponse | None:
        """The refusal of a partition leader's question (verify_only, add_for_produce) that is
        not a broker's (CLUSTER_ACTION); None when it may be answered."""
        return self.access.refused_response(pb.AddPartitionsToTxnResponse, "cluster_action", "cluster")

    async def own_leaders_question(self, request: pb.AddPartitionsToTxnRequest) -> pb.AddPartitionsToTxnResponse:
        """A question (verify_only, add_for_produce) of a partition led by this broker, called
        in process instead of through gRPC to itself (`TxnVerifier`): the broker is its own
        caller, so there is no principal to authorize; answered exactly as the RPC answers it."""
        partitions = frozenset(TopicPartition(t.topic, p) for t in request.topics for p in t.partitions)
        return await self._leaders_question(request, partitions)

    async def _leaders_question(self, request: pb.AddPartitionsToTxnRequest,
                                partitions: frozenset[TopicPartition]) -> pb.AddPartitionsToTxnResponse:
        if not request.transactional_id or not partitions:
            flag = "verify_only" if request.verify_only else "add_for_produce"
            return pb.AddPartitionsToTxnResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=f"{flag} needs a "
                                                 "transactional_id and at least one partition: name the ones meant")
        return self._verify(request, partitions) if request.verify_only else await self._add_for_produce(request, partitions)

    def _verify(self, request: pb.AddPartitionsToTxnRequest, partitions: frozenset[TopicPartition]) -> pb.AddPartitionsToTxnResponse:
        """verify_only (KIP-890 part 1): a partition leader asks before a producer's first
        transactional batch there; answered from memory (what is in memory is durable), no write."""
        tid = request.transactional_id
        try:
            meta = self.coordinator.describe(tid)
        except Refused as refusal:
            return pb.AddPartitionsToTxnResponse(error_code=refusal.code, error_message=refusal.message)
        error = verify_partitions(meta, request.producer_id, request.producer_epoch, partitions)
        return pb.AddPartitionsToTxnResponse(error_code=error, error_message=unverified(error, tid, meta, partitions))

    async def _add_for_produce(self, request: pb.AddPartitionsToTxnRequest,
                               partitions: frozenset[TopicPartition]) -> pb.AddPartitionsToTxnResponse:
        """KIP-890 part 2: a partition leader adds the partition of a producer's first
        transactional batch there. The leader checked the producer's WRITE on the id and the
        topic; here the caller must be a broker (CLUSTER_ACTION). The decision is the
        producer's own add (`state_machine.add_partitions`), answered once durable."""
        tid = request.transactional_id
        try:
            decision = await self.coordinator.add_partitions(tid, request.producer_id, request.producer_epoch, partitions)
        except Refused as refusal:
            return pb.AddPartitionsToTxnResponse(error_code=refusal.code, error_message=refusal.message)
        return pb.AddPartitionsToTxnResponse(error_code=decision.error, error_message=explain(
            decision.error, tid, decision.answer, self.coordinator.settings.max_timeout_ms))

    async def EndTxn(self, request: pb.EndTxnRequest, context) -> pb.EndTxnResponse:
        tid = request.transactional_id
        return await self._answer(pb.EndTxnResponse, tid, lambda: self.coordinator.end_txn(
            tid, request.producer_id, request.producer_epoch, request.commit, request.keep_epoch))

    async def ListTransactions(self, request: pb.ListTransactionsRequest, context) -> pb.ListTransactionsResponse:
        if (refused := self.access.refused_response(pb.ListTransactionsResponse, "describe", "cluster")) is not None:
            return refused
        wanted = set(request.states_filter)
        response = pb.ListTransactionsResponse()
        for meta in sorted(self.coordinator.loaded_transactions(), key=lambda m: m.transactional_id):
            if not wanted or meta.state.value in wanted:
                response.transactions.add(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                                          state=meta.state.value, coordinator_id=self.coordinator.broker_id)
        return response

    async def DescribeTransactions(self, request: pb.DescribeTransactionsRequest, context) -> pb.DescribeTransactionsResponse:
        def look_up(tid: str) -> TxnMetadata | None:
            refused = self.access.first_refusal("describe", "transactional_id", (tid,))
            if refused is not None:
                raise Refused(ErrorCode(refused[0]), refused[1])
            return self.coordinator.describe(tid)

        return pb.DescribeTransactionsResponse(transactions=describe_each(
            request.transactional_ids, look_up, lambda tid, meta: described(meta, self.coordinator.broker_id),
            lambda tid, code, message: pb.DescribedTransaction(transactional_id=tid, error_code=code, error_message=message),
            lambda tid: pb.DescribedTransaction(
                transactional_id=tid, state="Dead", error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                error_message=f"transactional id {tid!r} is not known (never registered, or expired): check the name "
                "(kraftlog transactions list)")))

def unverified(error: ErrorCode, transactional_id: str, meta: TxnMetadata | None, partitions: frozenset[TopicPartition]) -> str:
    """The message of a verify_only answer: why the partitions are not in the transaction."""
    if error is ErrorCode.INVALID_TXN_STATE:
        assert meta is not None
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions - meta.partitions) or sorted(partitions))
        return (f"{names} not in an ongoing transaction of {transactional_id!r} (it is {meta.state.value}): add the partition "
                "to the transaction (AddPartitionsToTxn) before writing to it; a transaction already committed or "
                "aborted takes no more writes: begin a new one")
    return explain(error, transactional_id, meta, 0)


def described(meta: TxnMetadata, coordinator_id: int) -> pb.DescribedTransaction:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(meta.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return pb.DescribedTransaction(
        transactional_id=meta.transactional_id, state=meta.state.value, producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch, transaction_timeout_ms=meta.timeout_ms, transaction_start_ms=meta.txn_start_ms,
        topics=[pb.TxnTopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
        coordinator_id=coordinator_id, last_update_ms=meta.last_update_ms)
