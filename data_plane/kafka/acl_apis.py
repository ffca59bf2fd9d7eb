"""DescribeAcls, CreateAcls and DeleteAcls on the Kafka door, over kraftlog's ACLs (the same
bindings `kraftlog acls` and the gRPC SecurityAdmin service manage, docs/security.md).

Kafka names resource types, pattern types, operations and permissions with small integers;
kraftlog with words; the tables below are the one translation. The Kafka client's principal
is checked here as the controller checks a gRPC caller (DESCRIBE on the cluster to list,
ALTER on the cluster to change), since the controller sees the broker. DescribeAcls is
answered from the broker's metadata image; a change goes to the active controller through
the broker's controller link. Kafka's DeleteAcls takes filters, the controller exact bindings:
the door matches each filter against the image and asks the controller to delete what
matched, and answers each filter with those bindings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Mapping

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.entities import NO_THROTTLE, build, response_type, sibling
from data_plane.kafka.error_codes import to_kafka as kafka_code
from kraftlog_proto import security_pb2
from server_common.authorization import AccessControl
from server_common.authorizer import CLUSTER_NAME, AclBinding

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ANY, MATCH = 1, 2  # filter values: any value of the field; (patterns) every binding that applies to the name
RESOURCE_TYPES = {2: "topic", 3: "group", 4: "cluster", 5: "transactional_id"}
PATTERN_TYPES = {3: "literal", 4: "prefixed"}
OPERATIONS = {2: "all", 3: "read", 4: "write", 5: "create", 6: "delete", 7: "alter", 8: "describe", 9: "cluster_action",
              10: "describe_configs", 11: "alter_configs", 12: "idempotent_write"}
PERMISSIONS = {2: "deny", 3: "allow"}
KAFKA_CLUSTER = "kafka-cluster"  # the cluster resource's name in Kafka; kraftlog calls it CLUSTER_NAME
_CODES = {field: {name: code for code, name in table.items()}
          for field, table in (("resource_type", RESOURCE_TYPES), ("pattern_type", PATTERN_TYPES), ("operation", OPERATIONS),
                               ("permission", PERMISSIONS))}


class Untranslatable(ValueError):
    """A Kafka value with no kraftlog meaning: the entry is answered INVALID_REQUEST."""


def _word(table: Mapping[int, str], value: int, what: str) -> str:
    if value not in table:
        raise Untranslatable(f"{what} {value} is not one kraftlog has: use one of {', '.join(f'{k} ({v})' for k, v in table.items())}")
    return table[value]


def binding_of(creation) -> AclBinding:
    """The kraftlog binding a CreateAcls entry asks for (raises Untranslatable)."""
    resource_type = _word(RESOURCE_TYPES, creation.resource_type, "resource type")
    name = creation.resource_name
    if resource_type == "cluster" and name == KAFKA_CLUSTER:
        name = CLUSTER_NAME
    return AclBinding(creation.principal, creation.host, resource_type, name,
                      _word(PATTERN_TYPES, creation.resource_pattern_type, "pattern type"),
                      _word(OPERATIONS, creation.operation, "operation"), _word(PERMISSIONS, creation.permission_type, "permission"))


@dataclass(frozen=True)
class AclFilter:
    """A DescribeAcls or DeleteAcls filter in kraftlog's words; None: any."""

    resource_type: str | None
    resource_name: str | None
    pattern_type: str | None  # "match": every binding that applies to resource_name
    principal: str | None
    host: str | None
    operation: str | None
    permission: str | None

    @classmethod
    def of(cls, f) -> AclFilter:
        def word(table: Mapping[int, str], value: int, what: str) -> str | None:
            return None if value == ANY else _word(table, value, what)

        return cls(word(RESOURCE_TYPES, f.resource_type_filter, "resource type"), f.resource_name_filter,
                   "match" if f.pattern_type_filter == MATCH else word(PATTERN_TYPES, f.pattern_type_filter, "pattern type"),
                   f.principal_filter, f.host_filter, word(OPERATIONS, f.operation, "operation"), word(PERMISSIONS, f.permission_type, "permission"))

    def matches(self, acl: AclBinding) -> bool:
        if self.pattern_type == "match":
            named = self.resource_name is None or _applies(acl, self.resource_name)
        else:
            named = ((self.resource_name is None or _kafka_name(acl) == self.resource_name)
                     and (self.pattern_type is None or acl.pattern_type == self.pattern_type))
        return named and all(want is None or want == have for want, have in (
            (self.resource_type, acl.resource_type), (self.principal, acl.principal), (self.host, acl.host),
            (self.operation, acl.operation), (self.permission, acl.permission)))


def _kafka_name(acl: AclBinding) -> str:
    return KAFKA_CLUSTER if acl.resource_type == "cluster" else acl.resource_name


def _applies(acl: AclBinding, name: str) -> bool:
    """Kafka's MATCH: the literal binding of the name, the wildcard, and every prefix of it."""
    ours = _kafka_name(acl)
    return ours == "*" or (ours == name if acl.pattern_type == "literal" else name.startswith(ours))


