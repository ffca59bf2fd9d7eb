"""SCRAM-SHA-256-style credentials (RFC 5802/7677, as Kafka stores them for SASL/SCRAM).

The quorum stores, per user, a random salt, an iteration count and two keys derived from the
password: ``stored_key = H(HMAC(salted, "Client Key"))`` and ``server_key = HMAC(salted,
"Server Key")`` with ``salted = PBKDF2-HMAC-SHA256(password, salt, iterations)``. Neither key
gives the password back, and a leaked record does not let anyone log in without a brute force
of PBKDF2 per guess. The controller derives them from the password the client sends over the
(TLS) channel and never stores or logs the password itself.

Deriving costs milliseconds by design, so ``VerifiedPasswords`` remembers a success per user
and digest of the presented password, as long as the user's record is the one it was verified
against: a changed or deleted user loses its cached success at once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISM = "SCRAM-SHA-256"
ITERATIONS_MIN = 4096  # RFC 7677's minimum for SCRAM-SHA-256, Kafka's too
ITERATIONS_MAX = 16384  # Kafka's maximum: every verification pays this many, so a caller must not pick more
SALT_BYTES = 16


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What is stored for one user: enough to verify a password, not to recover it."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def check_iterations(iterations: int) -> None:
    """Refuses an iteration count outside Kafka's range: below it a guess is cheap, above it one
    request (or one verification of the stored record) holds a CPU for as long as the caller likes."""
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        raise ValueError(f"SCRAM iterations must be between {ITERATIONS_MIN} and {ITERATIONS_MAX}, got {iterations}; "
                         f"pass --iterations in that range (default {ITERATIONS_MIN})")


def derive(password: str, salt: bytes | None = None, iterations: int = ITERATIONS_MIN) -> ScramCredential:
    """The credential of ``password``, with a fresh random salt unless one is given."""
    check_iterations(iterations)
    if not password:
        raise ValueError("the password is empty; give a non-empty password")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


# Verifying a password of an unknown user hashes against this, so that the answer takes as long
# as for a user with the default count: a quick refusal would tell which names are accounts.
_NO_SUCH_USER = ScramCredential(b"kraftlog-no-user", b"", b"", ITERATIONS_MIN)


def verify(password: str, credential: ScramCredential | None) -> bool:
    """Whether ``password`` is the one ``credential`` was derived from (constant-time compare);
    with no credential (an unknown user), False after the same work as for a real user.
    A stored count outside the allowed range (a record written before the bound) never verifies:
    checking it could cost a CPU for minutes; recreate such a user."""
    if not password:
        return False
    known = credential is not None
    credential = credential or _NO_SUCH_USER
    if not ITERATIONS_MIN <= credential.iterations <= ITERATIONS_MAX:
        return False
    candidate = derive(password, credential.salt, credential.iterations)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key) and known


class VerifiedPasswords:
    """Successful verifications, so the hot path runs PBKDF2 once per user and password, not per call.

    Keyed by user and a SHA-256 digest of the presented password (the password itself is not
    kept); an entry counts only while the user's current credential is the very one it was
    verified against, so altering or deleting the user drops it."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._verified: dict[tuple[str, bytes], ScramCredential] = {}

    @staticmethod
    def _key(user: str, password: str) -> tuple[str, bytes]:
        return user, hashlib.sha256(password.encode()).digest()

    def cached(self, user: str, password: str, credential: ScramCredential | None) -> bool:
        """Whether this password was verified against the user's current credential (cheap)."""
        return credential is not None and self._verified.get(self._key(user, password)) == credential

    def remember(self, user: str, password: str, credential: ScramCredential) -> None:
        """Record a successful ``verify``."""
        if len(self._verified) >= self._capacity:
            self._verified.clear()  # a bound, not an LRU: a flood of distinct passwords only costs re-verification
        self._verified[self._key(user, password)] = credential
