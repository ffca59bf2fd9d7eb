"""The authentication interceptor on a real gRPC server (in process, plaintext): every
service refuses a call without credentials when authentication is required, and a wrong
password always; a right password reaches the handler with its principal set."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraftlog_proto import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, security_pb2, security_pb2_grpc
from server_common import scram
from server_common.authentication import Authenticator
from server_common.principal import current_identity

USERS = {"alice": scram.derive("alice-secret")}


class WhoAmI(broker_pb2_grpc.BrokerServicer):
    """Answers Metadata with the caller's principal as the cluster id (to see what the handler saw)."""

    async def Metadata(self, request, context):
        return broker_pb2.MetadataResponse(cluster_id=current_identity().principal)


async def serve(required: bool) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server(interceptors=[Authenticator(lambda: USERS, required).interceptor()])
    broker_pb2_grpc.add_BrokerServicer_to_server(WhoAmI(), server)
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(controller_pb2_grpc.ControllerServiceServicer(), server)
    security_pb2_grpc.add_SecurityAdminServicer_to_server(security_pb2_grpc.SecurityAdminServicer(), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def credentials(user: str, password: str) -> tuple[tuple[str, str], ...]:
    return (("kraftlog-username", user), ("kraftlog-password", password))


async def every_service(address: str, metadata) -> dict[str, grpc.StatusCode]:
    """The status of one call to each service (OK for health, UNIMPLEMENTED for an empty servicer that was reached)."""
    codes: dict[str, grpc.StatusCode] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        calls = {
            "Broker.Metadata": lambda: broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(), metadata=metadata),
            "ControllerService.CreateTopics": lambda: controller_pb2_grpc.ControllerServiceStub(channel).CreateTopics(controller_pb2.CreateTopicsRequest(), metadata=metadata),
            "SecurityAdmin.ListUsers": lambda: security_pb2_grpc.SecurityAdminStub(channel).ListUsers(security_pb2.ListUsersRequest(), metadata=metadata),
            "Health.Check": lambda: health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), metadata=metadata),
        }
        for name, call in calls.items():
            try:
                await call()
                codes[name] = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as exc:
                codes[name] = exc.code()
        stream = broker_pb2_grpc.BrokerStub(channel).ReplicaFetch(metadata=metadata)
        try:
            await stream.write(broker_pb2.ReplicaFetchRequest())
            await stream.read()
            codes["Broker.ReplicaFetch"] = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            codes["Broker.ReplicaFetch"] = exc.code()
    return codes


@pytest.mark.parametrize("required", [True, False])
def test_anonymous_and_wrong_passwords(required: bool) -> None:
    async def run() -> None:
        server, address = await serve(required)
        try:
            anonymous = await every_service(address, ())
            wrong = await every_service(address, credentials("alice", "wrong"))
            right = await every_service(address, credentials("alice", "alice-secret"))
            async with grpc.aio.insecure_channel(address) as channel:
                seen = await broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(), metadata=credentials("alice", "alice-secret"))
                seen_anonymous = None if required else await broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest())
        finally:
            await server.stop(None)
        refused = grpc.StatusCode.UNAUTHENTICATED
        assert anonymous["Health.Check"] == grpc.StatusCode.OK and wrong["Health.Check"] == grpc.StatusCode.OK
        for name in ("Broker.Metadata", "ControllerService.CreateTopics", "SecurityAdmin.ListUsers", "Broker.ReplicaFetch"):
            assert wrong[name] == refused, name
            assert anonymous[name] == (refused if required else right[name]), name
            assert right[name] != refused, name  # reached the handler
        assert seen.cluster_id == "User:alice"
        assert seen_anonymous is None or seen_anonymous.cluster_id == "User:ANONYMOUS"

    asyncio.run(run())
