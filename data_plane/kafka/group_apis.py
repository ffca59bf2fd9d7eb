"""FindCoordinator, OffsetCommit and OffsetFetch on the Kafka door: Kafka's requests as the
gRPC ``GroupCoordinator`` service's requests, answered by that same service object (its
ACL checks, its coordinator, its ``__consumer_offsets``), and its answers in Kafka's shape.
A consumer that assigns partitions itself commits as Kafka's simple consumers do: member id
empty, generation -1 (the coordinator's admin commit, for groups without members).
Consumer-group membership (JoinGroup, SyncGroup, Heartbeat) is not served yet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.groups.service import GroupCoordinatorService
from data_plane.kafka.entities import NO_THROTTLE, build, group_by_topic, response_type, sibling, version
from data_plane.kafka.error_codes import to_kafka as kafka_code
from kraftlog_proto import group_pb2

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
GROUP_KEY = 0


@dataclass
class GroupApis:
    service: GroupCoordinatorService
    kafka_endpoint: Callable[[int], tuple[str, int] | None]

    async def find_coordinator(self, request):
        out = response_type(request)
        keys = list(getattr(request, "coordinator_keys", None) or [request.key])
        if getattr(request, "key_type", GROUP_KEY) != GROUP_KEY:
            answers = [(key, -1, "", 0, KafkaError.invalid_request, "transaction coordinators are not served on the Kafka "
                        "listener yet (docs/kafka.md): use kraftlog's client for transactions") for key in keys]
        else:
            found = await self.service.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=keys, key_type=group_pb2.GROUP), None)
            answers = [self._kafka_coordinator(c) for c in found.coordinators]
        if version(request) >= 4:
            entry = sibling(out, "Coordinator")
            return build(out, throttle_time=NO_THROTTLE, coordinators=tuple(
                build(entry, key=key, node_id=node, host=host, port=port, error_code=code, error_message=message)
                for key, node, host, port, code, message in answers))
        _, node, host, port, code, message = answers[0]
        return build(out, throttle_time=NO_THROTTLE, error_code=code, error_message=message, node_id=node, host=host, port=port)

    def _kafka_coordinator(self, c: group_pb2.Coordinator) -> tuple:
        """A coordinator as Kafka clients reach it: its broker's Kafka endpoint."""
        if c.error_code:
            return c.key, -1, "", 0, kafka_code(c.error_code), c.error_message
        endpoint = self.kafka_endpoint(c.node_id)
        if endpoint is None:
            return (c.key, -1, "", 0, KafkaError.coordinator_not_available,
                    f"the coordinator, broker {c.node_id}, has no Kafka listener: start it with --kafka-listen")
        return c.key, c.node_id, endpoint[0], endpoint[1], KafkaError.none, None

    async def offset_commit(self, request):
        commit = group_pb2.OffsetCommitRequest(
            group_id=request.group_id, member_id=request.member_id, member_epoch=request.generation_id_or_member_epoch,
            topics=[group_pb2.OffsetCommitTopic(topic=t.name, partitions=[
                group_pb2.OffsetCommitPartition(partition=p.partition_index, committed_offset=p.committed_offset,
                                                committed_leader_epoch=getattr(p, "committed_leader_epoch", -1),
                                                metadata=p.committed_metadata or "")
                for p in t.partitions]) for t in request.topics])
        answer = await self.service.OffsetCommit(commit, None)
        codes = {(t.topic, p.partition): p.error_code for t in answer.topics for p in t.partitions}
        out = response_type(request)
        partition_type, topic_type = sibling(out, "OffsetCommitResponsePartition"), sibling(out, "OffsetCommitResponseTopic")
        by_topic = group_by_topic((t.name, build(
            partition_type, partition_index=p.partition_index,
            error_code=kafka_code(answer.error_code or codes.get((t.name, p.partition_index), 0))))
            for t in request.topics for p in t.partitions)
        return build(out, throttle_time=NO_THROTTLE, topics=tuple(
            build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    async def offset_fetch(self, request):
        wanted = None if request.topics is None else [
            group_pb2.TopicPartitions(topic=t.name, partitions=list(t.partition_indexes)) for t in request.topics]
        answer = await self.service.OffsetFetch(group_pb2.OffsetFetchRequest(
            group_id=request.group_id, topics=wanted or [], require_stable=getattr(request, "require_stable", False)), None)
        out = response_type(request)
        partition_type, topic_type = sibling(out, "OffsetFetchResponsePartition"), sibling(out, "OffsetFetchResponseTopic")
        group_error = kafka_code(answer.error_code)
        if group_error is not KafkaError.none and version(request) < 2:  # no group-level field: every partition says it
            entries = [(t.topic, p, group_error) for t in (wanted or []) for p in
                       [group_pb2.OffsetFetchPartition(partition=i, committed_offset=-1, committed_leader_epoch=-1) for i in t.partitions]]
        else:
            entries = [(t.topic, p, kafka_code(p.error_code)) for t in answer.topics for p in t.partitions]
        by_topic = group_by_topic((topic, build(
            partition_type, partition_index=p.partition, committed_offset=p.committed_offset,
            committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata, error_code=code)) for topic, p, code in entries)
        return build(out, throttle_time=NO_THROTTLE, error_code=group_error, topics=tuple(
            build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))
