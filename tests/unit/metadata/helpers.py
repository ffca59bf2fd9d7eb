"""Building blocks for metadata unit tests: images with registered brokers and topics, made
through the real decisions and apply path."""

from __future__ import annotations

import itertools

from metadata_quorum import broker_decisions, topic_admin
from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.decision import Decision
from metadata_quorum.delta import apply_all
from metadata_quorum.image import MetadataImage
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb


def commit(image: MetadataImage, decision: Decision) -> MetadataImage:
    """Apply the decision entry by entry, as the controller commits it."""
    for entry in decision.entries():
        image = apply_all(image, entry)
    return image


def topic_ids():
    counter = itertools.count(1)
    return lambda: f"topic-id-{next(counter)}"


def cluster(broker_ids=(1, 2, 3), heartbeats: BrokerHeartbeatManager | None = None, now_ms: int = 0, max_replicas: int = 0) -> MetadataImage:
    """An image with these brokers registered (each stating ``max_replicas``) and unfenced."""
    heartbeats = heartbeats or BrokerHeartbeatManager()
    image = MetadataImage.empty("test-cluster")
    for b in broker_ids:
        image = commit(image, broker_decisions.register_broker(image, pb.RegisterBrokerRequest(broker_id=b, host="127.0.0.1", port=9000 + b, incarnation_id=f"inc-{b}", max_replicas=max_replicas), heartbeats, now_ms))
    for b in broker_ids:
        epoch = image.brokers[b].epoch
        decision = broker_decisions.broker_heartbeat(image, pb.BrokerHeartbeatRequest(broker_id=b, broker_epoch=epoch, current_metadata_offset=image.offset), heartbeats, now_ms)
        image = commit(image, decision)
    assert all(not image.brokers[b].fenced for b in broker_ids)
    return image


def with_topic(image: MetadataImage, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> MetadataImage:
    request = pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name=name, num_partitions=partitions, replication_factor=rf, configs=configs or {})])
    decision = topic_admin.create_topics(image, request, topic_ids())
    assert decision.response.topics[0].error_code == common.NONE, decision.response.topics[0].error_message
    return commit(image, decision)
