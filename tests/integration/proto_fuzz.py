"""Hypothesis strategies for any request message, built from its protobuf descriptor, and the
check that an answer is one a client can act on.

The strategies walk every field of a message: integers at their type's boundaries (and small
realistic values), strings empty, unicode, huge or drawn from a pool of names the test chooses,
bytes as garbage or as record batches that are valid, truncated, bit-flipped, or tampered with
a correct CRC (so that the body checks behind the CRC check are reached), repeated fields
empty, long or with an entry duplicated, nested messages to a bounded depth, optional fields
and oneofs set or not. Half the requests are "tame" instead: every field plausible (small
non-negative numbers, known names and enum values, record batches, no duplicates), so that
they pass the shape checks and reach the code behind them, where one tampered batch or one
unexpected combination is what a handler must survive. Nothing here knows the kraftlog
services: a new RPC or field is fuzzed as soon as its stubs exist.

``answer_problems`` says what is wrong with an answer: a gRPC status outside the documented
ones, an internal error's text, an ``error_code`` outside the ``ErrorCode`` enum or
``UNKNOWN_SERVER_ERROR`` (an exception turned into a code), or an error without its message.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import Sequence

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from data_plane import record_batch
from kraftlog_proto import common_pb2

DEPTH_MAX = 4  # nested messages below this depth stay empty (a recursive type would never end)
FIELD_UNSET_ODDS = 4  # a field is left unset once in this many + 1 draws: most requests set most fields
LIST_SIZE_MAX = 4  # entries of a repeated field in the ordinary case
LONG_LIST_SIZE = 300  # "long": an entry repeated this often
HUGE_STRING_CHARS = 20_000  # times LONG_LIST_SIZE stays within the 64 MiB a server accepts
HUGE_BYTES = (1 << 20) + 100  # above the default max.message.bytes (1 MiB)

INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_UINT32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_FIXED32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_UINT64: (0, (1 << 64) - 1),
    FieldDescriptor.TYPE_FIXED64: (0, (1 << 64) - 1),
}

# gRPC statuses docs/protocol.md lists as answers a client handles. DEADLINE_EXCEEDED and
# CANCELLED come from the fuzzer's own deadline or cancel, so only calls that may wait for
# data (long polls, streams) accept them.
DOCUMENTED_STATUSES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})
WAITING_STATUSES = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED})
INTERNAL_ERROR_MARKS = ("Unexpected <class", "Exception calling application", "Exception iterating responses", "Traceback")


@dataclass(frozen=True)
class FuzzPool:
    """What the strategies draw names and ids from. ``names`` (topic names) are drawn most
    often, ``words`` (config keys and values) and ``extra_strings`` less, random text least;
    ``protected_ids`` are values the integer fields named in ``id_fields`` never take (a real
    broker's id, where a request naming it would impersonate that broker)."""

    names: tuple[str, ...]
    words: tuple[str, ...] = ()
    protected_ids: frozenset[int] = frozenset()
    id_fields: frozenset[str] = frozenset({"broker_id", "replica_id"})
    tame: bool = False  # plausible values only (see the module docstring)
    extra_strings: tuple[str, ...] = field(default=("", " ", "\x00", "ü/ö\u202e", "../../etc", "a" * 300, "-1", "0", "1", "9" * 30))


def uniform(items: Sequence) -> st.SearchStrategy:
    """One of ``items``, each about as likely (``st.sampled_from`` and ``st.one_of`` favour
    their ends, which starves the middle of a weighted list)."""
    items = list(items)
    return st.integers(0, 1 << 20).map(lambda i: items[i % len(items)])


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """A draw from one of the strategies, chosen with the given weights."""
    return uniform([strategy for weight, strategy in choices for _ in range(weight)]).flatmap(lambda strategy: strategy)


TAME_INTEGERS = (0, 1, 2)


def integers(kind: int) -> st.SearchStrategy[int]:
    """Half the time a small value near where ids, partitions, offsets and epochs live (a
    request must look real to get past the first check), else a boundary or anything."""
    low, high = INT_RANGES[kind]
    small = uniform(range(max(low, -2), min(high, 2) + 1))
    boundaries = [v for v in (low, low + 1, -(1 << 31) - 1, -(1 << 31), -(1 << 31) + 1, (1 << 31) - 1, 1 << 31, high - 1, high) if low <= v <= high]
    return weighted((2, small), (1, uniform(boundaries)), (1, st.integers(low, high)))


def strings(pool: FuzzPool) -> st.SearchStrategy[str]:
    """Mostly one of the pool's names (so that requests reach real topics and configs), else
    odd or random text, now and then a huge one."""
    if pool.tame:
        return uniform(pool.names)
    return weighted(
        (8, uniform(pool.names)), (3, uniform(pool.words or pool.names)), (2, uniform(pool.extra_strings)), (2, st.text(max_size=20)),
        (1, st.just("x" * HUGE_STRING_CHARS)),
    )


def reseal(batch: bytes) -> bytes:
    """``batch`` with its CRC recomputed over everything after the CRC field: a tampered
    batch that passes the CRC check, so the checks behind it are exercised."""
    crc = zlib.crc32(batch[21:])
    return batch[:17] + struct.pack("<I", crc) + batch[21:]


HEADER_INT_FIELDS = [  # (position, struct format) of each header field after the CRC, and the length
    (8, "<i"), (23, "<i"), (27, "<q"), (35, "<q"), (43, "<q"), (51, "<h"), (53, "<i"), (57, "<i"), (21, "<h"),
]


@st.composite
def record_batches(draw) -> bytes:
    """A valid batch, or one broken in one of the ways a buggy or hostile client breaks it."""
    values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=30)), min_size=1, max_size=5))
    keys = draw(st.none() | st.just([b"k"] * len(values)))
    headers = draw(st.none() | st.just([[("h", b"v"), ("n", None)]] * len(values)))
    compression = draw(st.sampled_from(sorted(record_batch.COMPRESSION_CODES)))
    valid = record_batch.encode_batch(values, keys=keys, headers=headers, compression=compression, now_ms=1_700_000_000_000)
    how = draw(st.sampled_from(["valid", "truncated", "bitflip", "tampered-header", "garbage-body", "two", "trailing"]))
    if how == "valid":
        return valid
    if how == "truncated":
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if how == "bitflip":
        at = draw(st.integers(0, len(valid) - 1))
        return valid[:at] + bytes([valid[at] ^ (1 << draw(st.integers(0, 7)))]) + valid[at + 1 :]
    if how == "tampered-header":
        pos, fmt = draw(st.sampled_from(HEADER_INT_FIELDS))
        kind = FieldDescriptor.TYPE_INT64 if fmt == "<q" else FieldDescriptor.TYPE_INT32
        value = draw(integers(kind).filter(lambda v: -(1 << (8 * struct.calcsize(fmt) - 1)) <= v < 1 << (8 * struct.calcsize(fmt) - 1)))
        tampered = bytearray(valid)
        struct.pack_into(fmt, tampered, pos, value)
        return reseal(bytes(tampered)) if pos != 8 else bytes(tampered)
    if how == "garbage-body":
        body = draw(st.binary(min_size=0, max_size=200))
        header = bytearray(valid[: record_batch.HEADER_SIZE])
        struct.pack_into("<i", header, 8, len(header) + len(body) - 12)
        return reseal(bytes(header) + body)
    if how == "two":
        return valid + valid
    return valid + draw(st.binary(min_size=1, max_size=20))


