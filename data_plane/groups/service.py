"""The ``kraftlog.v1.GroupCoordinator`` gRPC service: protobuf in and out, `GroupCoordinator`
calls in between. Every refusal is an ErrorCode with a message saying what to do next."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import grpc

from data_plane.control_batch import PRODUCER_EPOCH_MAX
from data_plane.groups import membership, offsets
from data_plane.groups.classic import CLASSIC, CONSUMER, ClassicGroup, assigned_partitions
from data_plane.groups.coordinator import GroupCoordinator, TxnProducer
from data_plane.groups.membership import Refused
from data_plane.coordination import describe_each
from data_plane.coordination.internal_topic import InternalTopic
from data_plane.groups.state import Group, Partitions, partitions_by_topic
from server_common.errors import ErrorCode
from kraftlog_proto import group_pb2, group_pb2_grpc
from server_common.authorization import AccessControl
from server_common.principal import current_identity


class GroupCoordinatorService(group_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, coordinator: GroupCoordinator, offsets_topic: InternalTopic, access: AccessControl | None = None,
                 transaction_topic: InternalTopic | None = None) -> None:
        self.coordinator = coordinator
        self.access = access or AccessControl(dict, (), enabled=False)
        self.offsets_topic = offsets_topic
        self.transaction_topic = transaction_topic  # answers key_type TRANSACTION (`__transaction_state`)
        # The classic-protocol groups the Kafka listener keeps on this broker (data_plane/kafka/
        # classic_groups.py sets it), so that ListGroups and DescribeGroups show both kinds.
        self.classic_groups: Mapping[str, ClassicGroup] = {}

    async def FindCoordinator(self, request: group_pb2.FindCoordinatorRequest, context) -> group_pb2.FindCoordinatorResponse:
        if request.key_type == group_pb2.GROUP:
            return group_pb2.FindCoordinatorResponse(coordinators=self.offsets_topic.find(list(request.keys)))
        if request.key_type == group_pb2.TRANSACTION and self.transaction_topic is not None:
            return group_pb2.FindCoordinatorResponse(coordinators=self.transaction_topic.find(list(request.keys)))
        return group_pb2.FindCoordinatorResponse(coordinators=[
            group_pb2.Coordinator(key=k, node_id=-1, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"key_type {request.key_type} is not served by this broker: use GROUP or TRANSACTION")
            for k in request.keys])

    async def ConsumerGroupHeartbeat(self, request: group_pb2.ConsumerGroupHeartbeatRequest, context) -> group_pb2.ConsumerGroupHeartbeatResponse:
        if (refused := self.access.refused_group_response(group_pb2.ConsumerGroupHeartbeatResponse, "read", request.group_id)) is not None:
            return refused
        member_id = request.member_id or (str(uuid.uuid4()) if request.member_epoch == 0 else "")
        heartbeat = membership.Heartbeat(
            group_id=request.group_id, member_id=member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
            rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscription_changed=request.subscription_changed or request.member_epoch == 0,
            topic_names=tuple(request.subscribed_topic_names), topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor, owned=_partitions(request.owned_partitions) if request.owned_changed else None,
            client_id=request.client_id, client_host=_peer_host(context), principal=current_identity().principal,
        )
        try:
            answer = await self.coordinator.heartbeat(heartbeat)
        except Refused as refusal:
            answer = membership.HeartbeatAnswer(refusal.code, refusal.message, member_id, request.member_epoch)
        response = group_pb2.ConsumerGroupHeartbeatResponse(
            error_code=answer.error, error_message=answer.message, member_id=answer.member_id, member_epoch=answer.member_epoch,
            heartbeat_interval_ms=self.coordinator.settings.heartbeat_interval_ms)
        if answer.error == ErrorCode.NONE and answer.assignment is not None:
            response.has_assignment = True
            response.assignment.extend(_topic_partitions(answer.assignment))
        return response

    async def OffsetCommit(self, request: group_pb2.OffsetCommitRequest, context) -> group_pb2.OffsetCommitResponse:
        if (refused := self.access.refused_group_response(group_pb2.OffsetCommitResponse, "read", request.group_id, "read", (t.topic for t in request.topics))) is not None:
            return refused
        try:
            errors = await self.coordinator.commit(request.group_id, request.member_id, request.member_epoch, _to_commit(request.topics))
        except Refused as refusal:
            return group_pb2.OffsetCommitResponse(error_code=refusal.code, error_message=refusal.message)
        return group_pb2.OffsetCommitResponse(topics=_results(errors))

    async def TxnOffsetCommit(self, request: group_pb2.TxnOffsetCommitRequest, context) -> group_pb2.TxnOffsetCommitResponse:
        """KIP-447: Kafka's ACLs (WRITE on the transactional id, READ on the group and topics)."""
        refused = (self.access.refused_response(group_pb2.TxnOffsetCommitResponse, "write", "transactional_id", (request.transactional_id,))
                   or self.access.refused_group_response(group_pb2.TxnOffsetCommitResponse, "read", request.group_id, "read",
                                                         (t.topic for t in request.topics)))
        if refused is not None:
            return refused
        if request.producer_id < 0 or not 0 <= request.producer_epoch <= PRODUCER_EPOCH_MAX or not request.transactional_id:
            return group_pb2.TxnOffsetCommitResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message=f"producer id {request.producer_id}, epoch "
                f"{request.producer_epoch}, transactional id '{request.transactional_id}': send the transactional id and the "
                "producer id and epoch InitProducerId gave it")
        try:
            errors = await self.coordinator.txn_commit(request.group_id, TxnProducer(request.producer_id, request.producer_epoch,
                                                                                     request.transactional_id),
                                                       request.member_id, request.member_epoch, _to_commit(request.topics))
        except Refused as refusal:
            return group_pb2.TxnOffsetCommitResponse(error_code=refusal.code, error_message=refusal.message)
        return group_pb2.TxnOffsetCommitResponse(topics=_results(errors))

    async def OffsetFetch(self, request: group_pb2.OffsetFetchRequest, context) -> group_pb2.OffsetFetchResponse:
        if (refused := self.access.refused_group_response(group_pb2.OffsetFetchResponse, "describe", request.group_id, "describe", (t.topic for t in request.topics))) is not None:
            return refused
        try:
            group = self.coordinator.group(request.group_id)
            unstable = self.coordinator.unstable(request.group_id) if request.require_stable else set()
        except Refused as refusal:
            return group_pb2.OffsetFetchResponse(error_code=refusal.code, error_message=refusal.message)
        wanted = [(t.topic, p) for t in request.topics for p in t.partitions] if request.topics else None
        response = group_pb2.OffsetFetchResponse()
        topics: dict[str, group_pb2.OffsetFetchTopic] = {}
        for (topic, partition), committed in offsets.fetch(group, wanted, unstable).items():
            if wanted is None and not self.access.allows("describe", "topic", topic):
                continue  # no topics named means "every topic I may DESCRIBE", never every topic
            out = topics.get(topic) or topics.setdefault(topic, response.topics.add(topic=topic))
            if (topic, partition) in unstable:
                out.partitions.add(partition=partition, committed_offset=-1, committed_leader_epoch=-1,
                                   error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT, error_message=(
                                       f"group {request.group_id}'s offset of {topic}-{partition} is in an open transaction: "
                                       "retry after the transaction completes"))
            elif committed is None:
                out.partitions.add(partition=partition, committed_offset=-1, committed_leader_epoch=-1)
            else:
                out.partitions.add(partition=partition, committed_offset=committed.offset,
                                   committed_leader_epoch=committed.leader_epoch, metadata=committed.metadata)
        return response

    async def ListGroups(self, request: group_pb2.ListGroupsRequest, context) -> group_pb2.ListGroupsResponse:
        if (refused := self.access.refused_response(group_pb2.ListGroupsResponse, "describe", "cluster")) is not None:
            return refused
        wanted = set(request.states_filter)
        response = group_pb2.ListGroupsResponse()
        for group in sorted(self.coordinator.loaded_groups(), key=lambda g: g.group_id):
            state = group.state()
            if not wanted or state in wanted:
                response.groups.add(group_id=group.group_id, state=state, coordinator_id=self.coordinator.broker_id,
                                    member_count=len(group.members), protocol=CONSUMER)
        for classic in sorted(self.classic_groups.values(), key=lambda g: g.group_id):
            if classic.members and (not wanted or classic.state.value.lower() in {w.lower() for w in wanted}):
                response.groups.add(group_id=classic.group_id, state=classic.state.value, coordinator_id=self.coordinator.broker_id,
                                    member_count=len(classic.members), protocol=CLASSIC)
        return response

    async def DescribeGroups(self, request: group_pb2.DescribeGroupsRequest, context) -> group_pb2.DescribeGroupsResponse:
        await self.access.abort_if_refused(context, "describe", "group", request.group_ids)

        def look_up(group_id: str) -> Group | ClassicGroup | None:
            classic = self.classic_groups.get(group_id)
            return classic if classic is not None and classic.members else self.coordinator.group(group_id)

        return group_pb2.DescribeGroupsResponse(groups=describe_each(
            request.group_ids, look_up, self._described_entry,
            lambda group_id, code, message: group_pb2.DescribedGroup(group_id=group_id, error_code=code, error_message=message),
            lambda group_id: group_pb2.DescribedGroup(group_id=group_id, state="dead", error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                                      error_message=f"group {group_id} does not exist: check the name (kraftlog groups list)")))

    def _described_entry(self, group_id: str, group: Group | ClassicGroup) -> group_pb2.DescribedGroup:
        if isinstance(group, ClassicGroup):
            return _described_classic(group, self.coordinator.broker_id)
        if self._assigns_hidden_topics(group):  # as Kafka's ConsumerGroupDescribe: all of the group or nothing, and no topic named
            return group_pb2.DescribedGroup(group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=(
                f"{current_identity().principal} may DESCRIBE group {group_id} but not every topic assigned in it: an "
                "administrator can allow DESCRIBE on those topics (kraftlog acls create --operation describe --topic ...)"))
        return _described(group, self.coordinator.broker_id)

    def _assigns_hidden_topics(self, group: Group) -> bool:
        """Whether a member owns or is to get a topic the caller may not DESCRIBE: describing
        the group would show that topic's name and partitions."""
        assigned = {t for m in group.members for t, _ in group.current[m].owned | group.targets.get(m, frozenset())}
        return any(not self.access.allows("describe", "topic", t) for t in assigned)

    async def DeleteGroups(self, request: group_pb2.DeleteGroupsRequest, context) -> group_pb2.DeleteGroupsResponse:
        await self.access.abort_if_refused(context, "delete", "group", request.group_ids)
        response = group_pb2.DeleteGroupsResponse()
        for group_id in request.group_ids:
            try:
                await self.coordinator.delete_group(group_id)
                response.results.add(group_id=group_id)
            except Refused as refusal:
                response.results.add(group_id=group_id, error_code=refusal.code, error_message=refusal.message)
        return response

    async def OffsetDelete(self, request: group_pb2.OffsetDeleteRequest, context) -> group_pb2.OffsetDeleteResponse:
        if (refused := self.access.refused_group_response(group_pb2.OffsetDeleteResponse, "delete", request.group_id, "read", (t.topic for t in request.topics))) is not None:
            return refused
        partitions = [(t.topic, p) for t in request.topics for p in t.partitions]
        try:
            errors = await self.coordinator.delete_offsets(request.group_id, partitions)
        except Refused as refusal:
            return group_pb2.OffsetDeleteResponse(error_code=refusal.code, error_message=refusal.message)
        return group_pb2.OffsetDeleteResponse(topics=_results(errors))


