"""Who is calling: the identity of the request being served, for authorization and quotas.

The authentication interceptor sets it once per call, before the handler runs; everything
below (authorizer, quota manager, metrics) reads it with `current_identity()` instead of
threading a context argument through every function. A server without authentication
serves every call as `ANONYMOUS`, so the readers never need a special case.
"""

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Identity:
    """A call's principal (`User:alice`), the client id it sent, and the peer host."""

    principal: str
    client_id: str = ""
    host: str = ""


ANONYMOUS = Identity("User:ANONYMOUS")

_CURRENT: ContextVar[Identity] = ContextVar("kraftlog_identity", default=ANONYMOUS)


def current_identity() -> Identity:
    """The identity of the call this task serves (`ANONYMOUS` outside an authenticated call)."""
    return _CURRENT.get()


def set_identity(identity: Identity) -> None:
    """Called by the authentication layer at the start of a call's handler task."""
    _CURRENT.set(identity)