def byte_strings() -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=64), record_batches(), st.just(b""), st.just(b"\x00" * HUGE_BYTES))


def scalars(fd: FieldDescriptor, pool: FuzzPool) -> st.SearchStrategy:
    if pool.tame:
        return tame_scalars(fd, pool)
    if fd.type in INT_RANGES:
        if fd.name in pool.id_fields and pool.protected_ids:
            return integers(fd.type).filter(lambda v: v not in pool.protected_ids)
        return integers(fd.type)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_STRING:
        return strings(pool)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return byte_strings()
    if fd.type == FieldDescriptor.TYPE_ENUM:  # proto3 enums are open: unknown numbers are legal on the wire
        return st.one_of(st.sampled_from([v.number for v in fd.enum_type.values]), integers(FieldDescriptor.TYPE_INT32))
    if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if fd.type == FieldDescriptor.TYPE_FLOAT else 64)
    raise AssertionError(f"no strategy for field {fd.full_name} of type {fd.type}")


def tame_scalars(fd: FieldDescriptor, pool: FuzzPool) -> st.SearchStrategy:
    if fd.type in INT_RANGES:
        return uniform([v for v in TAME_INTEGERS if v not in pool.protected_ids or fd.name not in pool.id_fields])
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return record_batches()
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return uniform([v.number for v in fd.enum_type.values])
    if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(0, 10)
    return st.booleans() if fd.type == FieldDescriptor.TYPE_BOOL else strings(pool)


def lists(element: st.SearchStrategy, long: bool) -> st.SearchStrategy[list]:
    """Empty, a few, one entry twice, or (when ``long``) one entry LONG_LIST_SIZE times. Only
    lists of scalars get long: long lists nested in long lists would make requests of
    gigabytes, which test the transport's size limit and nothing else."""
    shapes = [st.lists(element, max_size=LIST_SIZE_MAX), st.lists(element, min_size=1, max_size=2).map(lambda items: items + items[:1])]
    if long:
        shapes.append(element.map(lambda item: [item] * LONG_LIST_SIZE))
    return st.one_of(shapes)


