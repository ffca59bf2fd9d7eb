"""The authorization shell a server's handlers call: one question per handler, a clear refusal.

``AccessControl`` holds the Authorizer (``authorizer.py``) of the node's current ACL set,
rebuilt when the metadata image brings another one (the image's ACL map is persistent, so
"another one" is an identity test), and reads the call's principal from
``server_common.principal``. With authorization off every check allows.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, TypeVar

import grpc

from server_common.authorizer import CLUSTER_NAME, WILDCARD, AclBinding, Authorizer
from server_common.principal import current_identity
from server_common.errors import ErrorCode, error_code_name

R = TypeVar("R")
REFUSAL_CODES = {
    "topic": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    "group": ErrorCode.GROUP_AUTHORIZATION_FAILED,
    "cluster": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    "transactional_id": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _resource_option(resource_type: str, name: str) -> str:
    """The `kraftlog acls` option naming a resource."""
    return "--cluster" if resource_type == "cluster" else f"--{resource_type.replace('_', '-')} {name}"


class AccessControl:
    """The ACL checks of one server (broker or controller)."""

    def __init__(self, acls: Callable[[], Mapping[AclBinding, bool]], super_users: Iterable[str], enabled: bool) -> None:
        self._acls = acls
        self.super_users = frozenset(super_users)
        self.enabled = enabled
        self._source: Mapping[AclBinding, bool] | None = None
        self._authorizer = Authorizer((), self.super_users)

    def authorizer(self) -> Authorizer:
        acls = self._acls()
        if acls is not self._source:
            self._source, self._authorizer = acls, Authorizer(acls, self.super_users)
        return self._authorizer

    def allows(self, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> bool:
        if not self.enabled:
            return True
        identity = current_identity()
        return self.authorizer().authorize(identity.principal, identity.host, operation, resource_type, name)

    def principal_allows(self, principal: str, host: str, operation: str, resource_type: str, name: str) -> bool:
        """Whether ``principal`` (not the current call's) may: for decisions made on behalf of
        another caller, such as a group member's subscription resolved on someone else's heartbeat."""
        return not self.enabled or self.authorizer().authorize(principal, host, operation, resource_type, name)

    def allows_any(self, operation: str, resource_type: str) -> bool:
        """Whether the call may do ``operation`` on at least one resource of the type."""
        if not self.enabled:
            return True
        identity = current_identity()
        return self.authorizer().authorize_any(identity.principal, identity.host, operation, resource_type)

    def refusal(self, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> str | None:
        """None when allowed; else the message of the refusal, naming who, what and the fix."""
        if self.allows(operation, resource_type, name):
            return None
        identity = current_identity()
        principal = identity.principal
        resource = f"{resource_type} {name!r}" if resource_type != "cluster" else "the cluster"
        deny = self.authorizer().matching_deny(principal, identity.host, operation, resource_type, name)
        if deny is not None:
            prefixed = " --prefixed" if deny.pattern_type == "prefixed" else ""
            return (
                f"{principal} is not authorized to {operation.upper()} {resource}: a DENY ACL matches it, and a deny wins "
                f"over any allow; an administrator can remove it with `kraftlog acls delete --principal {deny.principal} "
                f"--host {deny.host} --operation {deny.operation} --deny {_resource_option(deny.resource_type, deny.resource_name)}{prefixed}`"
            )
        if name == WILDCARD and resource_type != "cluster":
            # A request naming '*' gets no advice to allow '*': in an ACL it means every one.
            return (f"{principal} is not authorized to {operation.upper()} {resource}: '*' is no {resource_type} name, and an ACL on "
                    f"'*' would allow every {resource_type}; name the {resource_type} itself")
        return (
            f"{principal} is not authorized to {operation.upper()} {resource}; an administrator can allow it with "
            f"`kraftlog acls create --principal {principal} --operation {operation} {_resource_option(resource_type, name)}`"
        )

    def first_refusal(self, operation: str, resource_type: str, names: Iterable[str] = (CLUSTER_NAME,)) -> tuple[int, str] | None:
        """(error code, message) of the first of ``names`` the call may not ``operation``; None when all are allowed."""
        if not self.enabled:
            return None
        for name in names:
            message = self.refusal(operation, resource_type, name)
            if message:
                return REFUSAL_CODES[resource_type], message
        return None

    def refused_response(self, response_type: Callable[..., R], operation: str, resource_type: str, names: Iterable[str] = (CLUSTER_NAME,)) -> R | None:
        """A ``response_type`` answering the refusal (its ``error_code`` and ``error_message``), or None when allowed."""
        refused = self.first_refusal(operation, resource_type, names)
        return None if refused is None else response_type(error_code=refused[0], error_message=refused[1])

    async def abort_if_refused(self, context: grpc.aio.ServicerContext, operation: str, resource_type: str, names: Iterable[str] = (CLUSTER_NAME,)) -> None:
        """For streams, which have no error field to answer in: end the call with PERMISSION_DENIED."""
        refused = self.first_refusal(operation, resource_type, names)
        if refused is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{error_code_name(refused[0])}: {refused[1]}")

    def refused_group_response(self, response_type: Callable[..., R], operation: str, group: str,
                               topic_operation: str = "read", topics: Iterable[str] = ()) -> R | None:
        """A group RPC's refusal: ``operation`` on the group, then ``topic_operation`` on each topic (Kafka's order)."""
        refused = self.first_refusal(operation, "group", (group,)) or self.first_refusal(topic_operation, "topic", topics)
        return None if refused is None else response_type(error_code=refused[0], error_message=refused[1])
