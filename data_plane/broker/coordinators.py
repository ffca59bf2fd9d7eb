"""How a broker hosts its two coordinators: each one's settings from the broker's options, its
internal topic's finder (FindCoordinator), its gRPC service on the broker's server, and what it
hears of (the markers). The broker then calls each coordinator's ``tick`` on a timer. Here, in
the broker, so that the groups and transactions packages never import the broker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from data_plane.broker.config import BrokerConfig, UnsafeBehaviour
from data_plane.coordination.internal_topic import CreateTopics, InternalTopic
from data_plane.groups.coordinator import GroupCoordinator
from data_plane.groups.membership import GroupSettings, every_topic
from data_plane.groups.service import GroupCoordinatorService
from data_plane.transactions.coordinator import TOPIC, TransactionCoordinator, TxnSettings
from data_plane.transactions.markers import MarkerWriter, OwnLeader
from data_plane.transactions.service import TransactionCoordinatorService
from kraftlog_proto import broker_pb2, group_pb2_grpc, transaction_pb2_grpc
from server_common.authorization import AccessControl


def serve_groups(config: BrokerConfig, replicas, create_topics: CreateTopics, server: grpc.aio.Server, access: AccessControl | None = None,
                 transaction_topic: InternalTopic | None = None) -> GroupCoordinatorService:
    """``transaction_topic`` answers FindCoordinator for transactional ids (None: refused).
    Returns the service, which the Kafka listener answers group requests with too."""
    settings = GroupSettings(
        session_timeout_ms=config.group_session_timeout_ms,
        heartbeat_interval_ms=config.group_heartbeat_interval_ms,
        max_size=config.group_max_size,
        assign_before_revoke=config.unsafe is UnsafeBehaviour.ASSIGN_BEFORE_REVOKE,
        offsets_retention_ms=round(config.offsets_retention_minutes * 60_000),
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
    )
    visible = every_topic if access is None else (
        lambda sub, topic: access.principal_allows(sub.principal, sub.client_host, "describe", "topic", topic))
    coordinator = GroupCoordinator(config.broker_id, replicas, settings, visible=visible)
    replicas.marker_listeners.append(coordinator.on_marker)  # transactional offsets complete with their markers
    offsets_topic = InternalTopic(config.broker_id, config.offsets_topic_partitions, lambda: replicas.image, create_topics)
    service = GroupCoordinatorService(coordinator, offsets_topic, access, transaction_topic)
    group_pb2_grpc.add_GroupCoordinatorServicer_to_server(service, server)
    return service


def serve_transactions(
    config: BrokerConfig, replicas, create_topics: CreateTopics,
    allocate_producer_id: Callable[[], Awaitable[broker_pb2.InitProducerIdResponse]],
    broker_address: Callable[[int], str | None], server: grpc.aio.Server, own_leader: OwnLeader, access: AccessControl | None = None,
) -> tuple[TransactionCoordinatorService, InternalTopic]:
    """The service (its coordinator for the timer, itself for the Kafka door and this broker's
    leaders) and the `__transaction_state` topic's finder (for FindCoordinator with key_type
    TRANSACTION, served by the GroupCoordinator service). ``own_leader`` writes markers to the
    partitions this broker leads, in process."""
    settings = TxnSettings(max_timeout_ms=config.transaction_max_timeout_ms, id_expiration_ms=config.transactional_id_expiration_ms)
    markers = MarkerWriter(config.broker_id, replicas, broker_address, config.peer_credentials(), own_leader)
    unsafe = config.unsafe is UnsafeBehaviour.MARKERS_BEFORE_DECISION
    coordinator = TransactionCoordinator(config.broker_id, replicas, settings, allocate_producer_id, markers, markers_before_decision=unsafe)
    topic = InternalTopic(config.broker_id, config.transaction_state_partitions, lambda: replicas.image, create_topics, TOPIC)
    service = TransactionCoordinatorService(coordinator, access)
    transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(service, server)
    return service, topic
