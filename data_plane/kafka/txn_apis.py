"""Transactions on the Kafka door: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn and TxnOffsetCommit, each answered by the same service objects as
the gRPC calls (data_plane/transactions/service.py, data_plane/groups/service.py), so the
coordinator, its two phases, its markers, its ACL checks and KIP-890's verification at the
partitions are kraftlog's own. FindCoordinator for a transactional id is in group_apis.py.

Kafka clients that send EndTxn v0-4 expect Kafka's transaction version 1: the producer epoch
stays the same across transactions (their next transaction writes with it). The door asks the
coordinator to keep it (``EndTxnRequest.keep_epoch``); kraftlog's own clients have theirs
bumped at every end (KIP-890 part 2), which EndTxn v5 would tell a Kafka client and which is
not served yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from data_plane.kafka.entities import NO_THROTTLE, build, millis, response_type, sibling
from data_plane.kafka.error_codes import to_kafka as kafka_code
from data_plane.kafka.group_apis import GroupApis, commit_response, commit_topics
from data_plane.transactions.service import TransactionCoordinatorService
from kraftlog_proto import group_pb2, transaction_pb2
from server_common.errors import ErrorCode
from server_common.internal_topics import OFFSETS_TOPIC, offsets_partition

ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
TXN_SERVED: dict[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 3),  # v4 on batches several transactional ids: brokers' calls, not clients'
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 4),  # v5 returns the bumped epoch (KIP-890 part 2)
    TXN_OFFSET_COMMIT: (0, 3),
}


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
        topics = request.v3_and_below_topics
        answer = await self.transactions.AddPartitionsToTxn(transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=request.v3_and_below_transactional_id, producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            topics=[transaction_pb2.TxnTopicPartitions(topic=t.name, partitions=list(t.partitions)) for t in topics]), None)
        code = kafka_code(answer.error_code)
        result, topic_result = sibling(out, "AddPartitionsToTxnPartitionResult"), sibling(out, "AddPartitionsToTxnTopicResult")
        return build(out, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(
            build(topic_result, name=t.name, results_by_partition=tuple(
                build(result, partition_index=p, partition_error_code=code) for p in t.partitions))
            for t in topics))

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
        answer = await self.transactions.EndTxn(transaction_pb2.EndTxnRequest(
            transactional_id=request.transactional_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            commit=request.committed, keep_epoch=True), None)
        return build(response_type(request), throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code))

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