def is_map(fd: FieldDescriptor) -> bool:
    return fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def field_values(fd: FieldDescriptor, pool: FuzzPool, depth: int) -> st.SearchStrategy:
    if is_map(fd):
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        return st.dictionaries(field_values(key_fd, pool, depth), field_values(value_fd, pool, depth), max_size=LIST_SIZE_MAX)
    is_message = fd.type == FieldDescriptor.TYPE_MESSAGE
    element = _message(fd.message_type, pool, depth + 1) if is_message else scalars(fd, pool)
    if not fd.is_repeated:
        return element
    if pool.tame:  # a partition or topic twice is refused by the shape checks
        return st.lists(element, max_size=2).filter(lambda items: len(items) < 2 or items[0] != items[1])
    return lists(element, long=not is_message)


def set_field(message: Message, fd: FieldDescriptor, value) -> None:
    if is_map(fd):
        getattr(message, fd.name).update(value)
    elif fd.is_repeated:
        getattr(message, fd.name).extend(value)
    elif fd.type == FieldDescriptor.TYPE_MESSAGE:
        getattr(message, fd.name).CopyFrom(value)
    else:
        setattr(message, fd.name, value)


@st.composite
def _message(draw, descriptor: Descriptor, pool: FuzzPool, depth: int) -> Message:
    message = message_class(descriptor)()
    if depth > DEPTH_MAX:
        return message
    chosen_oneof = {o.name: draw(uniform([None, *o.fields])) for o in descriptor.oneofs if not _synthetic(o)}
    for fd in descriptor.fields:
        oneof = fd.containing_oneof
        if oneof is not None and not _synthetic(oneof):
            if chosen_oneof[oneof.name] is not fd:
                continue
        elif draw(uniform(range(FIELD_UNSET_ODDS + 1))) == 0:  # unset: the field's default, or absent for optional fields
            continue
        set_field(message, fd, draw(field_values(fd, pool, depth)))
    return message


def _synthetic(oneof) -> bool:
    """proto3 ``optional`` is a oneof of one field; it counts as a plain field here."""
    return len(oneof.fields) == 1 and oneof.name == "_" + oneof.fields[0].name


def message_class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


def messages(descriptor: Descriptor, pool: FuzzPool) -> st.SearchStrategy[Message]:
    """Any message of ``descriptor``'s type, tame or wild half the time each (see the module
    docstring)."""
    return weighted((1, _message(descriptor, replace(pool, tame=True), 0)), (1, _message(descriptor, pool, 0)))


def answer_problems(answer: Message | grpc.RpcError, may_wait: bool) -> list[str]:
    """What is wrong with ``answer`` (an empty list: nothing), for a call that may legitimately
    outlast the fuzzer's deadline when ``may_wait``."""
    if isinstance(answer, grpc.RpcError):
        code, details = answer.code(), answer.details() or ""
        allowed = DOCUMENTED_STATUSES | (WAITING_STATUSES if may_wait else frozenset())
        problems = []
        if code not in allowed:
            problems.append(f"gRPC status {code.name} is not one docs/protocol.md documents: {details!r}")
        if any(mark in details for mark in INTERNAL_ERROR_MARKS):
            problems.append(f"an internal error reached the client: {details!r}")
        if code in DOCUMENTED_STATUSES and not details.strip():
            problems.append(f"{code.name} without a message saying what to do")
        return problems
    return _error_code_problems(answer, type(answer).__name__)


def _error_code_problems(message: Message, path: str) -> list[str]:
    problems = []
    known = set(common_pb2.ErrorCode.values())
    fields = message.DESCRIPTOR.fields_by_name
    if "error_code" in fields:
        code = message.error_code
        if code not in known:
            problems.append(f"{path}.error_code {code} is not an ErrorCode")
        elif code == common_pb2.UNKNOWN_SERVER_ERROR:
            problems.append(f"{path}: UNKNOWN_SERVER_ERROR (an exception turned into a code): {getattr(message, 'error_message', '')!r}")
        elif code != common_pb2.NONE and "error_message" in fields and not message.error_message.strip():
            problems.append(f"{path}: {common_pb2.ErrorCode.Name(code)} without an error_message saying what to do")
    for fd, value in message.ListFields():
        if fd.type != FieldDescriptor.TYPE_MESSAGE or is_map(fd):
            continue
        children = value if fd.is_repeated else [value]
        for i, child in enumerate(children):
            problems += _error_code_problems(child, f"{path}.{fd.name}[{i}]")
    return problems
