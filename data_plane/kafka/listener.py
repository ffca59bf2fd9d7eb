"""The Kafka listener: an asyncio TCP server on the broker's event loop.

Each connection reads size-prefixed frames and answers them one at a time, in order (Kafka
answers a connection's requests in the order they came, and so does a broker that serves one
at a time per connection: a client's pipelined requests wait in the socket). A request of an
API or version not served is answered UNSUPPORTED_VERSION and the connection stays open; a
frame that does not parse, or one larger than the broker takes, closes that connection only,
with a log line saying why.

With TLS (a broker with ``--tls-*`` files) the listener is Kafka's SSL or SASL_SSL; SASL
(SCRAM-SHA-256) is served on every listener and required where the broker requires
authentication (data_plane/kafka/sasl.py). A connection that has not authenticated on such
a listener may send only ApiVersions and the SASL calls; anything else, or a failed
authentication once answered, closes it.

Client quotas (data_plane/kafka/quotas.py) are the broker's own ``QuotaEnforcer``: a limited
request of a client that an earlier answer throttled waits until that time has passed
(KIP-219's muted channel: the connection serves nothing else meanwhile), then it is counted
and its answer carries the throttle time it earns.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from typing import Callable

import structlog
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.protocol import Entity

from data_plane.kafka.apis import API_VERSIONS, SERVED, KafkaApis, api_versions_response
from data_plane.kafka.codec import MalformedFrame, Request, Unserved, decode_request, encode_bare_error, encode_response
from data_plane.broker.quotas import user_name
from data_plane.broker.quotas_interceptor import QuotaEnforcer
from data_plane.kafka.group_apis import PeerContext
from data_plane.kafka.quotas import LIMITED, charged_amounts, with_throttle_time
from data_plane.kafka.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslConnection, SaslDoor
from server_common.principal import Identity, set_identity

_SIZE = struct.Struct(">i")
# Kafka's connection.failed.authentication.delay.ms (default 100): how long a connection whose
# authentication failed stays open after the refusal, unless the client closes it first.
FAILED_AUTHENTICATION_CLOSE_DELAY_S = 0.1


class Unauthenticated(Exception):
    """A request other than ApiVersions or SASL's on a connection that must authenticate first."""

    def __init__(self, api_key: int) -> None:
        super().__init__(api_key)
        self.api_key = api_key


class KafkaListener:
    def __init__(self, apis: KafkaApis, host: str, port: int, max_frame_bytes: int, log: structlog.BoundLogger, sasl: SaslDoor,
                 quotas: QuotaEnforcer, tls: ssl.SSLContext | None = None,
                 answered: Callable[[str, float], None] | None = None) -> None:
        """``quotas``: the broker's, shared with the gRPC door. ``answered``: told of each
        request answered (its API's name, the seconds it took), for the broker's metrics; None
        with metrics off."""
        self._apis = apis
        self._quotas = quotas
        self._answered = answered
        self._sasl = sasl
        self._tls = tls
        self._host, self._port = host, port
        self._max_frame_bytes = max_frame_bytes
        self._log = log
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> int:
        """Listen; returns the port bound (the one asked for, or the one picked for port 0)."""
        try:
            self._server = await asyncio.start_server(self._serve, self._host, self._port, ssl=self._tls)
        except OSError as exc:
            raise SystemExit(f"cannot listen for Kafka clients on {self._host}:{self._port} ({exc.strerror}): "
                             "is another process using the port? Pick another with --kafka-listen") from None
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("", 0)
        log = self._log.bind(peer=f"{peer[0]}:{peer[1]}")
        sasl = self._sasl.connection(peer[0])
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                if not 0 < size <= self._max_frame_bytes:
                    raise MalformedFrame(f"a frame of {size} bytes (this broker takes 1 to {self._max_frame_bytes})")
                answer = await self._answer(await reader.readexactly(size), PeerContext(peer[0], peer[1]), sasl)
                if answer:
                    writer.write(answer)
                    await writer.drain()
                if sasl.closing:
                    log.warning("kafka connection closed: SASL authentication failed or out of turn")
                    await _client_closed(reader, FAILED_AUTHENTICATION_CLOSE_DELAY_S)
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except MalformedFrame as exc:
            log.warning("kafka connection closed: a request that is not Kafka's protocol", reason=str(exc))
        except Unauthenticated as exc:
            log.warning("kafka connection closed: a request before SASL authentication", api_key=exc.api_key)
        except ssl.SSLError as exc:
            log.warning("kafka connection closed: TLS failed", reason=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug answering one request: that connection closes, the listener serves on
            log.exception("kafka connection closed: answering a request failed")
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, frame: bytes, peer: PeerContext, sasl: SaslConnection) -> bytes | None:
        try:
            request = decode_request(frame, SERVED)
        except Unserved as unserved:
            if unserved.api_key == API_VERSIONS:  # answered in v0 with the versions served, as Kafka does
                return encode_response(unserved.correlation_id, api_versions_response(0, KafkaError.unsupported_version))
            return encode_bare_error(unserved.correlation_id, KafkaError.unsupported_version.value)
        if request.api_key == SASL_HANDSHAKE:
            return encode_response(request.correlation_id, sasl.handshake(request.body))
        if request.api_key == SASL_AUTHENTICATE:
            return encode_response(request.correlation_id, sasl.authenticate(request.body))
        if not sasl.admits(request.api_key):
            raise Unauthenticated(request.api_key)
        set_identity(Identity(sasl.principal, request.client_id, peer.host))
        if request.api_key not in LIMITED:
            return (await self._served(request, peer))[1]
        client = (user_name(sasl.principal), request.client_id)
        await self._quotas.wait_if_muted(client)
        response, answer = await self._served(request, peer)
        if not self._quotas.active():
            return answer
        throttle_ms = self._quotas.charge(client, charged_amounts(request.api_key, len(frame), len(answer or b"")))
        throttled = with_throttle_time(response, throttle_ms) if response is not None and throttle_ms > 0 else None
        return answer if throttled is None else encode_response(request.correlation_id, throttled)

    async def _served(self, request: Request, peer: PeerContext) -> tuple[Entity | None, bytes | None]:
        """The response entity and its frame (None, None: an acks=0 Produce, answered with nothing)."""
        started = time.perf_counter()
        response = await self._apis.answer(request, peer)
        if self._answered is not None:
            self._answered(type(request.body).__name__.removesuffix("Request"), time.perf_counter() - started)
        return response, None if response is None else encode_response(request.correlation_id, response)


async def _client_closed(reader: asyncio.StreamReader, timeout_s: float) -> None:
    """Wait for the client to close its side, at most ``timeout_s``: as Kafka does after a
    failed authentication. Closing at once can put the refusal and the end of the stream in one
    read of a client that reads late, and a client may then drop the refusal and report a lost
    connection instead of bad credentials (kafka-python 3 does), so the user never sees why."""
    try:
        await asyncio.wait_for(reader.read(), timeout_s)
    except (TimeoutError, OSError):
        pass  # the delay passed, or the connection broke: it closes either way
