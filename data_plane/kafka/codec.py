"""Kafka request and response frames: the bytes inside the 4-byte size prefix.

A request is a header (v1, or v2 with tagged fields for flexible versions) and a body whose
layout depends on (api key, version); a response is a header (v0, or v1 for flexible
versions except ApiVersions) and a body. kio's generated entities read and write both;
``served`` says which versions this door decodes at all. Pure: no sockets.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

_HEADER_START = struct.Struct(">hhi")
# kio resolves a schema by module path on every call: once per (api key, version) is enough.
_request_schema = functools.cache(load_request_schema)  # api key, api version, correlation id: the same in every header version


class MalformedFrame(ValueError):
    """Bytes that are not a Kafka request: the connection that sent them is closed."""


@dataclass(frozen=True)
class Unserved(Exception):
    """A well-framed request for an API or version this door does not serve."""

    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Entity


def decode_request(frame: bytes, served: dict[int, tuple[int, int]]) -> Request:
    """The request in ``frame``; raises ``Unserved`` for an API or version outside ``served``
    (api key -> (lowest, highest) version) and ``MalformedFrame`` for bytes that do not parse."""
    if len(frame) < _HEADER_START.size:
        raise MalformedFrame(f"a {len(frame)}-byte frame is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(frame)
    low, high = served.get(api_key, (0, -1))
    if not low <= api_version <= high:
        raise Unserved(api_key, api_version, correlation_id)
    schema = _request_schema(api_key, api_version)
    try:
        header, at = entity_reader(schema.__header_schema__)(frame, 0)
        body, size = entity_reader(schema)(frame, at)
    except Exception as exc:  # kio raises several types for bytes that do not fit the schema
        raise MalformedFrame(f"api key {api_key} v{api_version} does not parse: {exc!r}") from exc
    # Bytes after a request that parsed whole are ignored, as Kafka's brokers ignore them:
    # librdkafka's AdminClient sends three after its Metadata v12 request for every topic.
    return Request(api_key, api_version, correlation_id, header.client_id or "", body)


def encode_response(correlation_id: int, response: Entity) -> bytes:
    """The frame (size prefix included) answering ``correlation_id`` with ``response``."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    header_type = response.__header_schema__
    entity_writer(header_type)(buffer, header_type(correlation_id=correlation_id))
    entity_writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def encode_bare_error(correlation_id: int, error_code: int) -> bytes:
    """The answer to a request of an API this door does not serve at all (there is no schema
    to answer it in): the correlation id and the error code, so the client reads an error
    and the connection stays open."""
    return struct.pack(">iih", 6, correlation_id, error_code)