def _described(group: Group, coordinator_id: int) -> group_pb2.DescribedGroup:
    described = group_pb2.DescribedGroup(
        group_id=group.group_id, state=group.state(), group_epoch=group.epoch, assignment_epoch=group.target_epoch,
        assignor=group.metadata.assignor, coordinator_id=coordinator_id, protocol=CONSUMER)
    for member_id in sorted(group.members):
        sub, current = group.members[member_id], group.current[member_id]
        described.members.add(
            member_id=member_id, instance_id=sub.instance_id, client_id=sub.client_id, client_host=sub.client_host,
            member_epoch=current.member_epoch, subscribed_topic_names=list(sub.topic_names), subscribed_topic_regex=sub.topic_regex,
            assignment=_topic_partitions(current.owned), target_assignment=_topic_partitions(group.targets.get(member_id, frozenset())))
    return described


def _described_classic(group: ClassicGroup, coordinator_id: int) -> group_pb2.DescribedGroup:
    """A classic-protocol group (the Kafka listener's JoinGroup/SyncGroup members) as the
    gRPC contract describes groups: its generation as the epoch, the leader's chosen protocol
    as the assignor, each member's assignment read from its consumer protocol bytes."""
    described = group_pb2.DescribedGroup(
        group_id=group.group_id, state=group.state.value, group_epoch=group.generation, assignment_epoch=group.generation,
        assignor=group.protocol or "", coordinator_id=coordinator_id, protocol=CLASSIC)
    for member_id in sorted(group.members):
        m = group.members[member_id]
        described.members.add(
            member_id=member_id, instance_id=m.instance_id or "", client_id=m.client_id, client_host=m.client_host,
            member_epoch=group.generation, assignment=[group_pb2.TopicPartitions(topic=topic, partitions=partitions)
                                                       for topic, partitions in sorted(assigned_partitions(m.assignment).items())])
    return described


