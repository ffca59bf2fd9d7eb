"""The controller's gRPC service (grpc.aio): a thin shell over the pure decisions.

Writes go through the active controller (others answer NOT_CONTROLLER with a hint naming the
active one); reads and the metadata stream are served by any controller from its local image.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Callable, TypeVar

import grpc
import structlog

from metadata_quorum import broker_decisions, client_quotas, reassignment, topic_admin
from metadata_quorum.active_controller import ActiveController, WriteOutcome, monotonic_ms
from metadata_quorum.broker_capacity import replica_counts
from metadata_quorum.controller_router import CATCHING_UP_METADATA_KEY
from metadata_quorum.controller_directory import request_problem
from metadata_quorum.decision import Decision
from metadata_quorum.endpoints import Voter
from metadata_quorum.image import MetadataImage, image_to_records
from metadata_quorum.membership import CATCH_UP_TIMEOUT_S, ChangeOutcome, QuorumMembership
from metadata_quorum.raft_node import ControllerRaftNode
from metadata_quorum.records import Record, to_proto
from server_common.authorization import AccessControl
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc
from server_common.errors import ErrorCode

R = TypeVar("R")

STREAM_BATCH_RECORDS_MAX = 5000
STREAM_IDLE_CHECK_S = 1.0
SESSION_LEADERSHIP_CHECK_S = 0.2


def new_topic_id() -> str:
    return str(uuid.uuid4())


async def readable_image(node: ControllerRaftNode, context) -> MetadataImage:
    """The image a read is answered from, once ``node`` has caught up with the metadata log
    since it started. Before that it may hold only part of what was committed (after every
    controller restarted from a power failure, nothing at all), and its answer would say that
    committed topics, brokers or users do not exist; the read is refused as UNAVAILABLE, which
    clients answer by asking another controller."""
    if not node.caught_up:
        context.set_trailing_metadata(((CATCHING_UP_METADATA_KEY, "1"),))
        await context.abort(grpc.StatusCode.UNAVAILABLE, node.catching_up_message())
    return node.image


class ControllerService(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, controller: ActiveController, access: AccessControl | None = None) -> None:
        self.controller = controller
        self.access = access or AccessControl(dict, (), enabled=False)
        self.node: ControllerRaftNode = controller.node
        self.membership = QuorumMembership(controller)
        self._log = structlog.get_logger("controller").bind(controller_id=self.node.voter.node_id)
        self._background: set[asyncio.Task] = set()

    async def _write(self, decide: Callable[[MetadataImage], Decision[R]], response_type: type) -> tuple[R, WriteOutcome[R]]:
        """Run a write; returns the response (error and hint filled in) and the raw outcome."""
        outcome = await self.controller.write(decide)
        if outcome.error_code != ErrorCode.NONE or outcome.decision is None:
            response = response_type(error_code=outcome.error_code, error_message=outcome.error_message)
        else:
            response = outcome.decision.response
        response.active_controller.CopyFrom(self.controller.hint())
        return response, outcome

    # ---- broker lifecycle

    async def RegisterBroker(self, request: pb.RegisterBrokerRequest, context) -> pb.RegisterBrokerResponse:
        if (refused := self.access.refused_response(pb.RegisterBrokerResponse, "cluster_action", "cluster")) is not None:
            return refused
        response, outcome = await self._write(
            lambda image: broker_decisions.register_broker(image, request, self.controller.heartbeats, monotonic_ms()), pb.RegisterBrokerResponse
        )
        if response.error_code == ErrorCode.NONE and outcome.decision is not None and outcome.decision.records:
            # the RegisterBrokerRecord is the entry's last record: its offset is the new epoch
            response.broker_epoch = outcome.first_offset + len(outcome.decision.records) - 1
        if response.error_code == ErrorCode.NONE:
            self._log.info("broker registered", broker_id=request.broker_id, broker_epoch=response.broker_epoch, incarnation_id=request.incarnation_id)
        return response

    async def BrokerHeartbeat(self, request: pb.BrokerHeartbeatRequest, context) -> pb.BrokerHeartbeatResponse:
        if (refused := self.access.refused_response(pb.BrokerHeartbeatResponse, "cluster_action", "cluster")) is not None:
            return refused
        self.controller.note_heartbeat(request.broker_id, request.broker_epoch)
        response, _ = await self._write(
            lambda image: broker_decisions.broker_heartbeat(image, request, self.controller.heartbeats, monotonic_ms()), pb.BrokerHeartbeatResponse
        )
        if response.error_code not in (ErrorCode.NONE, ErrorCode.NOT_CONTROLLER):
            response.is_fenced = True
        return response

    async def AlterPartition(self, request: pb.AlterPartitionRequest, context) -> pb.AlterPartitionResponse:
        if (refused := self.access.refused_response(pb.AlterPartitionResponse, "cluster_action", "cluster")) is not None:
            return refused
        response, _ = await self._write(lambda image: broker_decisions.alter_partition(image, request), pb.AlterPartitionResponse)
        return response

    async def AllocateProducerIds(self, request: pb.AllocateProducerIdsRequest, context) -> pb.AllocateProducerIdsResponse:
        if (refused := self.access.refused_response(pb.AllocateProducerIdsResponse, "cluster_action", "cluster")) is not None:
            return refused
        response, _ = await self._write(lambda image: broker_decisions.allocate_producer_ids(image, request), pb.AllocateProducerIdsResponse)
        return response

    # ---- metadata stream

    async def BrokerSession(self, request: pb.BrokerSessionRequest, context):
        """Held open by every live broker. If it ends because the broker's connection closed
        (the process died) the broker is fenced at once; a controller that stops being active
        ends its sessions so brokers reopen them with the new one."""
        await self.access.abort_if_refused(context, "cluster_action", "cluster")
        if not self.controller.is_active:
            yield pb.BrokerSessionEvent(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=self.controller.not_controller_message(), active_controller=self.controller.hint()
            )
            return
        yield pb.BrokerSessionEvent()
        try:
            while self.controller.is_active:
                await asyncio.sleep(SESSION_LEADERSHIP_CHECK_S)
        except asyncio.CancelledError:
            if self.controller.is_active:
                task = asyncio.get_running_loop().create_task(self._fence_disconnected(request.broker_id, request.broker_epoch))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            raise

    async def _fence_disconnected(self, broker_id: int, broker_epoch: int) -> None:
        outcome = await self.controller.write(lambda image: broker_decisions.disconnected_broker_fencing(image, broker_id, broker_epoch))
        if outcome.error_code != ErrorCode.NONE:
            self._log.warning("could not fence a disconnected broker; its session timeout will", broker_id=broker_id, error=outcome.error_message)
        elif outcome.decision is not None and outcome.decision.response:  # committed: a failover's timeline reads this line
            self._log.info("broker fenced", broker_id=broker_id, broker_epoch=broker_epoch, metadata_offset=outcome.first_offset)

    async def StreamMetadata(self, request: pb.StreamMetadataRequest, context):
        """A snapshot first when the broker starts from nothing (``from_offset`` ≤ 1) or the ring
        no longer reaches ``from_offset``, then deltas as they apply.

        A starting broker gets the current image, never the log from its beginning: replayed
        one entry at a time, history looks like orders (lead partition P in an epoch long
        over, drop the replica of a topic deleted and later recreated under the same name)
        and a restarting broker acting on them would damage its logs."""
        await self.access.abort_if_refused(context, "cluster_action", "cluster")
        await readable_image(self.node, context)  # a broker must not take a partial image for the cluster's
        next_offset = max(request.from_offset, 1)
        first_contact = request.from_offset <= 1
        me = self.node.voter.node_id
        while True:
            wake = self.node.applied_event
            image, recent = self.node.read_since(next_offset)
            if first_contact or recent is None:
                first_contact = False
                records = image_to_records(image)
                yield pb.MetadataBatch(snapshot=True, base_offset=image.offset, last_offset=image.offset, records=[to_proto(r) for r in records], cluster_id=image.cluster_id, controller_id=me)
                next_offset = image.offset + 1
                continue
            for start in range(0, len(recent), STREAM_BATCH_RECORDS_MAX):
                chunk: list[tuple[int, Record]] = recent[start : start + STREAM_BATCH_RECORDS_MAX]
                yield pb.MetadataBatch(
                    base_offset=chunk[0][0], last_offset=chunk[-1][0], records=[to_proto(r) for _, r in chunk], cluster_id=image.cluster_id, controller_id=me
                )
                next_offset = chunk[-1][0] + 1
            if not recent:
                try:
                    await asyncio.wait_for(wake.wait(), STREAM_IDLE_CHECK_S)
                except asyncio.TimeoutError:
                    if self.node.leader_id() < 0:  # cut off from the quorum: what we hold may be stale
                        await context.abort(
                            grpc.StatusCode.UNAVAILABLE,
                            f"controller {me} has lost contact with the Raft leader; stream metadata from another controller",
                        )
                    if self.node.removed:  # it no longer receives the log
                        await context.abort(grpc.StatusCode.UNAVAILABLE, self.node.catching_up_message())

    # ---- admin writes

    async def CreateTopics(self, request: pb.CreateTopicsRequest, context) -> pb.CreateTopicsResponse:
        if (refused := self.access.refused_response(pb.CreateTopicsResponse, "create", "topic", (t.name for t in request.topics))) is not None:
            return refused
        response, _ = await self._write(lambda image: topic_admin.create_topics(image, request, new_topic_id), pb.CreateTopicsResponse)
        self._log_results("create topic", response)
        return response

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest, context) -> pb.DeleteTopicsResponse:
        if (refused := self.access.refused_response(pb.DeleteTopicsResponse, "delete", "topic", request.names)) is not None:
            return refused
        response, _ = await self._write(lambda image: topic_admin.delete_topics(image, request), pb.DeleteTopicsResponse)
        self._log_results("delete topic", response)
        return response

    async def CreatePartitions(self, request: pb.CreatePartitionsRequest, context) -> pb.CreatePartitionsResponse:
        if (refused := self.access.refused_response(pb.CreatePartitionsResponse, "alter", "topic", (t.name for t in request.topics))) is not None:
            return refused
        response, _ = await self._write(lambda image: topic_admin.create_partitions(image, request), pb.CreatePartitionsResponse)
        self._log_results("create partitions", response)
        return response

    async def AlterConfigs(self, request: pb.AlterConfigsRequest, context) -> pb.AlterConfigsResponse:
        if (refused := self.access.refused_response(pb.AlterConfigsResponse, "alter_configs", "topic", (t.name for t in request.topics))) is not None:
            return refused
        response, _ = await self._write(lambda image: topic_admin.alter_configs(image, request), pb.AlterConfigsResponse)
        self._log_results("alter configs", response)
        return response

    async def ElectLeaders(self, request: pb.ElectLeadersRequest, context) -> pb.ElectLeadersResponse:
        if (refused := self.access.refused_response(pb.ElectLeadersResponse, "alter", "cluster")) is not None:
            return refused
        response, _ = await self._write(lambda image: topic_admin.elect_leaders(image, request), pb.ElectLeadersResponse)
        return response

    async def AlterPartitionReassignments(self, request: pb.AlterPartitionReassignmentsRequest, context) -> pb.AlterPartitionReassignmentsResponse:
        if (refused := self.access.refused_response(pb.AlterPartitionReassignmentsResponse, "alter", "cluster")) is not None:
            return refused
        response, _ = await self._write(lambda image: reassignment.alter_partition_reassignments(image, request), pb.AlterPartitionReassignmentsResponse)
        return response

    async def AlterClientQuotas(self, request: pb.AlterClientQuotasRequest, context) -> pb.AlterClientQuotasResponse:
        if (refused := self.access.refused_response(pb.AlterClientQuotasResponse, "alter_configs", "cluster")) is not None:
            return refused
        response, _ = await self._write(lambda image: client_quotas.alter_client_quotas(image, request), pb.AlterClientQuotasResponse)
        if response.error_code == ErrorCode.NONE and not request.validate_only and all(r.error_code == ErrorCode.NONE for r in response.entries):
            for entry in request.entries:
                self._log.info("client quotas altered", entity=client_quotas.describe_entity(client_quotas.entity_of(entry.entity)),
                               changes={op.key: None if op.remove else op.value for op in entry.ops})
        return response

    def _log_results(self, action: str, response) -> None:
        if response.error_code != ErrorCode.NONE:
            return
        for result in response.topics:
            if result.error_code == ErrorCode.NONE:
                self._log.info(action, topic=result.name, topic_id=result.topic_id)

    # ---- reads (any controller, local image)

    async def DescribeConfigs(self, request: pb.DescribeConfigsRequest, context) -> pb.DescribeConfigsResponse:
        await self.access.abort_if_refused(context, "describe_configs", "topic", request.topics)
        return topic_admin.describe_configs(await readable_image(self.node, context), request,
                                            lambda name: self.access.allows("describe_configs", "topic", name))

    async def DescribeClientQuotas(self, request: pb.DescribeClientQuotasRequest, context) -> pb.DescribeClientQuotasResponse:
        await self.access.abort_if_refused(context, "describe_configs", "cluster")
        return client_quotas.describe_client_quotas(await readable_image(self.node, context), request)

    async def ListPartitionReassignments(self, request: pb.ListPartitionReassignmentsRequest, context) -> pb.ListPartitionReassignmentsResponse:
        await self.access.abort_if_refused(context, "describe", "cluster")
        return reassignment.list_partition_reassignments(await readable_image(self.node, context), request)

    async def DescribeCluster(self, request: pb.DescribeClusterRequest, context) -> pb.DescribeClusterResponse:
        image = await readable_image(self.node, context)
        held = replica_counts(image)
        return pb.DescribeClusterResponse(
            cluster_id=image.cluster_id,
            brokers=[
                pb.BrokerRegistration(
                    endpoint=common.BrokerEndpoint(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack, fenced=b.fenced),
                    broker_epoch=b.epoch,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                    max_replicas=b.max_replicas,
                    replicas=held[b.broker_id],
                )
                for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            ],
            active_controller=self.controller.hint(),
            controllers=[common.BrokerEndpoint(broker_id=v.node_id, host=v.host, port=v.grpc_port) for v in self.node.voters],
            metadata_offset=image.offset,
            answering_controller_id=self.node.voter.node_id,
            topics=topic_admin.describe_topics(image, lambda name: self.access.allows("describe", "topic", name)),
        )

    async def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context) -> pb.DescribeQuorumResponse:
        status = self.node.status()
        me = self.node.voter
        leader_id = self.node.leader_id()
        members = []
        directory = self.node.directory
        for v in directory.members:
            member = pb.QuorumMember(controller_id=v.node_id, raft_address=v.raft_address, grpc_address=v.grpc_address, state="unknown", match_index=-1, lag=-1,
                                     role=directory.role_of(v.node_id))
            if v.node_id == me.node_id:
                member.state = "observer" if self.node.observer else self.node.raft_state(status)
                member.raft_term = status["raft_term"]
                member.commit_index = status["commit_idx"]
                member.last_applied = status["last_applied"]
                member.connected = True
                member.caught_up = status["caught_up"]
                member.active = self.controller.is_active
            else:
                member.state = "leader" if v.node_id == leader_id else "follower"
                member.connected = status.get(f"partner_node_status_server_{v.raft_address}") == 2
                match = status.get(f"match_idx_server_{v.raft_address}")
                if match is not None and leader_id == me.node_id:
                    member.match_index = match
                    member.lag = max(0, status["commit_idx"] - match)
            members.append(member)
        return pb.DescribeQuorumResponse(leader_id=leader_id, answering_controller_id=me.node_id, members=members, metadata_offset=self.node.image.offset)

    async def AddController(self, request: pb.AddControllerRequest, context) -> pb.QuorumChangeResponse:
        if (refused := self.access.refused_response(pb.QuorumChangeResponse, "alter", "cluster")) is not None:
            return refused
        new = Voter(request.controller_id, request.host, request.raft_port, request.grpc_port)
        if (problem := request_problem(new, request.catch_up_timeout_ms)) is not None:
            return self._quorum_change("add controller", ChangeOutcome(ErrorCode.INVALID_REQUEST, problem))
        outcome = await self.membership.add(new, request.catch_up_timeout_ms / 1000 or CATCH_UP_TIMEOUT_S)
        return self._quorum_change("add controller", outcome)

    async def RemoveController(self, request: pb.RemoveControllerRequest, context) -> pb.QuorumChangeResponse:
        if (refused := self.access.refused_response(pb.QuorumChangeResponse, "alter", "cluster")) is not None:
            return refused
        return self._quorum_change("remove controller", await self.membership.remove(request.controller_id))

    def _quorum_change(self, action: str, outcome: ChangeOutcome) -> pb.QuorumChangeResponse:
        directory = self.node.directory
        response = pb.QuorumChangeResponse(error_code=outcome.error_code, error_message=outcome.error_message,
                                           voters=[_member(v, "voter") for v in directory.voters],
                                           observers=[_member(v, "observer") for v in directory.observers])
        response.active_controller.CopyFrom(self.controller.hint())
        if outcome.error_code != ErrorCode.NONE:
            self._log.warning(f"{action} failed", error=outcome.error_message)
        return response


def _member(v: Voter, role: str) -> pb.QuorumMember:
    return pb.QuorumMember(controller_id=v.node_id, raft_address=v.raft_address, grpc_address=v.grpc_address, role=role)
