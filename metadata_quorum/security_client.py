"""Client of the controllers' SecurityAdmin service (users and ACLs): the ControllerClient's
routing and retries (NOT_CONTROLLER hints, unreachable controllers), another stub."""

from __future__ import annotations

from typing import Sequence

from metadata_quorum.controller_client import CONTROLLER_CHANNEL_OPTIONS, ControllerClient
from server_common.authorizer import AclBinding
from server_common.channel_pool import ChannelPool
from server_common.client_id import with_client_id
from metadata_quorum.security_admin import acl_message, binding_of
from kraftlog_proto import security_pb2 as pb
from kraftlog_proto import security_pb2_grpc


class SecurityClient(ControllerClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._channels.close()
        self._channels = ChannelPool(with_client_id(security_pb2_grpc.SecurityAdminStub, "", self.security.call_metadata()), CONTROLLER_CHANNEL_OPTIONS,
                                     self.security.channel_credentials())

    def upsert_user(self, name: str, password: str, iterations: int = 0) -> None:
        """Creates the user or replaces its password (sent over this channel: use TLS outside a laptop)."""
        self._call("UpsertUser", pb.UpsertUserRequest(name=name, password=password, iterations=iterations))

    def delete_user(self, name: str) -> None:
        self._call("DeleteUser", pb.DeleteUserRequest(name=name))

    def list_users(self) -> list[pb.UserDescription]:
        return list(self._call("ListUsers", pb.ListUsersRequest(), write=False).users)

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        self._call("CreateAcls", pb.AclsRequest(acls=[acl_message(a) for a in acls]))

    def delete_acls(self, acls: Sequence[AclBinding]) -> None:
        self._call("DeleteAcls", pb.AclsRequest(acls=[acl_message(a) for a in acls]))

    def list_acls(self, principal: str = "", resource_type: str = "", resource_name: str = "") -> list[AclBinding]:
        answer = self._call("ListAcls", pb.ListAclsRequest(principal=principal, resource_type=resource_type, resource_name=resource_name), write=False)
        return [binding_of(a) for a in answer.acls]
