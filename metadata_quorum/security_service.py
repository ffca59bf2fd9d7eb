"""The controller's SecurityAdmin gRPC service: a thin shell over ``security_admin``.

Writes run at the active controller (others answer NOT_CONTROLLER with a hint) and need
ALTER on the cluster; reads are served from the local image and need DESCRIBE on the cluster.
"""

from __future__ import annotations

import asyncio

import grpc
import structlog

from metadata_quorum import security_admin
from metadata_quorum.active_controller import ActiveController
from metadata_quorum.controller_service import readable_image
from server_common import scram
from server_common.authorization import AccessControl
from kraftlog_proto import security_pb2 as pb
from kraftlog_proto import security_pb2_grpc
from server_common.errors import ErrorCode


class SecurityAdminService(security_pb2_grpc.SecurityAdminServicer):
    def __init__(self, controller: ActiveController, access: AccessControl) -> None:
        self.controller = controller
        self.access = access
        self._log = structlog.get_logger("controller").bind(controller_id=controller.node.voter.node_id)

    def _refused(self) -> pb.SecurityWriteResponse | None:
        refusal = self.access.refusal("alter", "cluster")
        if refusal is None:
            return None
        return pb.SecurityWriteResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=refusal, active_controller=self.controller.hint())

    async def _write(self, decide, action: str, **log_fields) -> pb.SecurityWriteResponse:
        if (refused := self._refused()) is not None:
            return refused
        outcome = await self.controller.write(decide)
        if outcome.error_code != ErrorCode.NONE or outcome.decision is None:
            response = pb.SecurityWriteResponse(error_code=outcome.error_code, error_message=outcome.error_message)
        else:
            response = outcome.decision.response
        response.active_controller.CopyFrom(self.controller.hint())
        if response.error_code == ErrorCode.NONE:
            self._log.info(action, **log_fields)
        return response

    async def UpsertUser(self, request: pb.UpsertUserRequest, context) -> pb.SecurityWriteResponse:
        """Authorized first and the iteration count bounded before any hashing: PBKDF2 is the
        costliest thing a caller can ask of the controller, so only an administrator may, and
        never for longer than the bound; it runs in a worker thread, off the event loop."""
        if (refused := self._refused()) is not None:
            return refused
        try:  # derive checks the count before it hashes
            credential = await asyncio.to_thread(scram.derive, request.password, None, request.iterations or scram.ITERATIONS_MIN)
        except ValueError as exc:
            return pb.SecurityWriteResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), active_controller=self.controller.hint())
        return await self._write(lambda image: security_admin.upsert_user(image, request.name, credential), "user upserted", user=request.name)

    async def DeleteUser(self, request: pb.DeleteUserRequest, context) -> pb.SecurityWriteResponse:
        return await self._write(lambda image: security_admin.delete_user(image, request.name), "user deleted", user=request.name)

    async def CreateAcls(self, request: pb.AclsRequest, context) -> pb.SecurityWriteResponse:
        return await self._write(lambda image: security_admin.change_acls(image, request, create=True), "acls created", count=len(request.acls))

    async def DeleteAcls(self, request: pb.AclsRequest, context) -> pb.SecurityWriteResponse:
        return await self._write(lambda image: security_admin.change_acls(image, request, create=False), "acls deleted", count=len(request.acls))

    async def ListUsers(self, request: pb.ListUsersRequest, context) -> pb.ListUsersResponse:
        await self._check_describe(context)
        return security_admin.list_users(await readable_image(self.controller.node, context))

    async def ListAcls(self, request: pb.ListAclsRequest, context) -> pb.ListAclsResponse:
        await self._check_describe(context)
        return security_admin.list_acls(await readable_image(self.controller.node, context), request)

    async def _check_describe(self, context) -> None:
        refusal = self.access.refusal("describe", "cluster")
        if refusal:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