def matching(acls: Iterable[AclBinding], wanted: AclFilter) -> list[AclBinding]:
    return sorted((acl for acl in acls if wanted.matches(acl)), key=repr)


def _to_proto(acl: AclBinding) -> security_pb2.Acl:
    return security_pb2.Acl(principal=acl.principal, host=acl.host, resource_type=acl.resource_type, resource_name=acl.resource_name,
                            pattern_type=acl.pattern_type, operation=acl.operation, permission=acl.permission)


def _kafka_fields(acl: AclBinding) -> dict:
    return {"resource_type": _CODES["resource_type"][acl.resource_type], "resource_name": _kafka_name(acl),
            "pattern_type": _CODES["pattern_type"][acl.pattern_type], "principal": acl.principal, "host": acl.host,
            "operation": _CODES["operation"][acl.operation], "permission_type": _CODES["permission"][acl.permission]}


@dataclass
class AclApis:
    access: AccessControl
    acls: Callable[[], Iterable[AclBinding]]  # the broker's metadata image's
    create_acls: Callable[[security_pb2.AclsRequest], Awaitable[security_pb2.SecurityWriteResponse]]
    delete_acls: Callable[[security_pb2.AclsRequest], Awaitable[security_pb2.SecurityWriteResponse]]

    async def describe(self, request):
        out = response_type(request)
        refused = self.access.first_refusal("describe", "cluster")
        if refused is not None:
            return build(out, throttle_time=NO_THROTTLE, error_code=kafka_code(refused[0]), error_message=refused[1], resources=())
        try:
            found = matching(self.acls(), AclFilter.of(request))
        except Untranslatable as exc:
            return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.invalid_request, error_message=str(exc), resources=())
        by_resource: dict[tuple, list[AclBinding]] = {}
        for acl in found:
            by_resource.setdefault((acl.resource_type, _kafka_name(acl), acl.pattern_type), []).append(acl)
        resource_type, entry = sibling(out, "DescribeAclsResource"), sibling(out, "AclDescription")
        resources = tuple(
            build(resource_type, resource_type=_CODES["resource_type"][kind], resource_name=name, pattern_type=_CODES["pattern_type"][pattern],
                  acls=tuple(build(entry, principal=a.principal, host=a.host, operation=_CODES["operation"][a.operation],
                                   permission_type=_CODES["permission"][a.permission]) for a in acls))
            for (kind, name, pattern), acls in by_resource.items())
        return build(out, throttle_time=NO_THROTTLE, error_code=KafkaError.none, error_message=None, resources=resources)

    async def create(self, request):
        out = response_type(request)
        result = sibling(out, "AclCreationResult")
        refused = self.access.first_refusal("alter", "cluster")
        answers: list[tuple[KafkaError, str | None]] = []
        wanted: list[AclBinding] = []
        for creation in request.creations:
            try:
                binding = binding_of(creation)
                binding.validate()
            except ValueError as exc:
                answers.append((KafkaError.invalid_request, str(exc)))
                continue
            answers.append((kafka_code(refused[0]), refused[1]) if refused else (KafkaError.none, None))
            if not refused:
                wanted.append(binding)
        if wanted:
            code, message = await self._write(self.create_acls, wanted)
            answers = [(code, message) if a == (KafkaError.none, None) else a for a in answers]
        return build(out, throttle_time=NO_THROTTLE, results=tuple(build(result, error_code=c, error_message=m) for c, m in answers))

    async def delete(self, request):
        out = response_type(request)
        result, matched_type = sibling(out, "DeleteAclsFilterResult"), sibling(out, "DeleteAclsMatchingAcl")
        refused = self.access.first_refusal("alter", "cluster")
        per_filter: list[tuple[KafkaError, str | None, list[AclBinding]]] = []
        for f in request.filters:
            try:
                per_filter.append((KafkaError.none, None, matching(self.acls(), AclFilter.of(f))))
            except Untranslatable as exc:
                per_filter.append((KafkaError.invalid_request, str(exc), []))
        if refused is not None:
            per_filter = [(kafka_code(refused[0]), refused[1], []) for _ in per_filter]
        doomed = sorted({acl for code, _, found in per_filter if code == KafkaError.none for acl in found}, key=repr)
        if doomed:
            code, message = await self._write(self.delete_acls, doomed)
            if code != KafkaError.none:
                per_filter = [(code, message, []) if c == KafkaError.none else (c, m, f) for c, m, f in per_filter]
        return build(out, throttle_time=NO_THROTTLE, filter_results=tuple(
            build(result, error_code=code, error_message=message, matching_acls=tuple(
                build(matched_type, error_code=KafkaError.none, error_message=None, **_kafka_fields(acl)) for acl in found))
            for code, message, found in per_filter))

    @staticmethod
    async def _write(call, bindings: list[AclBinding]) -> tuple[KafkaError, str | None]:
        try:
            response = await call(security_pb2.AclsRequest(acls=[_to_proto(b) for b in bindings]))
        except Exception as exc:  # the controllers unreachable past the deadline: retriable
            return KafkaError.request_timed_out, f"the controllers did not answer ({exc}): retry"
        return (kafka_code(response.error_code), response.error_message or None) if response.error_code else (KafkaError.none, None)
