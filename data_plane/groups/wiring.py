"""How a broker hosts the group coordinator: its settings from the broker's options, and its
gRPC service on the broker's server, and the markers it hears of. The broker then calls
`GroupCoordinator.tick` on a timer."""

from __future__ import annotations

import grpc

from data_plane.broker.config import BrokerConfig, UnsafeBehaviour
from data_plane.groups.coordinator import GroupCoordinator
from data_plane.groups.membership import GroupSettings, every_topic
from data_plane.groups.offsets_topic import CreateTopics, OffsetsTopic
from data_plane.groups.service import GroupCoordinatorService
from kraftlog_proto import group_pb2_grpc
from server_common.authorization import AccessControl


def serve_groups(config: BrokerConfig, replicas, create_topics: CreateTopics, server: grpc.aio.Server, access: AccessControl | None = None,
                 transaction_topic: OffsetsTopic | None = None) -> GroupCoordinatorService:
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
    offsets_topic = OffsetsTopic(config.broker_id, config.offsets_topic_partitions, lambda: replicas.image, create_topics)
    service = GroupCoordinatorService(coordinator, offsets_topic, access, transaction_topic)
    group_pb2_grpc.add_GroupCoordinatorServicer_to_server(service, server)
    return service
