"""KIP-890 part 1 on the partition leader: before a producer's first transactional batch on a
partition (no transaction of that producer open there), the leader asks the producer's
transaction coordinator whether the partition is in its ongoing transaction at that epoch
(AddPartitionsToTxn with ``verify_only``), and appends only if so.

Without it, a batch the coordinator never heard of (a late retry from a transaction already
aborted, or a client that skipped AddPartitionsToTxn) would open a transaction on the
partition that no marker ever closes: the LSO would stay behind it and read_committed
readers would stop there for good (a "hanging transaction").

The answer is cached where it matters: once the batch is appended the transaction is open on
the partition (``TransactionIndex``), and later batches of that producer there need no
question until its marker closes it; so the cost is one round trip per producer, partition
and transaction. Questions asked while one is in flight (a producer's pipelined requests)
share its answer.

KIP-890 part 2: a producer that sets ``ProduceRequest.add_to_transaction`` does not call
AddPartitionsToTxn for its partitions; the leader asks the coordinator to add the partition
instead (``add_for_produce``), at the same point and with the same answers, and appends once
the partition is durably in the transaction. The producer's separate round trip to the
coordinator, and the leader's verification after it, become this one question.

`produce_error` (pure) turns the coordinator's answer into the produce's; `TxnVerifier` is
the shell: it finds the coordinator in the broker's metadata image (the leader of
``__transaction_state`` partition ``crc32(transactional_id) % N``) and calls it, never blocking
the event loop: over gRPC, or in process when the coordinator is this broker (the same
request and answer, without a round trip through gRPC to itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc
import structlog

from data_plane.partition_errors import PartitionError
from data_plane.coordination.internal_partitions import partition_count
from server_common.internal_topics import TRANSACTION_STATE_TOPIC, offsets_partition
from server_common.errors import ErrorCode
from kraftlog_proto import transaction_pb2, transaction_pb2_grpc
from server_common.channel_pool import AioChannelPool

log = structlog.get_logger("transactions")

VERIFY_CALL_TIMEOUT_S = 5.0
# The coordinator cannot answer yet (moving, loading, unreachable): the produce gets a code
# every producer retries, as Kafka answers NOT_ENOUGH_REPLICAS for these.
NOT_YET = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})

Key = tuple[str, str, int, int, int, bool]  # transactional id, topic, partition, producer id, epoch, add
# This broker's own coordinator, answering a question as the RPC does (TransactionCoordinatorService.own_leaders_question).
OwnCoordinator = Callable[[transaction_pb2.AddPartitionsToTxnRequest], Awaitable[transaction_pb2.AddPartitionsToTxnResponse]]


def produce_error(partition: str, producer_id: int, producer_epoch: int, code: ErrorCode, detail: str) -> PartitionError | None:
    """The produce's answer for the coordinator's verification answer (None: verified)."""
    if code is ErrorCode.NONE:
        return None
    who = f"{partition}: producer {producer_id} (epoch {producer_epoch})"
    if code in NOT_YET:
        return PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS, f"{who}: the transaction coordinator could not confirm yet "
                                                             f"that this partition is in the transaction ({code.name}: {detail}); "
                                                             "nothing was written: retry")
    return PartitionError(code, f"{who}, first transactional write here, refused by its transaction coordinator: {detail}")


def coordinator_partition(transactional_id: str, partitions: int) -> int | None:
    """The ``__transaction_state`` partition of ``transactional_id`` (None: the topic does not exist yet)."""
    return offsets_partition(transactional_id, partitions) if partitions > 0 else None


class TxnVerifier:
    """Asks transaction coordinators whether a partition is in a producer's transaction."""

    def __init__(self, replicas, broker_address: Callable[[int], str | None], credentials: grpc.ChannelCredentials | None,
                 broker_id: int, own_coordinator: OwnCoordinator) -> None:
        self._replicas = replicas  # the metadata image: __transaction_state's size and leaders
        self._broker_address = broker_address
        self._broker_id = broker_id
        self._own_coordinator = own_coordinator
        self._channels = AioChannelPool(transaction_pb2_grpc.TransactionCoordinatorStub, [], credentials)
        self._in_flight: dict[Key, asyncio.Future[tuple[ErrorCode, str]]] = {}

    async def verify(self, transactional_id: str, topic: str, partition: int, producer_id: int,
                     producer_epoch: int, add: bool = False) -> PartitionError | None:
        """None if the coordinator confirms; otherwise the error to answer the produce with.
        ``add`` (KIP-890 part 2, the producer asked for it): the coordinator adds the partition
        to the producer's transaction (a durable write) instead of only checking it is there."""
        name = f"{topic}-{partition}"
        if not transactional_id:
            return PartitionError(ErrorCode.INVALID_TXN_STATE, f"{name}: a transactional batch (producer {producer_id}) in a "
                                  "produce without transactional_id: set the producer's transactional id in the "
                                  "ProduceRequest, so that the leader can check the transaction with its coordinator")
        key = (transactional_id, topic, partition, producer_id, producer_epoch, add)
        asked = self._in_flight.get(key)
        if asked is None:
            asked = self._in_flight[key] = asyncio.ensure_future(self._ask(*key))
            asked.add_done_callback(lambda _: self._in_flight.pop(key, None))
        code, detail = await asyncio.shield(asked)  # a cancelled produce does not cancel the others' answer
        error = produce_error(name, producer_id, producer_epoch, code, detail)
        if error is not None and code not in NOT_YET:
            log.info("transactional write refused: not in the producer's transaction", transactional_id=transactional_id,
                     topic=topic, partition=partition, producer_id=producer_id, producer_epoch=producer_epoch, error=code.name)
        return error

    async def _ask(self, transactional_id: str, topic: str, partition: int, producer_id: int,
                   producer_epoch: int, add: bool) -> tuple[ErrorCode, str]:
        index = coordinator_partition(transactional_id, partition_count(self._replicas, TRANSACTION_STATE_TOPIC))
        if index is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TRANSACTION_STATE_TOPIC} does not exist yet"
        leader = self._replicas.leader_hint(TRANSACTION_STATE_TOPIC, index).leader_id
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=not add, add_for_produce=add,
            topics=[transaction_pb2.TxnTopicPartitions(topic=topic, partitions=[partition])])
        if leader == self._broker_id:
            response = await self._own_coordinator(request)
        else:
            address = self._broker_address(leader) if leader >= 0 else None
            if address is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TRANSACTION_STATE_TOPIC}-{index} has no reachable leader now"
            try:
                response = await self._channels.stub(address).AddPartitionsToTxn(request, timeout=VERIFY_CALL_TIMEOUT_S)
            except grpc.RpcError as err:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {leader} did not answer ({err.code().name}: {err.details()})"
        try:
            return ErrorCode(response.error_code), response.error_message
        except ValueError:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"code {response.error_code}: {response.error_message}"

    async def close(self) -> None:
        await self._channels.close()
