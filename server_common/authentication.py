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
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import grpc

from server_common.client_id import client_id_from_metadata
from server_common.principal import ANONYMOUS, Identity, set_identity
from server_common.scram import ScramCredential, VerifiedPasswords

USERNAME_METADATA_KEY = "kraftlog-username"
PASSWORD_METADATA_KEY = "kraftlog-password"
# Health checks and reflection answer anyone: load balancers and `kraftlog` diagnostics use them.
UNAUTHENTICATED_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")


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

    def __init__(self, credentials: Callable[[], Mapping[str, ScramCredential]], required: bool) -> None:
        self._credentials = credentials
        self.required = required
        self._verified = VerifiedPasswords()

    def identify(self, context: grpc.aio.ServicerContext) -> Identity:
        """The call's identity; raises AuthenticationFailed."""
        metadata = context.invocation_metadata()
        host = peer_host(context.peer() or "")
        client_id = client_id_from_metadata(metadata)
        user = _metadata_value(metadata, USERNAME_METADATA_KEY)
        if user is not None:
            password = _metadata_value(metadata, PASSWORD_METADATA_KEY) or ""
            if not self._verified.check(user, password, self._credentials().get(user)):
                raise AuthenticationFailed(
                    f"authentication failed for user {user!r}: unknown user or wrong password; check username/password in "
                    "the client config (--command-config), or create the user with `kraftlog users create`"
                )
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
            set_identity(self._authenticator.identify(context))
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
