"""Transactions on the Kafka door: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit, each answered by the same service objects as
the gRPC calls (data_plane/transactions/service.py, data_plane/groups/service.py), so the
coordinator, its two phases, its markers, its ACL checks and KIP-890's verification at the
partitions are kraftlog's own. FindCoordinator for a transactional id is in group_apis.py.

EndTxn's version says which producer epoch rule the client follows. v0-4 are Kafka's
transaction version 1: the epoch stays the same across transactions (the next one writes with
it), so the door asks the coordinator to keep it (``EndTxnRequest.keep_epoch``). v5 is KIP-890
part 2: every end bumps the epoch and the answer carries the producer id and epoch to use next,
which is what kraftlog's coordinator does for its own clients; the door passes that through.
A late write of the ended transaction's epoch is then fenced at the partition.

AddPartitionsToTxn v4 and v5 are brokers' calls (Kafka's partition leaders verify a producer's
first transactional write with them, KIP-890 part 1): several transactions in one request,
each adding its partitions or, with ``verify_only``, asking whether they are in it. Each goes
to the coordinator's own AddPartitionsToTxn, the batch as a whole needs CLUSTER_ACTION on the
cluster, as in Kafka.

Not served: the rest of transaction version 2 (Produce v12 and TxnOffsetCommit v5, where the
partition leader adds a partition to the transaction without the client's AddPartitionsToTxn),
so no ``transaction.version`` feature is advertised and a Java client keeps to version 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.entities import NO_THROTTLE, build, millis, response_type, sibling, version
from data_plane.kafka.error_codes import to_kafka as kafka_code
from data_plane.kafka.group_apis import GroupApis, commit_response, commit_topics
from data_plane.transactions.service import TransactionCoordinatorService
from kraftlog_proto import group_pb2, transaction_pb2
from server_common.errors import ErrorCode
from server_common.internal_topics import OFFSETS_TOPIC, offsets_partition

ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
TXN_SERVED: dict[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 5),  # v4 on batches several transactional ids: brokers' calls, not clients'
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 5),  # v5 bumps the epoch at every end and returns it (KIP-890 part 2)
    TXN_OFFSET_COMMIT: (0, 3),
}
BATCHED = 4  # AddPartitionsToTxn from this version: several transactions per request, brokers only
EPOCH_BUMPING = 5  # EndTxn from this version: the epoch bumped at every end and answered


@dataclass
class TxnApis:
    transactions: TransactionCoordinatorService
    groups: GroupApis

    async def init_producer(self, request, out: type):
        answer = await self.transactions.InitProducerId(transaction_pb2.TxnInitProducerIdRequest(
            transactional_id=request.transactional_id, transaction_timeout_ms=millis(request.transaction_timeout)), None)
        failed = answer.error_code != ErrorCode.NONE
        return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code),
                     producer_id=-1 if failed else answer.producer_id, producer_epoch=-1 if failed else answer.producer_epoch)

    async def add_partitions(self, request):
        out = response_type(request)
        if version(request) >= BATCHED:
            return await self._add_partitions_batched(request, out)
        topics = request.v3_and_below_topics
        code = await self._add(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                               request.v3_and_below_producer_epoch, topics, verify_only=False)
        return build(out, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=_topic_results(out, topics, code))

    async def _add_partitions_batched(self, request, out):
        """v4+: each transaction added (or verified) on its own, as Kafka answers a batch."""
        refused = self.transactions.access.first_refusal("cluster_action", "cluster")
        if refused is not None:
            return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(refused[0]), results_by_transaction=())
        results = []
        for txn in request.transactions:
            code = await self._add(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only)
            results.append(build(sibling(out, "AddPartitionsToTxnResult"), transactional_id=txn.transactional_id,
                                 topic_results=_topic_results(out, txn.topics, code)))
        return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.none, results_by_transaction=tuple(results))

    async def _add(self, transactional_id: str, producer_id: int, producer_epoch: int, topics, verify_only: bool) -> KafkaError:
        answer = await self.transactions.AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=verify_only,
            topics=[transaction_pb2.TxnTopicPartitions(topic=t.name, partitions=list(t.partitions)) for t in topics]), None)
        return kafka_code(answer.error_code)

    async def add_offsets(self, request):
        """The group's `__consumer_offsets` partition joins the transaction, as Kafka's
        AddOffsetsToTxn does (READ on the group is checked when the offsets are sent)."""
        count = self.groups.service.offsets_topic.partitions
        answer = await self.transactions.AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=request.transactional_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            topics=[transaction_pb2.TxnTopicPartitions(topic=OFFSETS_TOPIC, partitions=[offsets_partition(request.group_id, count)])]),
            None)
        return build(response_type(request), throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code))

    async def end(self, request):
        bumps = version(request) >= EPOCH_BUMPING
        answer = await self.transactions.EndTxn(transaction_pb2.EndTxnRequest(
            transactional_id=request.transactional_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            commit=request.committed, keep_epoch=not bumps), None)
        done = answer.error_code == ErrorCode.NONE and bumps
        return build(response_type(request), throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code),
                     producer_id=answer.producer_id if done else -1, producer_epoch=answer.producer_epoch if done else -1)

    async def offset_commit(self, request):
        """A classic member's offsets are checked against its generation here (v3 on: before it
        a TxnOffsetCommit names no member, and Kafka checks none), then go in as the
        coordinator's memberless ones, as `GroupApis.offset_commit` does; a KIP-848 member's
        under its member epoch."""
        classic = self.groups.classic
        member_id, epoch, refusal = getattr(request, "member_id", "") or "", getattr(request, "generation_id", -1), None
        if classic.is_classic(request.group_id):
            if member_id:
                refusal = classic.commit_refusal(request.group_id, member_id, epoch)
            member_id, epoch = "", -1
        commit = group_pb2.TxnOffsetCommitRequest(
            group_id=request.group_id, transactional_id=request.transactional_id, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch, member_id=member_id, member_epoch=epoch, topics=commit_topics(request.topics))
        answer = await self.groups.service.TxnOffsetCommit(commit, None) if refusal is None else group_pb2.TxnOffsetCommitResponse()
        return commit_response(request, answer, refusal, "TxnOffsetCommitResponsePartition", "TxnOffsetCommitResponseTopic")



def _topic_results(out: type, topics, code: KafkaError) -> tuple:
    """One transaction's answer per partition: the coordinator answers the call as a whole."""
    result, topic_result = sibling(out, "AddPartitionsToTxnPartitionResult"), sibling(out, "AddPartitionsToTxnTopicResult")
    return tuple(build(topic_result, name=t.name, results_by_partition=tuple(
        build(result, partition_index=p, partition_error_code=code) for p in t.partitions)) for t in topics)
