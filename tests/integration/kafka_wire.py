"""One Kafka request at a time to a Kafka listener, built and read with kio's entities: for
the calls no client library in the matrix sends (brokers' calls, versions newer than the
clients speak), so the tests drive them on the wire themselves."""

from __future__ import annotations

import io
import socket
import struct

from kio.index import load_response_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer

TIMEOUT_S = 30


def kafka_call(address: str, request):
    """``request`` sent to ``address`` (host:port) at its kio entity's version; the answer decoded the same way."""
    header = RequestHeader(request_api_key=type(request).__api_key__, request_api_version=type(request).__version__,
                           correlation_id=7, client_id="test")
    body = io.BytesIO()
    entity_writer(RequestHeader)(body, header)
    entity_writer(type(request))(body, request)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(body.getvalue())) + body.getvalue())
        answer = memoryview(_read_exactly(sock, struct.unpack(">i", _read_exactly(sock, 4))[0]))
    header, at = entity_reader(ResponseHeader)(answer, 0)
    assert header.correlation_id == 7
    return entity_reader(load_response_schema(type(request).__api_key__, type(request).__version__))(answer, at)[0]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the listener closed the connection"
        data += chunk
    return data
