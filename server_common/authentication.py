"""Who is calling: the authentication interceptor of every kraftlog gRPC server.

At the start of each call's handler (inside the handler's own task, so the contextvar is
the call's) it sets ``server_common.principal`` to:
- ``User:<name>`` when the call's metadata carries ``kraftlog-username`` and
  ``kraftlog-password`` and the password verifies against the user's SCRAM credential in the
  metadata image (a wrong password or unknown user is refused with UNAUTHENTICATED, whether
  or not authentication is required: a client that presents credentials means to use them).
  Credentials win over a client certificate: they name the user explicitly, and proving the
  password is proof enough;
- ``User:<CN>`` when the call came over mutual TLS (the client certificate's subject CN);
- ``User:ANONYMOUS`` otherwise, allowed only when authentication is not required.

Credentials travel in metadata, so without TLS they travel in clear: fine for a local test
cluster, never for production (docs/security.md).

A password not verified before costs a PBKDF2 derivation (milliseconds of CPU by design). It
runs in a small thread pool, never on the event loop that serves every other call, and only
when the user name's and the peer's failure budgets allow (``auth_throttle``): past them the
call is refused at once with the time to wait. Every failure is logged (user, peer, failures
in a row; never the password) and counted in ``kraftlog_authentication_failures_total``.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

import grpc
import structlog
from prometheus_client import Counter

from server_common.client_id import client_id_from_metadata
from server_common.principal import ANONYMOUS, Identity, set_identity
from server_common.auth_throttle import PEER, USER, FailureThrottle
from server_common.scram import ScramCredential, VerifiedPasswords, verify

USERNAME_METADATA_KEY = "kraftlog-username"
PASSWORD_METADATA_KEY = "kraftlog-password"
# Health checks and reflection answer anyone: load balancers and `kraftlog` diagnostics use them.
UNAUTHENTICATED_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")
VERIFY_THREADS = 2  # PBKDF2 releases the GIL: two verifications run beside the loop, more wait their turn


class AuthenticationFailed(Exception):
    """The call is refused; the message says what to configure."""


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    _, _, address = peer.partition(":")
    host = address.rsplit(":", 1)[0] if address.count(":") >= 1 else address
    return host.strip("[]")


def _metadata_value(metadata: Any, key: str) -> str | None:
    for k, v in metadata or ():
        if k == key:
            return v.decode(errors="replace") if isinstance(v, bytes) else str(v)
    return None


class Authenticator:
    """Turns a call's TLS identity or credentials into its principal (see the module docstring)."""

    def __init__(self, credentials: Callable[[], Mapping[str, ScramCredential]], required: bool, failures: Counter | None = None,
                 log: Any = None, clock: Callable[[], float] = time.monotonic, throttle: FailureThrottle | None = None) -> None:
        """``failures``: the node's ``kraftlog_authentication_failures`` counter (None: metrics off)."""
        self._credentials = credentials
        self.required = required
        self._verified = VerifiedPasswords()
        self._throttle = throttle or FailureThrottle()
        self._clock = clock
        self._log = log or structlog.get_logger("authentication")
        self._pool = ThreadPoolExecutor(VERIFY_THREADS, thread_name_prefix="password-verify")
        self._failures = failures

    async def identify(self, context: grpc.aio.ServicerContext) -> Identity:
        """The call's identity; raises AuthenticationFailed."""
        metadata = context.invocation_metadata()
        host = peer_host(context.peer() or "")
        client_id = client_id_from_metadata(metadata)
        user = _metadata_value(metadata, USERNAME_METADATA_KEY)
        if user is not None:
            password = _metadata_value(metadata, PASSWORD_METADATA_KEY) or ""
            await self._check_password(user, password, host)
            return Identity(f"User:{user}", client_id, host)
        common_names = (context.auth_context() or {}).get("x509_common_name")
        if common_names:
            return Identity(f"User:{common_names[0].decode(errors='replace')}", client_id, host)
        if self.required:
            raise AuthenticationFailed(
                "authentication is required: present a client certificate (mutual TLS) or a username and password "
                "(client config keys username/password, --command-config; docs/security.md)"
            )
        return Identity(ANONYMOUS.principal, client_id, host)

    async def _check_password(self, user: str, password: str, host: str) -> None:
        """Returns when ``password`` is ``user``'s; raises AuthenticationFailed otherwise."""
        credential = self._credentials().get(user)
        if self._verified.cached(user, password, credential):
            return
        keys = {USER: user, PEER: host}
        wait = self._throttle.acquire(keys, self._clock())
        if wait > 0:
            self._count("throttled")
            raise AuthenticationFailed(
                f"too many failed authentications for user {user!r} or from {host}: retry in {math.ceil(wait)} s with the right "
                "username/password (client config keys username/password, --command-config)")
        if await asyncio.get_running_loop().run_in_executor(self._pool, verify, password, credential):
            self._throttle.succeeded(keys, self._clock())
            self._verified.remember(user, password, credential)
            return
        failures = self._throttle.failed(keys, self._clock())
        self._count("wrong_credentials")
        self._log.warning("authentication failed", user=user, peer=host, user_failures=failures[USER], peer_failures=failures[PEER])
        raise AuthenticationFailed(
            f"authentication failed for user {user!r}: unknown user or wrong password; check username/password in "
            "the client config (--command-config), or create the user with `kraftlog users create`")

    def _count(self, reason: str) -> None:
        if self._failures is not None:
            self._failures.labels(reason=reason).inc()

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _AuthenticationInterceptor(self)


class _AuthenticationInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every method's behaviour so the identity is set inside the handler's task."""

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(UNAUTHENTICATED_SERVICES):
            return handler
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(handler.unary_unary))
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=self._unary(handler.stream_unary))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._streaming(handler.unary_stream))
        return handler._replace(stream_stream=self._streaming(handler.stream_stream))

    async def _authenticate(self, context: grpc.aio.ServicerContext) -> None:
        try:
            set_identity(await self._authenticator.identify(context))
        except AuthenticationFailed as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))

    def _unary(self, behaviour):
        async def authenticated(request, context):
            await self._authenticate(context)
            response = behaviour(request, context)
            return await response if inspect.isawaitable(response) else response

        return authenticated

    def _streaming(self, behaviour):
        async def authenticated(request, context):
            await self._authenticate(context)
            produced = behaviour(request, context)
            if inspect.isasyncgen(produced):
                async for item in produced:
                    yield item
            elif inspect.isawaitable(produced):  # writes with context.write and returns
                await produced

        return authenticated