def _to_commit(topics) -> list[offsets.OffsetToCommit]:
    return [offsets.OffsetToCommit(t.topic, p.partition, p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in topics for p in t.partitions]


def _results(errors: offsets.PartitionErrors) -> list[group_pb2.OffsetCommitTopicResult]:
    topics: dict[str, group_pb2.OffsetCommitTopicResult] = {}
    for (topic, partition), (code, message) in errors.items():
        out = topics.setdefault(topic, group_pb2.OffsetCommitTopicResult(topic=topic))
        out.partitions.add(partition=partition, error_code=code, error_message=message)
    return list(topics.values())


def _partitions(topics) -> Partitions:
    return frozenset((t.topic, p) for t in topics for p in t.partitions)


def _topic_partitions(partitions: Partitions) -> list[group_pb2.TopicPartitions]:
    return [group_pb2.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions_by_topic(partitions)]


def _peer_host(context: grpc.aio.ServicerContext) -> str:
    """The client's address as gRPC reports it (``ipv4:127.0.0.1:53211`` → ``127.0.0.1``)."""
    peer = context.peer() or ""
    kind, _, address = peer.partition(":")
    if kind == "ipv6":
        return address.rsplit(":", 1)[0].strip("[]").replace("%5B", "").replace("%5D", "")
    return address.rsplit(":", 1)[0] if address else peer
