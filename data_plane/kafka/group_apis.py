"""FindCoordinator, ConsumerGroupHeartbeat, OffsetCommit and OffsetFetch on the Kafka door:
Kafka's requests as the gRPC ``GroupCoordinator`` service's requests, answered by that same
service object (its ACL checks, its coordinator, its ``__consumer_offsets``), and its answers
in Kafka's shape. Membership is KIP-848's ConsumerGroupHeartbeat, which kraftlog's
coordinator speaks natively (Kafka's names topics by id in assignments: translated with the
metadata image). A consumer that assigns partitions itself commits as Kafka's simple
consumers do: member id empty, generation -1 (the coordinator's admin commit, for groups
without members). The classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) is
``classic_groups``; DescribeGroups, ListGroups and DeleteGroups answer for both kinds."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Callable

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.groups.service import GroupCoordinatorService
from data_plane.kafka.classic_groups import ClassicGroups
from data_plane.kafka.entities import NO_THROTTLE, build, group_by_topic, millis, response_type, sibling, version
from data_plane.kafka.error_codes import to_kafka as kafka_code
from kraftlog_proto import group_pb2
from server_common.errors import ErrorCode
from server_common.principal import current_identity

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, CONSUMER_GROUP_HEARTBEAT = 8, 9, 10, 68
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
CONSUMER_PROTOCOL = "consumer"
GROUP_KEY = 0
NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's "not asked for"
BATCHED_OFFSET_FETCH = 8  # OffsetFetch from v8 asks for several groups at once


@dataclass(frozen=True)
class PeerContext:
    """The one thing the group service reads of a gRPC call context for Kafka's calls: the
    client's address (a member's client host)."""

    host: str
    port: int

    def peer(self) -> str:
        return f"ipv4:{self.host}:{self.port}"


@dataclass
class GroupApis:
    service: GroupCoordinatorService
    kafka_endpoint: Callable[[int], tuple[str, int] | None]
    image: Callable[[], object]  # the broker's metadata image: topic names <-> ids
    classic: ClassicGroups

    async def find_coordinator(self, request):
        out = response_type(request)
        keys = list(getattr(request, "coordinator_keys", None) or [request.key])
        key_type = group_pb2.GROUP if getattr(request, "key_type", GROUP_KEY) == GROUP_KEY else group_pb2.TRANSACTION
        found = await self.service.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=keys, key_type=key_type), None)
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
        """A classic group's member commits under its generation, checked here; the commit then
        goes in as the coordinator's memberless one (the coordinator knows no classic members)."""
        member_id, epoch = request.member_id, request.generation_id_or_member_epoch
        refusal = None
        if self.classic.is_classic(request.group_id):
            refusal = self.classic.commit_refusal(request.group_id, member_id, epoch)
            member_id, epoch = "", -1
        commit = group_pb2.OffsetCommitRequest(group_id=request.group_id, member_id=member_id, member_epoch=epoch,
                                               topics=commit_topics(request.topics))
        answer = await self.service.OffsetCommit(commit, None) if refusal is None else group_pb2.OffsetCommitResponse()
        return commit_response(request, answer, refusal, "OffsetCommitResponsePartition", "OffsetCommitResponseTopic")

    async def offset_fetch(self, request):
        out = response_type(request)
        if version(request) < BATCHED_OFFSET_FETCH:
            group_error, topics = await self._fetch_group(out, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                                                          request.group_id, request.topics, request.require_stable
                                                          if hasattr(request, "require_stable") else False, version(request))
            return build(out, throttle_time=NO_THROTTLE, error_code=group_error, topics=topics)
        groups = []
        for g in request.groups:
            group_error, topics = await self._fetch_group(out, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                                                          g.group_id, g.topics, request.require_stable, version(request))
            groups.append(build(sibling(out, "OffsetFetchResponseGroup"), group_id=g.group_id, error_code=group_error,
                                topics=topics))
        return build(out, throttle_time=NO_THROTTLE, groups=tuple(groups))

    async def _fetch_group(self, out: type, topic_name: str, partition_name: str, group_id: str, topics, require_stable: bool,
                           api_version: int) -> tuple[KafkaError, tuple]:
        wanted = None if topics is None else [
            group_pb2.TopicPartitions(topic=t.name, partitions=list(t.partition_indexes)) for t in topics]
        answer = await self.service.OffsetFetch(group_pb2.OffsetFetchRequest(
            group_id=group_id, topics=wanted or [], require_stable=require_stable), None)
        partition_type, topic_type = sibling(out, partition_name), sibling(out, topic_name)
        group_error = kafka_code(answer.error_code)
        if group_error is not KafkaError.none and api_version < 2:  # no group-level field: every partition says it
            entries = [(t.topic, p, group_error) for t in (wanted or []) for p in
                       [group_pb2.OffsetFetchPartition(partition=i, committed_offset=-1, committed_leader_epoch=-1) for i in t.partitions]]
        else:
            entries = [(t.topic, p, kafka_code(p.error_code)) for t in answer.topics for p in t.partitions]
        by_topic = group_by_topic((topic, build(
            partition_type, partition_index=p.partition, committed_offset=p.committed_offset,
            committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata, error_code=code)) for topic, p, code in entries)
        return group_error, tuple(build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items())

    async def consumer_group_heartbeat(self, request, peer: PeerContext):
        """KIP-848's heartbeat. Null fields mean "unchanged", as kraftlog's ``*_changed`` flags do."""
        out = response_type(request)
        if self.classic.has_members(request.group_id):
            return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.inconsistent_group_protocol,
                         error_message=f"group {request.group_id} is a classic-protocol group with members: use another "
                         "group id, or let its members leave first", member_id=None, member_epoch=-1,
                         heartbeat_interval=datetime.timedelta(0), assignment=None)
        image = self.image()
        names = {} if image is None else {t.topic_id: name for name, t in image.topics.items()}
        owned = request.topic_partitions
        regex = getattr(request, "subscribed_topic_regex", None)
        heartbeat = group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
            instance_id=request.instance_id or "", rack_id=request.rack_id or "",
            rebalance_timeout_ms=max(millis(request.rebalance_timeout), 0),
            subscription_changed=request.subscribed_topic_names is not None or regex is not None,
            subscribed_topic_names=list(request.subscribed_topic_names or ()), subscribed_topic_regex=regex or "",
            server_assignor=request.server_assignor or "", owned_changed=owned is not None, client_id=current_identity().client_id,
            owned_partitions=[group_pb2.TopicPartitions(topic=names[str(t.topic_id)], partitions=list(t.partitions))
                              for t in owned or () if str(t.topic_id) in names])
        answer = await self.service.ConsumerGroupHeartbeat(heartbeat, peer)
        assignment = None
        if answer.has_assignment and image is not None:
            entry = sibling(out, "TopicPartitions")
            assignment = build(sibling(out, "Assignment"), topic_partitions=tuple(
                build(entry, topic_id=uuid.UUID(image.topics[t.topic].topic_id), partitions=tuple(t.partitions))
                for t in answer.assignment if t.topic in image.topics))
        return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code),
                     error_message=answer.error_message or None, member_id=answer.member_id or None,
                     member_epoch=answer.member_epoch, heartbeat_interval=datetime.timedelta(milliseconds=answer.heartbeat_interval_ms),
                     assignment=assignment)

    async def describe_groups(self, request):
        """Both kinds: a classic group with its members' subscriptions and assignments (the
        client's own bytes), a KIP-848 group with its members (protocol type "consumer", as
        Kafka describes one to a classic admin call)."""
        out = response_type(request)
        group_type, member_type = sibling(out, "DescribedGroup"), sibling(out, "DescribedGroupMember")
        groups = []
        for group_id in request.groups:
            fields = dict(group_id=group_id, error_code=KafkaError.none, group_state="Dead", protocol_type="",
                          protocol_data="", members=(), authorized_operations=NO_AUTHORIZED_OPERATIONS)
            classic = self.classic.groups.get(group_id)
            if not self.service.access.allows("describe", "group", group_id):
                fields["error_code"] = KafkaError.group_authorization_failed
            elif classic is not None:
                fields.update(group_state=classic.state.value, protocol_type=classic.protocol_type,
                              protocol_data=classic.protocol or "", members=tuple(
                                  build(member_type, member_id=m.member_id, group_instance_id=m.instance_id,
                                        client_id=m.client_id, client_host=m.client_host,
                                        member_metadata=dict(m.protocols).get(classic.protocol or "", b""),
                                        member_assignment=m.assignment) for m in classic.members.values()))
            else:
                [found] = (await self.service.DescribeGroups(group_pb2.DescribeGroupsRequest(group_ids=[group_id]), None)).groups
                if found.error_code and found.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
                    fields["error_code"] = kafka_code(found.error_code)
                elif not found.error_code:
                    fields.update(group_state=found.state.capitalize(), protocol_type=CONSUMER_PROTOCOL,
                                  protocol_data=found.assignor, members=tuple(
                                      build(member_type, member_id=m.member_id, group_instance_id=m.instance_id or None,
                                            client_id=m.client_id, client_host=m.client_host, member_metadata=b"",
                                            member_assignment=b"") for m in found.members))
            groups.append(build(group_type, **fields))
        return build(out, throttle_time=NO_THROTTLE, groups=tuple(groups))

    async def list_groups(self, request):
        out = response_type(request)
        listed = await self.service.ListGroups(group_pb2.ListGroupsRequest(), None)
        if listed.error_code:
            return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(listed.error_code), groups=())
        states = {g.group_id: (CONSUMER_PROTOCOL, g.state.capitalize()) for g in listed.groups}
        states.update({g.group_id: (g.protocol_type, g.state.value) for g in self.classic.groups.values() if g.members})
        wanted = {s.lower() for s in getattr(request, "states_filter", ())}
        entry = sibling(out, "ListedGroup")
        return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.none, groups=tuple(
            build(entry, group_id=g, protocol_type=kind, group_state=state)
            for g, (kind, state) in sorted(states.items()) if not wanted or state.lower() in wanted))

    async def delete_groups(self, request):
        out = response_type(request)
        results = []
        for group_id in request.groups_names:
            if not self.service.access.allows("delete", "group", group_id):
                code = KafkaError.group_authorization_failed
            elif self.classic.has_members(group_id):
                code = KafkaError.non_empty_group
            else:
                [result] = (await self.service.DeleteGroups(group_pb2.DeleteGroupsRequest(group_ids=[group_id]), None)).results
                code = kafka_code(result.error_code)
            results.append(build(sibling(out, "DeletableGroupResult"), group_id=group_id, error_code=code))
        return build(out, throttle_time=NO_THROTTLE, results=tuple(results))

    async def offset_delete(self, request):
        out = response_type(request)
        answer = await self.service.OffsetDelete(group_pb2.OffsetDeleteRequest(group_id=request.group_id, topics=[
            group_pb2.TopicPartitions(topic=t.name, partitions=[p.partition_index for p in t.partitions])
            for t in request.topics]), None)
        codes = {(t.topic, p.partition): p.error_code for t in answer.topics for p in t.partitions}
        partition_type, topic_type = sibling(out, "OffsetDeleteResponsePartition"), sibling(out, "OffsetDeleteResponseTopic")
        by_topic = group_by_topic((t.name, build(partition_type, partition_index=p.partition_index,
                                                 error_code=kafka_code(codes.get((t.name, p.partition_index), 0))))
                                  for t in request.topics for p in t.partitions)
        return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(answer.error_code), topics=tuple(
            build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))


