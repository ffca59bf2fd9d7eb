"""The client's channels to brokers: one per broker address (``server_common.channel_pool``),
with the options every client channel to a broker uses.

Message limits are raised to ``MESSAGE_BYTES_MAX`` both ways because produce requests and
fetch responses carry many large batches; gRPC's default 4 MiB would fail them with
RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

from typing import TypeVar

import grpc

from server_common.client_security import ClientSecurity
from kraftlog_proto import broker_pb2_grpc
from server_common.channel_pool import AioChannelPool, ChannelPool, open_channel
from server_common.client_id import with_client_id
from server_common.limits import MESSAGE_BYTES_MAX

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
    ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
    # Notice a dead broker during long polls instead of waiting for the deadline.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 0),
    # Reconnect quickly after a broker restart: the default backoff grows to 2 minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]

# Kafka's request.timeout.ms: how long a client waits for one broker call (the producer,
# consumer and admin client all default to it).
REQUEST_TIMEOUT_MS_DEFAULT = 30_000

S = TypeVar("S")

def controller_service_name() -> str:
    """The controller's gRPC service name, for telling a controller address from a broker's."""
    from kraftlog_proto import controller_pb2  # only on that error path: the client never calls a controller

    return controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name


def listed_services(address: str, timeout_s: float, security: ClientSecurity) -> list[str]:
    """The gRPC services the server at `address` lists through reflection (every kraftlog
    node offers it); [] when it does not answer. Used to explain a refused broker call, so
    the reflection stubs load only then (importing the client stays cheap)."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with open_channel(address, security.channel_credentials()) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        try:
            for answer in stub.ServerReflectionInfo(iter([request]), timeout=timeout_s):
                return [service.name for service in answer.list_services_response.service]
        except grpc.RpcError:
            pass
    return []


def client_channels(stub: type[S], security: ClientSecurity, client_id: str = "") -> ChannelPool[S]:
    """Blocking stubs of any kraftlog service with the client's channel options and TLS files;
    every call carries ``client_id`` and the user's credentials in its metadata
    (server_common/client_id.py), so a password user is the same user on every service."""
    return ChannelPool(with_client_id(stub, client_id, security.call_metadata()), CHANNEL_OPTIONS, security.channel_credentials())


def broker_channels(security: ClientSecurity, client_id: str = "") -> ChannelPool[broker_pb2_grpc.BrokerStub]:
    """Blocking Broker stubs (consumer, admin, CLI)."""
    return client_channels(broker_pb2_grpc.BrokerStub, security, client_id)


def aio_broker_channels(security: ClientSecurity, client_id: str = "") -> AioChannelPool[broker_pb2_grpc.BrokerStub]:
    """``grpc.aio`` Broker stubs with the client's channel options (the producer's sender)."""
    return AioChannelPool(with_client_id(broker_pb2_grpc.BrokerStub, client_id, security.call_metadata()), CHANNEL_OPTIONS, security.channel_credentials())
