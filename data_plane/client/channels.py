"""One gRPC channel per broker address, shared by everything a client object does.

A channel multiplexes any number of concurrent calls over one HTTP/2 connection, so a
channel per request (or per partition) would only add connection set-up cost. Message
limits are raised to 64 MiB both ways because produce requests and fetch responses carry
many large batches; gRPC's default 4 MiB would fail them with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import threading

import grpc
import grpc.aio
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from proto import broker_pb2_grpc, controller_pb2
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


CONTROLLER_SERVICE = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name


def listed_services(address: str, timeout_s: float) -> list[str]:
    """The gRPC services the server at `address` lists through reflection (every kraftlog
    node offers it); [] when it does not answer. Used to explain a refused broker call."""
    with grpc.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        try:
            for answer in stub.ServerReflectionInfo(iter([request]), timeout=timeout_s):
                return [service.name for service in answer.list_services_response.service]
        except grpc.RpcError:
            pass
    return []


class ChannelPool:
    """Blocking channels and Broker stubs keyed by "host:port", for the consumer and admin."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, broker_pb2_grpc.BrokerStub] = {}

    def stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        """The stub for `address`, opening its channel on first use."""
        stub = self._stubs.get(address)
        if stub is not None:
            return stub
        with self._lock:
            if address not in self._stubs:
                channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
                self._channels[address] = channel
                self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
            return self._stubs[address]

    def close(self) -> None:
        """Closes every channel; in-flight calls fail with CANCELLED."""
        with self._lock:
            channels, self._channels, self._stubs = self._channels, {}, {}
        for channel in channels.values():
            channel.close()


class AioChannelPool:
    """`grpc.aio` channels for the producer's sender; use only from the loop that made it."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, broker_pb2_grpc.BrokerStub] = {}

    def stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        """The stub for `address`, opening its channel on first use."""
        stub = self._stubs.get(address)
        if stub is None:
            channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
            self._channels[address] = channel
            stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
        return stub

    async def close(self) -> None:
        """Closes every channel, giving in-flight calls no grace period."""
        channels, self._channels, self._stubs = self._channels, {}, {}
        for channel in channels.values():
            await channel.close()
