"""How a broker hosts the transaction coordinator: its settings from the broker's options, the
`__transaction_state` topic's finder (FindCoordinator with key_type TRANSACTION, served by the
GroupCoordinator service), the marker writer and the gRPC service. The broker then calls
`TransactionCoordinator.tick` on a timer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from data_plane.broker.config import BrokerConfig, UnsafeBehaviour
from data_plane.groups.offsets_topic import CreateTopics, OffsetsTopic
from data_plane.transactions.coordinator import TOPIC, TransactionCoordinator, TxnSettings
from data_plane.transactions.markers import MarkerWriter
from data_plane.transactions.service import TransactionCoordinatorService
from kraftlog_proto import broker_pb2, transaction_pb2_grpc
from server_common.authorization import AccessControl


def serve_transactions(
    config: BrokerConfig, replicas, create_topics: CreateTopics,
    allocate_producer_id: Callable[[], Awaitable[broker_pb2.InitProducerIdResponse]],
    broker_address: Callable[[int], str | None], server: grpc.aio.Server, access: AccessControl | None = None,
) -> tuple[TransactionCoordinator, OffsetsTopic]:
    """The coordinator (for its timer) and the topic finder (for FindCoordinator)."""
    settings = TxnSettings(max_timeout_ms=config.transaction_max_timeout_ms, id_expiration_ms=config.transactional_id_expiration_ms)
    markers = MarkerWriter(config.broker_id, replicas, broker_address, config.peer_credentials())
    unsafe = config.unsafe is UnsafeBehaviour.MARKERS_BEFORE_DECISION
    coordinator = TransactionCoordinator(config.broker_id, replicas, settings, allocate_producer_id, markers, markers_before_decision=unsafe)
    topic = OffsetsTopic(config.broker_id, config.transaction_state_partitions, lambda: replicas.image, create_topics, TOPIC)
    transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(TransactionCoordinatorService(coordinator, access), server)
    return coordinator, topic
