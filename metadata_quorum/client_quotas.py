"""Pure controller decisions for client quotas (docs/quotas.md): validate and commit quota
changes (AlterClientQuotas), list them (DescribeClientQuotas).

A quota entity names a user, a client id, or both (Kafka's entity types ``user`` and
``client-id``); an empty name stands for that dimension's default (Kafka's ``<default>``),
so a specific user or client id must have a non-empty name. Each entity holds up to three
values: ``producer_byte_rate`` and ``consumer_byte_rate`` in bytes per second, and
``request_rate`` in requests per second (Kafka measures request quotas as a percentage of a
handler thread's time; a kraftlog broker serves every request on one event loop, where a
request's time is mostly waiting, so the quota counts requests instead).

One request's entries commit together as one Raft entry, or none does. No I/O or clock.
"""

from __future__ import annotations

import math

from metadata_quorum.decision import Decision
from metadata_quorum.image import MetadataImage, QuotaEntity
from metadata_quorum.records import ClientQuotaRecord, Record
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_RATE = "request_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_RATE)
QUOTA_VALUE_MAX = 2.0**53  # larger values lose precision as doubles; no link carries that many bytes per second
ENTITY_NAME_LENGTH_MAX = 255


def entity_of(message: pb.ClientQuotaEntity) -> QuotaEntity:
    """The (user, client id) of a protobuf entity, None where a dimension is absent."""
    return (message.user if message.HasField("user") else None, message.client_id if message.HasField("client_id") else None)


def entity_message(entity: QuotaEntity) -> pb.ClientQuotaEntity:
    user, client_id = entity
    return pb.ClientQuotaEntity(user=user, client_id=client_id)


def describe_entity(entity: QuotaEntity) -> str:
    """"user alice, client id <default>", as people read it in messages and tables."""
    parts = [f"{label} {'<default>' if name == '' else name}" for label, name in zip(("user", "client id"), entity) if name is not None]
    return ", ".join(parts) or "no entity"


def entity_problem(entity: QuotaEntity) -> str | None:
    """Why ``entity`` cannot hold quotas, or None."""
    if entity == (None, None):
        return "the entity names neither a user nor a client id: name one or both (an empty name is the default)"
    for label, name in zip(("user", "client id"), entity):
        if name is not None and len(name) > ENTITY_NAME_LENGTH_MAX:
            return f"the {label} name is {len(name)} characters long; the limit is {ENTITY_NAME_LENGTH_MAX}"
    return None


def op_problem(op: pb.AlterClientQuotasRequest.Op) -> str | None:
    """Why one quota change is refused, or None."""
    if op.key not in QUOTA_KEYS:
        return f"unknown quota '{op.key}': use one of {', '.join(QUOTA_KEYS)}"
    if op.remove:
        return None
    if not math.isfinite(op.value) or not 0 < op.value <= QUOTA_VALUE_MAX:
        unit = "requests" if op.key == REQUEST_RATE else "bytes"
        return f"{op.key} must be a number of {unit} per second above 0 and at most {QUOTA_VALUE_MAX:.0f}, got {op.value}"
    return None


def alter_client_quotas(image: MetadataImage, request: pb.AlterClientQuotasRequest) -> Decision[pb.AlterClientQuotasResponse]:
    """Validate every entry; if all are valid, one ClientQuotaRecord per value set or removed
    (removing a quota that is not set is no change). One invalid entry refuses the request:
    its result says why, the others answer INVALID_REQUEST naming it."""
    results: list[pb.ClientQuotaResult] = []
    records: list[Record] = []
    seen: set[tuple[QuotaEntity, str]] = set()
    refused = ""
    for entry in request.entries:
        entity = entity_of(entry.entity)
        problem = entity_problem(entity)
        for op in entry.ops:
            if problem is not None:
                break
            problem = op_problem(op)
            if problem is None and (entity, op.key) in seen:
                problem = f"{op.key} is changed twice for {describe_entity(entity)}: change it once"
            seen.add((entity, op.key))
            if problem is None and (not op.remove or op.key in image.client_quotas.get(entity, {})):
                records.append(ClientQuotaRecord(entity[0], entity[1], op.key, None if op.remove else op.value))
        if problem is not None and not refused:
            refused = f"{describe_entity(entity)}: {problem}"
        code = ErrorCode.NONE if problem is None else ErrorCode.INVALID_REQUEST
        results.append(pb.ClientQuotaResult(entity=entry.entity, error_code=code, error_message=problem or ""))
    if refused:
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"not applied: another entry of the request is invalid ({refused})"
        records = []
    return Decision(() if request.validate_only else tuple(records), pb.AlterClientQuotasResponse(entries=results))


def describe_client_quotas(image: MetadataImage, request: pb.DescribeClientQuotasRequest) -> pb.DescribeClientQuotasResponse:
    """Every entity with quotas (only those naming exactly the requested user and/or client
    id, when given), sorted users first then client ids, defaults before names."""
    wanted = entity_of(pb.ClientQuotaEntity(user=request.user if request.HasField("user") else None,
                                            client_id=request.client_id if request.HasField("client_id") else None))
    response = pb.DescribeClientQuotasResponse(metadata_offset=image.offset)
    for entity in sorted(image.client_quotas, key=_entity_order):
        if any(want is not None and want != have for want, have in zip(wanted, entity)):
            continue
        response.entries.add(entity=entity_message(entity), values=dict(image.client_quotas[entity]))
    return response


def _entity_order(entity: QuotaEntity) -> tuple:
    return tuple((name is None, name or "") for name in entity)
