"""Client quotas on the broker's gRPC server: one interceptor that measures every client call
against its quotas (``quotas.py`` decides, this shell only times and carries out).

For each call of the Broker service (but ``ReplicaFetch`` and a broker's repair reads:
replication is never throttled by client quotas):
- the client is the call's principal (``server_common/principal.py``) and client id (the
  identity's, else the ``kraftlog-client-id`` metadata the client sent);
- while the client is muted (an earlier answer told it to wait), the call waits first;
- after the handler answers, the call counts 1 against ``request_rate``, a Produce its
  request bytes against ``producer_byte_rate``, a Fetch its answer bytes against
  ``consumer_byte_rate``; the largest throttle time earned goes into the answer's
  ``throttle_time_ms`` (Produce, Fetch, ListOffsets, Metadata) and mutes the client that long
  (KIP-219: answer at once, then hold the client's next requests);
- a ProduceStream counts each request as the Produce it stands for (the request waits while
  its client is muted; its answer carries the throttle time);
- a Consume stream counts 1 request when it opens and each message's bytes against
  ``consumer_byte_rate``; a throttled message carries ``throttle_time_ms`` and the stream
  waits that long before its next message.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import replace
from typing import Callable, Mapping

import grpc

from data_plane.broker.quotas import QuotaAccounts, resolve_quota, user_name
from metadata_quorum.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_RATE
from metadata_quorum.image import QuotaEntity
from server_common.client_id import client_id_from_metadata
from server_common.principal import current_identity, set_identity

BROKER_SERVICE_PREFIX = "/kraftlog.v1.Broker/"
NOT_THROTTLED = frozenset({"ReplicaFetch"})  # replication: never limited by client quotas
ANSWERS_WITH_THROTTLE_TIME = frozenset({"Produce", "Fetch", "ListOffsets", "Metadata"})

Client = tuple[str, str]  # (user, client id)
ThrottleObserver = Callable[[str, int], None]  # (quota key, throttle ms) of each throttled answer


def now_ms() -> float:
    return time.monotonic() * 1000.0


class QuotaEnforcer:
    """The broker's quota accounts and the interceptor that applies them; the Kafka listener
    charges the same accounts (data_plane/kafka/quotas.py), so a client has one measure."""

    def __init__(self, quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]], accounts: QuotaAccounts,
                 on_throttle: ThrottleObserver | None = None) -> None:
        self._quotas = quotas
        self.accounts = accounts
        self._on_throttle = on_throttle

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _QuotaInterceptor(self)

    def active(self) -> bool:
        """Whether any quota is set: without one, nothing is measured (not even sizes)."""
        return bool(self._quotas())

    async def wait_if_muted(self, client: Client) -> None:
        """Hold a call while its client is muted."""
        wait_ms = self.accounts.muted_for_ms(client, now_ms())
        if wait_ms > 0:
            await asyncio.sleep(wait_ms / 1000.0)

    def charge(self, client: Client, amounts: tuple[tuple[str, float], ...]) -> int:
        """Count (quota key, amount) pairs against the client's quotas; returns the largest
        throttle time earned (ms) and mutes the client that long."""
        quotas = self._quotas()
        now = now_ms()
        user, client_id = client
        throttle_ms = 0
        for key, amount in amounts:
            quota = resolve_quota(quotas, key, user, client_id)
            if quota is None:
                continue
            earned = self.accounts.record(quota, amount, now)
            if earned > 0 and self._on_throttle is not None:
                self._on_throttle(key, earned)
            throttle_ms = max(throttle_ms, earned)
        if throttle_ms > 0:
            self.accounts.mute(client, throttle_ms, now)
        return throttle_ms


def _calling_client(header_client_id: str) -> Client:
    """(user, client id) of the call being served; fills the identity's client id from the
    call's metadata when the authentication layer left it empty."""
    identity = current_identity()
    if not identity.client_id and header_client_id:
        identity = replace(identity, client_id=header_client_id)
        set_identity(identity)
    return user_name(identity.principal), identity.client_id


class _QuotaInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, enforcer: QuotaEnforcer) -> None:
        self._enforcer = enforcer

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        full_method = handler_call_details.method
        if handler is None or not full_method.startswith(BROKER_SERVICE_PREFIX):
            return handler
        method = full_method[len(BROKER_SERVICE_PREFIX):]
        if method in NOT_THROTTLED:
            return handler
        header_client_id = client_id_from_metadata(handler_call_details.invocation_metadata)
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(method, header_client_id, handler.unary_unary))
        if handler.stream_stream is not None and method == "ProduceStream":
            return handler._replace(stream_stream=self._produce_stream(header_client_id, handler.stream_stream))
        if handler.stream_stream is not None:
            return handler._replace(stream_stream=self._stream(header_client_id, handler.stream_stream))
        return handler

    def _unary(self, method: str, header_client_id: str, behaviour):
        enforcer = self._enforcer
        sets_throttle_time = method in ANSWERS_WITH_THROTTLE_TIME

        async def limited(request, context):
            if method == "Fetch" and request.repair_read:  # a broker repairing its replica
                return await behaviour(request, context)
            client = _calling_client(header_client_id)
            await enforcer.wait_if_muted(client)
            response = behaviour(request, context)
            if inspect.isawaitable(response):
                response = await response
            if not enforcer.active():
                return response
            amounts: tuple[tuple[str, float], ...] = ((REQUEST_RATE, 1.0),)
            if method == "Produce":
                amounts += ((PRODUCER_BYTE_RATE, float(request.ByteSize())),)
            elif method == "Fetch":
                amounts += ((CONSUMER_BYTE_RATE, float(response.ByteSize())),)
            throttle_ms = enforcer.charge(client, amounts)
            if throttle_ms > 0 and sets_throttle_time:
                response.throttle_time_ms = throttle_ms
            return response

        return limited

    def _produce_stream(self, header_client_id: str, behaviour):
        """Each request on a ProduceStream counts as a unary Produce: it waits while its client
        is muted, counts 1 request and its bytes, and its answer carries the throttle time."""
        enforcer = self._enforcer

        async def limited(request_iterator, context):
            client = _calling_client(header_client_id)
            throttles: dict[int, int] = {}  # correlation id -> throttle time earned by that request

            async def charged_requests():
                async for request in request_iterator:
                    await enforcer.wait_if_muted(client)
                    if enforcer.active():
                        throttle_ms = enforcer.charge(client, ((REQUEST_RATE, 1.0), (PRODUCER_BYTE_RATE, float(request.ByteSize()))))
                        if throttle_ms > 0:
                            throttles[request.correlation_id] = throttle_ms
                    yield request

            async for response in behaviour(charged_requests(), context):
                throttle_ms = throttles.pop(response.correlation_id, 0)
                if throttle_ms > 0:
                    response.throttle_time_ms = throttle_ms
                yield response

        return limited

    def _stream(self, header_client_id: str, behaviour):
        enforcer = self._enforcer

        async def limited(request_iterator, context):
            client = _calling_client(header_client_id)
            await enforcer.wait_if_muted(client)
            if enforcer.active():
                enforcer.charge(client, ((REQUEST_RATE, 1.0),))
            async for message in behaviour(request_iterator, context):
                if not enforcer.active():
                    yield message
                    continue
                await enforcer.wait_if_muted(client)
                throttle_ms = enforcer.charge(client, ((CONSUMER_BYTE_RATE, float(message.ByteSize())),))
                if throttle_ms > 0:
                    message.throttle_time_ms = throttle_ms
                yield message

        return limited
