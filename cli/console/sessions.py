"""Who is using the console: a session per browser, held in memory, named by a random cookie.

On a cluster whose brokers ask for credentials, a person signs in with their SCRAM user; the
session keeps a ``Gateway`` built with that user's credentials over the console's own TLS
files, so every call runs as that principal (docs/console.md, Security). The password stays
in this process for the session's life (the cluster checks it on each call) and is never
sent back to the page. Every change needs the session's CSRF token in a header.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable

from cli.console.gateway import Gateway
from server_common.client_security import ClientSecurity

IDLE_TIMEOUT_S = 8 * 3600
COOKIE = "kraftlog_console"
CSRF_HEADER = "X-CSRF-Token"


@dataclass
class Session:
    sid: str
    csrf: str
    principal: str | None = None  # None: not signed in
    gateway: Gateway | None = None
    last_seen: float = 0.0

    def csrf_ok(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token, self.csrf)


class SessionStore:
    """Sessions by id. ``login_required``: the cluster authenticates callers, so each person
    signs in; otherwise every session shares the console's own gateway and identity."""

    def __init__(self, bootstrap: str, security: ClientSecurity, login_required: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.login_required = login_required
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.shared = None if login_required else Gateway(bootstrap, security)

    def get(self, sid: str | None) -> Session | None:
        now = self._clock()
        with self._lock:
            session = self._sessions.get(sid or "")
            if session is not None and now - session.last_seen > IDLE_TIMEOUT_S:
                self._drop(session)
                session = None
            if session is not None:
                session.last_seen = now
            return session

    def new(self) -> Session:
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), last_seen=self._clock())
        if not self.login_required:
            session.principal, session.gateway = "console", self.shared
        with self._lock:
            self._sessions[session.sid] = session
        return session

    def sign_in(self, session: Session, username: str, password: str) -> None:
        """Check the credentials against the cluster (raises its refusal) and bind them to the
        session. A new session id is issued (no fixation): the caller sets the new cookie."""
        if not username:
            raise ValueError("give a user name")
        gateway = Gateway(self.bootstrap, dataclasses.replace(self.security, username=username, password=password))
        try:
            gateway.check_credentials()
        except Exception:
            gateway.close()
            raise
        with self._lock:
            self._sessions.pop(session.sid, None)
            if session.gateway is not None and session.gateway is not self.shared:
                session.gateway.close()
            session.sid, session.csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            session.principal, session.gateway = f"User:{username}", gateway
            self._sessions[session.sid] = session

    def sign_out(self, session: Session) -> None:
        with self._lock:
            self._drop(session)

    def _drop(self, session: Session) -> None:
        self._sessions.pop(session.sid, None)
        if session.gateway is not None and session.gateway is not self.shared:
            session.gateway.close()

    def close(self) -> None:
        with self._lock:
            for session in list(self._sessions.values()):
                self._drop(session)
        if self.shared is not None:
            self.shared.close()
