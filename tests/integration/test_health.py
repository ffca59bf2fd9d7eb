"""Health reflects state, and reflection answers under v1 as well as v1alpha.

A broker that cannot reach any controller is not registered: NOT_SERVING. A controller alone
of three voters knows no Raft leader: NOT_SERVING. Once the quorum forms and the broker is
unfenced, both say SERVING, for the whole server and for their own service name. A broker
with no cluster metadata refuses Metadata as UNAVAILABLE (clients ask another broker) rather
than answering that no brokers exist."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.grpc_standard_services import REFLECTION_V1_SERVICE_NAME
from server_common.local_cluster import LocalCluster, Node
from server_common.waiting import wait_for

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status(node: Node, service: str = "") -> int | None:
    """The node's health answer for ``service``; None while it does not answer at all."""
    try:
        with grpc.insecure_channel(node.address) as channel:
            return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status
    except grpc.RpcError:
        return None


def v1_reflection_services(node: Node) -> set[str]:
    """The services a grpc.reflection.v1 client is told about (same messages as v1alpha)."""
    with grpc.insecure_channel(node.address) as channel:
        call = channel.stream_stream(
            f"/{REFLECTION_V1_SERVICE_NAME}/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        answers = list(call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
    return {service.name for service in answers[0].list_services_response.service}


def test_health_follows_quorum_and_registration_and_reflection_answers_v1(tmp_path: Path) -> None:
    cluster = LocalCluster.create(tmp_path / "cluster", 3, 1)
    lone, *others = cluster.controllers
    broker = cluster.brokers[0]
    try:
        cluster.start_node(lone)
        cluster.start_node(broker)
        wait_for(lambda: status(lone) is not None and status(broker) is not None, 60, "both processes answering")
        assert status(lone) == NOT_SERVING, "a controller without a quorum is not serving"
        assert status(broker) == NOT_SERVING and status(broker, "kraftlog.v1.Broker") == NOT_SERVING, \
            "a broker that cannot register is not serving"
        with pytest.raises(grpc.RpcError) as no_metadata:
            with grpc.insecure_channel(broker.address) as channel:
                broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert no_metadata.value.code() == grpc.StatusCode.UNAVAILABLE, "no metadata is not an empty cluster"
        for controller in others:
            cluster.start_node(controller)
        wait_for(lambda: status(broker, "kraftlog.v1.Broker") == SERVING, 60, "the broker to be registered and unfenced")
        assert status(broker) == SERVING
        wait_for(lambda: all(status(c, "kraftlog.v1.ControllerService") == SERVING for c in cluster.controllers), 30,
                 "every controller to know the Raft leader")
        assert "kraftlog.v1.Broker" in v1_reflection_services(broker)
        assert "kraftlog.v1.ControllerService" in v1_reflection_services(lone)
    finally:
        for node in cluster.nodes:
            cluster.kill(node)
