"""The Kafka APIs this door serves, each a translation into the calls the gRPC services make
(data_plane/broker/service.py, data_plane/groups/service.py): the same ReplicaManager produce,
fetch and list-offsets paths, the same ACL checks (``serve_authorized``), the same metadata
answer, producer-id allocation and group coordinator. Nothing here keeps state of its own but
the Kafka form of recently fetched and produced batches (``ConvertedBatches``), a cache.

Responses are built from one set of fields for every version served (``entities.build``
keeps the fields the version's kio entity has), so a handler is written once, not per version.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import Records

from data_plane.broker.authorization import describable, serve_authorized, transactional_refusal
from data_plane.partition_errors import PartitionError
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.broker.record_deletion import delete_records
from data_plane.requests import (DeleteRecordsItem, DeleteRecordsResult, EpochEndResult, FetchItem, FetchResult, OffsetResult,
                                        ProduceItem, ProduceResult)
from data_plane.kafka.acl_apis import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS, AclApis
from data_plane.kafka.admin_apis import CREATE_TOPICS, DELETE_TOPICS, AdminApis
from data_plane.kafka.batches import ConvertedBatches, KafkaBatchError, converted_produce
from data_plane.kafka.codec import Request
from data_plane.kafka.sasl import SASL_SERVED
from data_plane.kafka.txn_apis import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, TXN_SERVED, TxnApis
from data_plane.kafka.config_apis import ALTER_CONFIGS, CREATE_PARTITIONS, DESCRIBE_CLUSTER, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, ConfigApis
from data_plane.kafka.entities import NO_THROTTLE, build, group_by_topic, millis, response_type, sibling, version
from data_plane.kafka.error_codes import to_kafka as kafka_code
from data_plane.kafka.classic_groups import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP
from data_plane.kafka.group_apis import (CONSUMER_GROUP_HEARTBEAT, DELETE_GROUPS, DESCRIBE_GROUPS, FIND_COORDINATOR, LIST_GROUPS,
                                         OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, GroupApis, NO_AUTHORIZED_OPERATIONS,
                                         PeerContext)
from server_common.errors import ErrorCode
from kraftlog_proto import broker_pb2
from server_common.authorization import AccessControl
from server_common.limits import FETCH_BYTES_MAX_DEFAULT

# What a broker keeps of fetched batches' Kafka form: the records a few consumers behind the
# same tail read, at a memory cost small beside the broker's page cache.
CONVERTED_BYTES = 64 << 20
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 21, 23
# api key -> (lowest, highest) version served. Produce from v3 and Fetch from v4: record
# batch v2 only (Kafka 0.11 on). Fetch stops at v12 (v13 names topics by id), DeleteTopics
# at v5 (v6 names topics by id). ApiVersions advertises exactly this table.
SERVED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    METADATA: (0, 12),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 4),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 4),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    CREATE_TOPICS: (2, 7),
    CREATE_PARTITIONS: (0, 3),
    DELETE_RECORDS: (0, 2),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_CONFIGS: (1, 4),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ALTER_CONFIGS: (0, 2),  # the legacy whole-set form, which aiokafka's admin client sends
    DESCRIBE_CLUSTER: (0, 1),
    DELETE_TOPICS: (1, 5),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 4),
    DESCRIBE_ACLS: (1, 3),  # v0 has no pattern type
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    **TXN_SERVED,
    **SASL_SERVED,  # answered by the listener (data_plane/kafka/sasl.py)
}
READ_COMMITTED = 1


@dataclass
class KafkaApis:
    """One broker's answers to Kafka requests."""

    broker_id: int
    replicas: ReplicaManager
    access: AccessControl
    metadata_response: Callable[[list[str] | None], broker_pb2.MetadataResponse]
    init_producer_id: Callable[[], Awaitable[broker_pb2.InitProducerIdResponse]]
    kafka_endpoint: Callable[[int], tuple[str, int] | None]  # broker id -> its Kafka listener, if it has one
    groups: GroupApis
    admin: AdminApis
    configs: ConfigApis
    acls: AclApis
    txns: TxnApis
    converted: ConvertedBatches = field(default_factory=lambda: ConvertedBatches(CONVERTED_BYTES))

    async def answer(self, request: Request, peer: PeerContext):
        """The response entity (None: acks=0 produce, answered with nothing)."""
        if request.api_key == CONSUMER_GROUP_HEARTBEAT:  # the one call that records the client's address
            return await self.groups.consumer_group_heartbeat(request.body, peer)
        if request.api_key == JOIN_GROUP:  # so does a classic member's join
            return await self.groups.classic.join_group(request.body, request.client_id, peer.host)
        classic = self.groups.classic
        handler = {
            PRODUCE: self.produce, FETCH: self.fetch, LIST_OFFSETS: self.list_offsets, METADATA: self.metadata,
            API_VERSIONS: self.api_versions, INIT_PRODUCER_ID: self.init_producer,
            FIND_COORDINATOR: self.groups.find_coordinator, OFFSET_COMMIT: self.groups.offset_commit,
            OFFSET_FETCH: self.groups.offset_fetch, SYNC_GROUP: classic.sync_group, HEARTBEAT: classic.heartbeat,
            LEAVE_GROUP: classic.leave_group, DESCRIBE_GROUPS: self.groups.describe_groups, LIST_GROUPS: self.groups.list_groups,
            DELETE_GROUPS: self.groups.delete_groups, OFFSET_DELETE: self.groups.offset_delete, CREATE_TOPICS: self.admin.create, DELETE_TOPICS: self.admin.delete,
            DELETE_RECORDS: self.delete_records, OFFSET_FOR_LEADER_EPOCH: self.epoch_end_offsets, CREATE_PARTITIONS: self.configs.add_partitions, DESCRIBE_CONFIGS: self.configs.describe,
            INCREMENTAL_ALTER_CONFIGS: self.configs.alter, ALTER_CONFIGS: self.configs.replace, DESCRIBE_CLUSTER: self.configs.describe_cluster,
            DESCRIBE_ACLS: self.acls.describe, CREATE_ACLS: self.acls.create, DELETE_ACLS: self.acls.delete,
            ADD_PARTITIONS_TO_TXN: self.txns.add_partitions, ADD_OFFSETS_TO_TXN: self.txns.add_offsets, END_TXN: self.txns.end,
            TXN_OFFSET_COMMIT: self.txns.offset_commit,
        }[request.api_key]
        return await handler(request.body)

    async def api_versions(self, request):
        return api_versions_response(version(request), KafkaError.none)

    async def metadata(self, request):
        out = response_type(request)
        names = None if request.topics is None else [self._topic_name(t) for t in request.topics]
        if names == [] and version(request) == 0:
            names = None  # v0: an empty list means every topic
        answer = describable(self.access, self.metadata_response(names), named=bool(names))  # v1 on: [] asks for brokers only
        brokers = []
        for b in answer.brokers:
            endpoint = None if b.fenced else self.kafka_endpoint(b.broker_id)
            if endpoint is not None:
                brokers.append(build(sibling(out, "MetadataResponseBroker"), node_id=b.broker_id, host=endpoint[0],
                                     port=endpoint[1], rack=b.rack or None))
        topic_type, partition_type = sibling(out, "MetadataResponseTopic"), sibling(out, "MetadataResponsePartition")
        topics = tuple(
            build(topic_type, error_code=kafka_code(t.error_code), name=t.name,
                  topic_id=uuid.UUID(t.topic_id) if t.topic_id else uuid.UUID(int=0), is_internal=t.name.startswith("__"),
                  topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
                  partitions=tuple(build(partition_type, error_code=kafka_code(p.error_code), partition_index=p.partition,
                                         leader_id=p.leader_id, leader_epoch=p.leader_epoch, replica_nodes=tuple(p.replicas),
                                         isr_nodes=tuple(p.isr), offline_replicas=tuple(p.offline_replicas))
                                   for p in t.partitions))
            for t in answer.topics)
        return build(out, throttle_time=NO_THROTTLE, brokers=tuple(brokers), cluster_id=answer.cluster_id or None,
                     controller_id=self.broker_id, topics=topics, cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS)

    def _topic_name(self, topic) -> str:
        """A requested topic's name; from v10 a client may name it by id alone (KIP-516), as
        KIP-848 consumers do for the topics they are assigned."""
        if topic.name is not None:
            return topic.name
        image = self.replicas.image
        found = image.topics_by_id.get(str(topic.topic_id)) if image is not None else None
        return found.name if found is not None else f"<unknown topic id {topic.topic_id}>"

    async def produce(self, request):
        now = self.replicas.clock_ms()
        items: list[ProduceItem] = []
        refused: list[ProduceResult] = []
        sent: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}
        for topic in request.topic_data:
            for part in topic.partition_data:
                try:
                    pairs = sent[topic.name, part.index] = converted_produce(bytes(part.records or b""), now)
                    items.append(ProduceItem(topic.name, part.index, b"".join(stored for _, stored in pairs)))
                except KafkaBatchError as exc:
                    refused.append(ProduceResult(topic.name, part.index, PartitionError(
                        ErrorCode.INVALID_RECORD, f"{topic.name}-{part.index}: {exc}")))
        acks, transactional_id = request.acks, request.transactional_id or ""
        refusal = transactional_refusal(self.access, transactional_id, items)
        if acks not in (-1, 0, 1):
            refusal = PartitionError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1 (all), 0 or 1, got {acks}")
        if refusal is not None:
            results = [ProduceResult(i.topic, i.partition, refusal) for i in items]
        else:
            results = await serve_authorized(
                self.access, "write", items, lambda i: (i.topic, i.partition),
                lambda allowed: self.replicas.produce(acks, millis(request.timeout), allowed, transactional_id), ProduceResult)
            for result in results:  # what the client sent is these records' Kafka form: its readers need no conversion
                if result.error.code == ErrorCode.NONE:
                    for kafka, stored in sent[result.topic, result.partition]:
                        self.converted.remember_produced(kafka, stored)
        if acks == 0:
            return None
        out = response_type(request)
        partition_type, topic_type = sibling(out, "PartitionProduceResponse"), sibling(out, "TopicProduceResponse")
        by_topic = group_by_topic((r.topic, build(
            partition_type, index=r.partition, error_code=kafka_code(r.error.code), base_offset=r.base_offset,
            log_append_time=_datetime(r.log_append_time_ms), log_start_offset=r.log_start_offset,
            record_errors=(), error_message=r.error.message or None)) for r in refused + results)
        return build(out, throttle_time=NO_THROTTLE, responses=tuple(
            build(topic_type, name=name, partition_responses=tuple(parts)) for name, parts in by_topic.items()))

    async def fetch(self, request):
        """Sessionless (KIP-227's session id 0): every request names its partitions, as Kafka allows."""
        items = [FetchItem(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
                 for t in request.topics for p in t.partitions]
        committed = request.isolation_level == READ_COMMITTED
        max_bytes = request.max_bytes or FETCH_BYTES_MAX_DEFAULT
        results = await serve_authorized(
            self.access, "read", items, lambda i: (i.topic, i.partition),
            lambda allowed: self.replicas.reads.fetch(millis(request.max_wait), request.min_bytes, max_bytes, allowed, committed),
            FetchResult)
        out = response_type(request)
        partition_type, aborted_type = sibling(out, "PartitionData"), sibling(out, "AbortedTransaction")
        by_topic = group_by_topic((r.topic, build(
            partition_type, partition_index=r.partition, error_code=kafka_code(r.error.code),
            high_watermark=r.high_watermark, last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            aborted_transactions=tuple(build(aborted_type, producer_id=a.producer_id, first_offset=a.first_offset)
                                       for a in r.aborted) if committed else None,
            preferred_read_replica=-1, records=Records(records),  # empty, never null: librdkafka reads a null as malformed
            current_leader=build(sibling(out, "LeaderIdAndEpoch"), leader_id=r.leader.leader_id,
                                 leader_epoch=r.leader.leader_epoch))) for r, records in zip(results, self._kafka_records(results, items, max_bytes)))
        topic_type = sibling(out, "FetchableTopicResponse")
        return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.none, session_id=0, responses=tuple(
            build(topic_type, topic=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    def _kafka_records(self, results: list[FetchResult], items: list[FetchItem], max_bytes: int) -> list[bytes]:
        """Each partition's records in Kafka's form within the bytes the client asked for, per
        partition and in all (KIP-74: the first batch of the first partition with records
        whatever its size). Bounding the converted bytes, not only the stored ones, keeps a
        response of compressed records to what the client sized its buffers for, and hands it
        records sooner: it consumes one response while the door converts the next."""
        out: list[bytes] = []
        left = max_bytes
        for result, item in zip(results, items):
            records = self.converted.to_kafka(result.data, min(item.max_bytes or max_bytes, left), not any(out)) if result.data else b""
            left -= len(records)
            out.append(records)
        return out

    async def list_offsets(self, request):
        committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        items, refused = [], []
        for t in request.topics:
            for p in t.partitions:
                if p.timestamp < -2:  # -3 (max timestamp), -4 (tiered), -5 (earliest local): not kept here
                    refused.append(OffsetResult(t.name, p.partition_index, PartitionError(
                        ErrorCode.INVALID_REQUEST, f"timestamp {p.timestamp}: this broker answers -2 (earliest), "
                        "-1 (latest) or a time in ms")))
                else:
                    items.append((t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1)))
        results = await serve_authorized(self.access, "describe", items, lambda i: (i[0], i[1]),
                                         lambda allowed: self.replicas.reads.list_offsets(allowed, committed), OffsetResult)
        out = response_type(request)
        partition_type, topic_type = sibling(out, "ListOffsetsPartitionResponse"), sibling(out, "ListOffsetsTopicResponse")
        by_topic = group_by_topic((r.topic, build(
            partition_type, partition_index=r.partition, error_code=kafka_code(r.error.code), timestamp=r.timestamp,
            offset=r.offset, leader_epoch=r.leader_epoch)) for r in refused + results)
        return build(out, throttle_time=NO_THROTTLE, topics=tuple(
            build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    async def delete_records(self, request):
        """Each partition's log start moved up to the offset (-1: the high watermark), at its
        leader, as the gRPC DeleteRecords does (DELETE on the topic)."""
        items, refused = [], []
        for t in request.topics:
            for p in t.partitions:
                if p.offset < -1:
                    refused.append(DeleteRecordsResult(t.name, p.partition_index, PartitionError(
                        ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {p.offset}: give -1 (the high watermark) or an offset >= 0")))
                else:
                    items.append(DeleteRecordsItem(t.name, p.partition_index, p.offset))
        results = await serve_authorized(self.access, "delete", items, lambda i: (i.topic, i.partition),
                                         lambda allowed: delete_records(self.replicas, allowed), DeleteRecordsResult)
        out = response_type(request)
        partition_type, topic_type = sibling(out, "DeleteRecordsPartitionResult"), sibling(out, "DeleteRecordsTopicResult")
        by_topic = group_by_topic((r.topic, build(partition_type, partition_index=r.partition, low_watermark=r.low_watermark,
                                                   error_code=kafka_code(r.error.code))) for r in refused + results)
        return build(out, throttle_time=NO_THROTTLE, topics=tuple(
            build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    async def epoch_end_offsets(self, request):
        """OffsetForLeaderEpoch (KIP-101, KIP-320): where each named epoch ends in this
        leader's log, as the gRPC call answers it (DESCRIBE on the topic)."""
        items = [(t.topic, p.partition, p.leader_epoch, getattr(p, "current_leader_epoch", -1))
                 for t in request.topics for p in t.partitions]
        results = await serve_authorized(self.access, "describe", items, lambda i: (i[0], i[1]),
                                         lambda allowed: self.replicas.reads.epoch_end_offsets(allowed), EpochEndResult)
        out = response_type(request)
        partition_type, topic_type = sibling(out, "EpochEndOffset"), sibling(out, "OffsetForLeaderTopicResult")
        by_topic = group_by_topic((r.topic, build(partition_type, partition=r.partition, error_code=kafka_code(r.error.code),
                                                   leader_epoch=r.leader_epoch, end_offset=r.end_offset)) for r in results)
        return build(out, throttle_time=NO_THROTTLE, topics=tuple(
            build(topic_type, topic=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    async def init_producer(self, request):
        """An idempotent producer's id, authorized as the gRPC InitProducerId is (IDEMPOTENT_WRITE
        on the cluster or WRITE on any topic); a transactional one's from its coordinator."""
        out = response_type(request)
        if request.transactional_id:
            return await self.txns.init_producer(request, out)
        if not self.access.allows_any("write", "topic") and not self.access.allows("idempotent_write", "cluster"):
            return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.cluster_authorization_failed,
                         producer_id=-1, producer_epoch=-1)
        answer = await self.init_producer_id()
        failed = answer.error_code != ErrorCode.NONE
        return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code),
                     producer_id=-1 if failed else answer.producer_id, producer_epoch=-1 if failed else answer.producer_epoch)


def api_versions_response(api_version: int, error: KafkaError):
    """ApiVersions at ``api_version`` (v0 for a version above those served, as Kafka answers)."""
    out = load_response_schema(API_VERSIONS, api_version)
    entry = sibling(out, "ApiVersion")
    return build(out, error_code=error, throttle_time=NO_THROTTLE,
                 api_keys=tuple(build(entry, api_key=key, min_version=low, max_version=high)
                                for key, (low, high) in sorted(SERVED.items())))


def _datetime(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
