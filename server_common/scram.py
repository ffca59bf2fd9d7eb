"""SCRAM credentials (RFC 5802/7677, as Kafka stores them for SASL/SCRAM), for SCRAM-SHA-256
and SCRAM-SHA-512.

The quorum stores, per user, a random salt, an iteration count and, per mechanism, two keys
derived from the password: ``stored_key = H(HMAC(salted, "Client Key"))`` and ``server_key =
HMAC(salted, "Server Key")`` with ``salted = PBKDF2-HMAC-H(password, salt, iterations)``, H
being SHA-256 or SHA-512. Both pairs come from the one password when the user is created or its
password set, so a user logs in with either mechanism (Kafka instead keeps one credential per
mechanism, each created on its own: one password for both is simpler to operate and no weaker,
since each pair alone already costs a PBKDF2 per guess). A record written before SHA-512 was
served has no SHA-512 pair: that user authenticates with SCRAM-SHA-512 once its password is set
again. The gRPC door's passwords verify against the SHA-256 pair. Neither key
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

MECHANISM = "SCRAM-SHA-256"  # the gRPC door's, and the Kafka door's first
SHA512_MECHANISM = "SCRAM-SHA-512"
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
    stored_key_sha512: bytes = b""  # empty: a record written before SCRAM-SHA-512 was served
    server_key_sha512: bytes = b""

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """The SCRAM mechanisms this credential authenticates."""
        return (MECHANISM, SHA512_MECHANISM) if self.stored_key_sha512 else (MECHANISM,)


@dataclass(frozen=True, slots=True)
class Mechanism:
    """One SCRAM mechanism: its name, its hash, and which of a credential's keys it uses."""

    name: str
    hash_name: str

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def keys(self, credential: ScramCredential) -> tuple[bytes, bytes] | None:
        """``(stored_key, server_key)`` of this mechanism, None if the credential has none."""
        if self.name == MECHANISM:
            return credential.stored_key, credential.server_key
        return (credential.stored_key_sha512, credential.server_key_sha512) if credential.stored_key_sha512 else None

    def derive_keys(self, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
        salted = hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)
        return self.digest(self.hmac(salted, b"Client Key")), self.hmac(salted, b"Server Key")


SHA256 = Mechanism(MECHANISM, "sha256")
SHA512 = Mechanism(SHA512_MECHANISM, "sha512")
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (SHA256, SHA512)}


def check_iterations(iterations: int) -> None:
    """Refuses an iteration count outside Kafka's range: below it a guess is cheap, above it one
    request (or one verification of the stored record) holds a CPU for as long as the caller likes."""
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        raise ValueError(f"SCRAM iterations must be between {ITERATIONS_MIN} and {ITERATIONS_MAX}, got {iterations}; "
                         f"pass --iterations in that range (default {ITERATIONS_MIN})")


def derive(password: str, salt: bytes | None = None, iterations: int = ITERATIONS_MIN) -> ScramCredential:
    """The credential of ``password`` for both mechanisms, with a fresh random salt unless one is given."""
    check_iterations(iterations)
    if not password:
        raise ValueError("the password is empty; give a non-empty password")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return ScramCredential(salt, *SHA256.derive_keys(password, salt, iterations), iterations,
                           *SHA512.derive_keys(password, salt, iterations))


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
    stored_key, _ = SHA256.derive_keys(password, credential.salt, credential.iterations)
    return hmac.compare_digest(stored_key, credential.stored_key) and known


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
