"""SASL on the Kafka door: SaslHandshake (v1) and SaslAuthenticate (v0-2) with SCRAM-SHA-256
or SCRAM-SHA-512 against kraftlog's users, one `SaslConnection` per connection.

A broker that requires authentication (``--authentication-required``) requires it here too: a
connection may send ApiVersions, SaslHandshake and SaslAuthenticate until it has
authenticated, and anything else closes it (as Kafka's brokers do). Where authentication is
optional, a connection that does not authenticate is ``User:ANONYMOUS``, as on the gRPC door.
A failed exchange is answered SASL_AUTHENTICATION_FAILED, counted against the user name and
the peer address by the same failure throttle as the gRPC door's passwords, and the
connection closes after the answer.
"""

from __future__ import annotations

import datetime
import secrets
import time
from typing import Callable, Mapping

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.entities import build, response_type
from data_plane.kafka.scram_server import MECHANISMS, ScramFailed, ScramServer
from server_common.auth_throttle import PEER, USER, FailureThrottle
from server_common.principal import ANONYMOUS
from server_common.scram import ScramCredential

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# v0 of SaslHandshake sends the tokens bare, outside Kafka's framing: every current client
# sends v1 and then SaslAuthenticate.
SASL_SERVED: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
API_VERSIONS = 18
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
NO_REAUTHENTICATION = datetime.timedelta(0)
OFFERED = tuple(MECHANISMS)  # what SaslHandshake advertises, in every answer


class SaslDoor:
    """What every connection of one listener shares: the users, whether authentication is
    required, the failure throttle and the secret behind unknown users' salts."""

    def __init__(self, credentials: Callable[[], Mapping[str, ScramCredential]], required: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.credentials = credentials
        self.required = required
        self.throttle = FailureThrottle()
        self.clock = clock
        self.unknown_user_key = secrets.token_bytes(32)

    def connection(self, peer_host: str) -> SaslConnection:
        return SaslConnection(self, peer_host)


class SaslConnection:
    """One connection's SASL state: not started, mechanism chosen, authenticated, or failed
    (``closing``: answer, then close)."""

    def __init__(self, door: SaslDoor, peer_host: str) -> None:
        self._door = door
        self._peer_host = peer_host
        self._scram: ScramServer | None = None
        self.principal = ANONYMOUS.principal
        self.authenticated = False
        self.closing = False

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served on this connection now."""
        return self.authenticated or not self._door.required or api_key in BEFORE_AUTHENTICATION

    def handshake(self, request):
        out = response_type(request)
        if self.authenticated or self._scram is not None:
            self.closing = True
            return build(out, error_code=KafkaError.illegal_sasl_state, mechanisms=OFFERED)
        mechanism = MECHANISMS.get(request.mechanism)
        if mechanism is None:
            return build(out, error_code=KafkaError.unsupported_sasl_mechanism, mechanisms=OFFERED)
        self._scram = ScramServer(mechanism, lambda user: self._door.credentials().get(user), secrets.token_urlsafe(18),
                                  self._door.unknown_user_key)
        return build(out, error_code=KafkaError.none, mechanisms=OFFERED)

    def authenticate(self, request):
        out = response_type(request)
        scram = self._scram
        if scram is None or self.authenticated:
            self.closing = True
            return self._refusal(out, KafkaError.illegal_sasl_state, f"SaslAuthenticate before SaslHandshake chose one of {', '.join(OFFERED)}, "
                                 "or after the connection authenticated: the client's SASL state is wrong")
        try:
            if not scram.started:
                return self._first(out, scram, request.auth_bytes)
            answer = scram.final(request.auth_bytes)
        except ScramFailed as failed:
            return self._failed(out, scram, str(failed))
        self._door.throttle.succeeded(self._keys(scram), self._door.clock())
        self.authenticated, self.principal = True, f"User:{scram.user}"
        return build(out, error_code=KafkaError.none, error_message=None, auth_bytes=answer, session_lifetime=NO_REAUTHENTICATION)

    def _first(self, out, scram: ScramServer, client_first: bytes):
        """The server-first message, unless the claimed user or this peer failed too often."""
        answer = scram.first(client_first)
        wait = self._door.throttle.acquire(self._keys(scram), self._door.clock())
        if wait > 0:
            self.closing = True
            return self._refusal(out, KafkaError.sasl_authentication_failed,
                                 f"too many failed authentications for this user or from {self._peer_host}: retry in "
                                 f"{max(1, round(wait))} s with the right username and password")
        return build(out, error_code=KafkaError.none, error_message=None, auth_bytes=answer, session_lifetime=NO_REAUTHENTICATION)

    def _failed(self, out, scram: ScramServer, why: str):
        self.closing = True
        if scram.claimed_user is not None:  # a proof that did not hold; a malformed first message names no one
            self._door.throttle.failed(self._keys(scram), self._door.clock())
        return self._refusal(out, KafkaError.sasl_authentication_failed,
                             f"{why}: check sasl.username and sasl.password (mechanism {scram.mechanism.name}), or create the user "
                             "with `kraftlog users create` (a user created before SCRAM-SHA-512 was served needs its "
                             "password set again for SCRAM-SHA-512)")

    def _keys(self, scram: ScramServer) -> dict[str, str]:
        return {USER: scram.claimed_user or "", PEER: self._peer_host}

    @staticmethod
    def _refusal(out, code: KafkaError, message: str):
        return build(out, error_code=code, error_message=message, auth_bytes=b"", session_lifetime=NO_REAUTHENTICATION)
