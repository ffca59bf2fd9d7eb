"""The standard gRPC services every kraftlog process serves beside its own: health and
reflection.

Health reflects state, per service name as well as for the whole server (""): a load
balancer or an orchestrator probing a broker must see NOT_SERVING while it starts, while it
is fenced and while it shuts down, not SERVING for as long as the port is open.

Reflection answers under both names tools ask for: ``grpc.reflection.v1alpha`` (what
grpcio-reflection serves) and ``grpc.reflection.v1`` (what newer grpcurl and Postman ask for
first). The two protocols have the same messages, field for field, so the v1 service is the
same servicer behind a second service name."""

from __future__ import annotations

import asyncio
from typing import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

REFLECTION_V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"


HEALTH_CHECK_INTERVAL_S = 0.2  # how often a process re-derives its health from its state


class ServingState:
    """What the health service says about the gRPC services of this process (NOT_SERVING
    until the process first says otherwise); reflection lists the same services."""

    def __init__(self, server: grpc.aio.Server, *service_names: str) -> None:
        self._service_names = service_names
        self._servicer = health.aio.HealthServicer()
        self._serving: bool | None = None
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, server)
        names = [*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME, REFLECTION_V1_SERVICE_NAME]
        servicer = reflection.aio.ReflectionServicer(names)
        reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
        # The v1alpha messages are the v1 wire format: the same servicer answers both names.
        server.add_generic_rpc_handlers([
            grpc.method_handlers_generic_handler(REFLECTION_V1_SERVICE_NAME, {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                    servicer.ServerReflectionInfo,
                    request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                    response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
                ),
            })
        ])

    async def follow(self, serving: Callable[[], bool]) -> None:
        """Keep the health answer equal to ``serving()``, checked every HEALTH_CHECK_INTERVAL_S
        (a polling period, not synchronisation), until cancelled."""
        while True:
            await self.set(serving())
            await asyncio.sleep(HEALTH_CHECK_INTERVAL_S)

    async def set(self, serving: bool) -> None:
        """Say SERVING or NOT_SERVING, for the service and for the whole server."""
        if serving == self._serving:
            return
        self._serving = serving
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self._service_names):
            await self._servicer.set(name, status)
