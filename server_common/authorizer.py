"""ACL authorization, Kafka's StandardAuthorizer semantics, as a pure core.

An ACL binds a principal (``User:alice`` or ``User:*``) and a host (or ``*``) to an
operation on a resource pattern (a literal name, ``*`` for every name, or a prefix) with
ALLOW or DENY. A request is allowed when the principal is a super user, or when some ALLOW
matches and no DENY does (deny wins); nothing matching means deny (Kafka's default,
``allow.everyone.if.no.acl.found=false``). As in Kafka, an ALLOW of READ, WRITE, DELETE or
ALTER implies DESCRIBE, an ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS, and ALL covers
every operation.

``Authorizer`` is immutable and built from the image's ACL set: an index per (principal,
resource type) narrows a check to the few ACLs that can apply, and each answer is memoised,
so a repeated check on the hot path is one dictionary lookup. A new ACL set builds a new
Authorizer (and so an empty memo): changes apply to the very next call on every connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

RESOURCE_TYPES = ("topic", "group", "cluster", "transactional_id")
OPERATIONS = (
    "read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs", "cluster_action", "idempotent_write", "all",
)
PATTERN_TYPES = ("literal", "prefixed")
PERMISSIONS = ("allow", "deny")
CLUSTER_NAME = "kraftlog-cluster"  # the one cluster resource's name (Kafka's "kafka-cluster")
WILDCARD_PRINCIPAL = "User:*"
WILDCARD = "*"

# An ALLOW of the key also allows these (Kafka's implied operations).
_IMPLIES: dict[str, frozenset[str]] = {
    "read": frozenset({"describe"}),
    "write": frozenset({"describe"}),
    "delete": frozenset({"describe"}),
    "alter": frozenset({"describe"}),
    "alter_configs": frozenset({"describe_configs"}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) to which resources."""

    principal: str
    host: str
    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission: str

    def validate(self) -> None:
        """Raises ValueError naming the bad field and the accepted values."""
        for name, value, allowed in (
            ("resource type", self.resource_type, RESOURCE_TYPES),
            ("pattern type", self.pattern_type, PATTERN_TYPES),
            ("operation", self.operation, OPERATIONS),
            ("permission", self.permission, PERMISSIONS),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; use one of {', '.join(allowed)}")
        if ":" not in self.principal:
            raise ValueError(f"principal {self.principal!r} has no type; write it as User:NAME (or User:* for everyone)")
        if not self.resource_name:
            raise ValueError("the resource name is empty; name the resource, or use * for every resource of the type")
        if not self.host:
            raise ValueError("the host is empty; give an IP address, or * for every host")

    def covers(self, operation: str) -> bool:
        """Whether this ACL's operation applies to a request for ``operation``."""
        if self.operation in (operation, "all"):
            return True
        return self.permission == "allow" and operation in _IMPLIES.get(self.operation, frozenset())

    def matches_resource(self, name: str) -> bool:
        if self.pattern_type == "prefixed":
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


class Authorizer:
    """Answers "may this principal do this operation on this resource?" from one ACL set."""

    def __init__(self, acls: Iterable[AclBinding], super_users: Iterable[str] = ()) -> None:
        self.super_users = frozenset(super_users)
        index: dict[tuple[str, str], list[AclBinding]] = {}
        for acl in acls:
            index.setdefault((acl.principal, acl.resource_type), []).append(acl)
        self._index = {key: tuple(value) for key, value in index.items()}
        self._memo: dict[tuple[str, str, str, str, str | None], bool] = {}  # resource None: any of the type

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        key = (principal, host, operation, resource_type, resource_name)
        answer = self._memo.get(key)
        if answer is None:
            answer = self._memo[key] = self._decide(principal, host, operation, resource_type, resource_name)
        return answer

    def authorize_any(self, principal: str, host: str, operation: str, resource_type: str) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``, which KIP-679 uses: WRITE on any topic allows
        idempotent produce): some ALLOW that no DENY covers."""
        key = (principal, host, operation, resource_type, None)
        answer = self._memo.get(key)
        if answer is None:
            answer = self._memo[key] = self._decide_any(principal, host, operation, resource_type)
        return answer

    def _decide_any(self, principal: str, host: str, operation: str, resource_type: str) -> bool:
        if principal in self.super_users:
            return True
        acls = [acl for who in (principal, WILDCARD_PRINCIPAL) for acl in self._index.get((who, resource_type), ())
                if acl.host in (host, WILDCARD) and acl.covers(operation)]
        denies = [acl for acl in acls if acl.permission == "deny"]
        return any(not any(_denies_all_of(deny, allow) for deny in denies) for allow in acls if allow.permission == "allow")

    def matching_deny(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> AclBinding | None:
        """The DENY ACL that refuses this request, if one does (so a refusal can name what to
        remove: no ALLOW can win over it)."""
        if principal in self.super_users:
            return None
        for who in (principal, WILDCARD_PRINCIPAL):
            for acl in self._index.get((who, resource_type), ()):
                if (acl.permission == "deny" and acl.host in (host, WILDCARD) and acl.covers(operation)
                        and acl.matches_resource(resource_name)):
                    return acl
        return None

    def _decide(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        allowed = False
        for who in (principal, WILDCARD_PRINCIPAL):
            for acl in self._index.get((who, resource_type), ()):
                if acl.host not in (host, WILDCARD) or not acl.covers(operation) or not acl.matches_resource(resource_name):
                    continue
                if acl.permission == "deny":
                    return False
                allowed = True
        return allowed


def _denies_all_of(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether ``deny`` covers every resource ``allow`` names (a wildcard, a prefix of the
    allowed name or prefix, or the same literal name)."""
    if deny.pattern_type == "prefixed":
        return allow.resource_name.startswith(deny.resource_name)
    return deny.resource_name == WILDCARD or (allow.pattern_type == "literal" and deny.resource_name == allow.resource_name)
