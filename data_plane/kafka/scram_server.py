"""The server's side of one SASL/SCRAM-SHA-256 or SCRAM-SHA-512 exchange (RFC 5802, RFC 7677),
as Kafka's clients speak it inside SaslAuthenticate: client-first, server-first, client-final,
server-final. Pure: the credentials, the nonce and the unknown-user salt are given.

The quorum keeps, per user, exactly what a SCRAM server needs (salt, iterations, StoredKey and
ServerKey per mechanism: server_common/scram.py), so the password never crosses the wire and the broker does
no PBKDF2: checking a proof is two HMACs. A name that is no user gets a salt derived from it
(the same every time, as a real user's would be) and fails only at the proof, so the
exchange does not tell which names are accounts. Channel binding is not offered (Kafka's
clients use ``n,,``); SCRAM extensions (``tokenauth``) are refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Callable

from server_common.scram import ITERATIONS_MAX, ITERATIONS_MIN, MECHANISMS, Mechanism, ScramCredential

__all__ = ["MECHANISMS", "ScramFailed", "ScramServer"]


class ScramFailed(Exception):
    """The exchange cannot succeed; the message is what the client is told."""


@dataclass
class _Started:
    user: str
    gs2_header: str
    client_first_bare: str
    server_first: str
    nonce: str
    keys: tuple[bytes, bytes] | None  # this mechanism's (stored_key, server_key) of the user


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        name, equals, value = part.partition("=")
        if not name or not equals:
            raise ScramFailed(f"malformed SCRAM attribute {part[:20]!r}")
        pairs.append((name, value))
    return pairs


def _username(escaped: str) -> str:
    """RFC 5802's saslname: ',' and '=' travel as '=2C' and '=3D', and no other '=' may appear."""
    name = escaped.replace("=2C", ",").replace("=3D", "=")
    if "=" in escaped.replace("=2C", "").replace("=3D", "") or not name:
        raise ScramFailed("malformed SCRAM username")
    return name


class ScramServer:
    """One connection's exchange: ``first`` answers the client-first message, ``final`` checks
    the client's proof and answers the server-final message; ``user`` is then authenticated."""

    def __init__(self, mechanism: Mechanism, credential_of: Callable[[str], ScramCredential | None], nonce: str,
                 unknown_user_key: bytes) -> None:
        """``nonce``: fresh and random per exchange (printable, no ','); ``unknown_user_key``:
        this broker's secret for the salts of names that are no user."""
        self.mechanism = mechanism
        self._credential_of = credential_of
        self._nonce = nonce
        self._unknown_user_key = unknown_user_key
        self._started: _Started | None = None
        self.claimed_user: str | None = None  # the name the client-first message gave
        self.user: str | None = None  # once the proof held

    @property
    def started(self) -> bool:
        return self._started is not None

    def first(self, client_first: bytes) -> bytes:
        if self._started is not None:
            raise ScramFailed("a second client-first message in one exchange")
        try:
            text = client_first.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailed("the client-first message is not UTF-8") from None
        if not text.startswith(("n,", "y,")):
            raise ScramFailed("SCRAM channel binding is not offered: start with 'n,,'")
        flag, authzid, bare = (text.split(",", 2) + ["", ""])[:3]
        pairs = _attributes(bare)
        if len(pairs) < 2 or pairs[0][0] != "n" or pairs[1][0] != "r" or not pairs[1][1]:
            raise ScramFailed("the client-first message must be n=<user>,r=<nonce>")
        if len(pairs) > 2:
            raise ScramFailed("SCRAM extensions (delegation tokens) are not served: authenticate with a user's password")
        user = self.claimed_user = _username(pairs[0][1])
        if authzid and authzid != f"a={pairs[0][1]}":
            raise ScramFailed("an authorization id other than the user's own is not served")
        credential = self._credential_of(user)
        if credential is not None and not ITERATIONS_MIN <= credential.iterations <= ITERATIONS_MAX:
            credential = None  # a record written before the bound never authenticates: recreate the user
        salt, iterations = (credential.salt, credential.iterations) if credential is not None else (
            hmac.new(self._unknown_user_key, user.encode(), hashlib.sha256).digest()[:16], ITERATIONS_MIN)
        nonce = pairs[1][1] + self._nonce
        server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        # A user without this mechanism's keys (created before SCRAM-SHA-512 was served) fails at
        # the proof like an unknown name, after the same exchange.
        keys = self.mechanism.keys(credential) if credential is not None else None
        self._started = _Started(user, f"{flag},{authzid},", bare, server_first, nonce, keys)
        return server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        started = self._started
        if started is None or self.user is not None:
            raise ScramFailed("a client-final message out of turn")
        text = client_final.decode("ascii", errors="replace")
        without_proof, _, proof_part = text.rpartition(",p=")
        pairs = dict(_attributes(without_proof)) if without_proof else {}
        if pairs.get("c") != base64.b64encode(started.gs2_header.encode()).decode() or pairs.get("r") != started.nonce:
            raise ScramFailed("the client-final message does not continue this exchange (channel binding or nonce differ)")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramFailed("the client proof is not base64") from None
        auth_message = f"{started.client_first_bare},{started.server_first},{without_proof}".encode()
        keys = started.keys
        if keys is None or len(proof) != self.mechanism.digest_size or not self._proof_holds(keys[0], auth_message, proof):
            raise ScramFailed(f"authentication failed for user {started.user!r}: unknown user or wrong password")
        self.user = started.user
        return b"v=" + base64.b64encode(self.mechanism.hmac(keys[1], auth_message))

    def _proof_holds(self, stored_key: bytes, auth_message: bytes, proof: bytes) -> bool:
        signature = self.mechanism.hmac(stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        return hmac.compare_digest(self.mechanism.digest(client_key), stored_key)