def commit_topics(topics) -> list[group_pb2.OffsetCommitTopic]:
    """An OffsetCommit's or TxnOffsetCommit's topics as the coordinator's."""
    return [group_pb2.OffsetCommitTopic(topic=t.name, partitions=[
        group_pb2.OffsetCommitPartition(partition=p.partition_index, committed_offset=p.committed_offset,
                                        committed_leader_epoch=getattr(p, "committed_leader_epoch", -1), metadata=p.committed_metadata or "")
        for p in t.partitions]) for t in topics]


def commit_response(request, answer, refusal: KafkaError | None, partition_name: str, topic_name: str):
    """Each partition of ``request`` answered: the classic ``refusal``, else the coordinator's
    request-level error, else its own."""
    codes = {(t.topic, p.partition): p.error_code for t in answer.topics for p in t.partitions}
    out = response_type(request)
    partition_type, topic_type = sibling(out, partition_name), sibling(out, topic_name)
    by_topic = group_by_topic((t.name, build(
        partition_type, partition_index=p.partition_index,
        error_code=refusal or kafka_code(answer.error_code or codes.get((t.name, p.partition_index), 0))))
        for t in request.topics for p in t.partitions)
    return build(out, throttle_time=NO_THROTTLE, topics=tuple(
        build(topic_type, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))
