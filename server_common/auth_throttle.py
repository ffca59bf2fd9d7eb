"""How many password verifications a user name or a peer address may fail: token buckets, a
pure core (the time is passed in) the authentication interceptor consults.

A password that has not been verified before costs a PBKDF2 derivation, milliseconds of CPU
by design. Without a limit anyone who reaches a port can guess as fast as the server hashes,
and keep a core busy doing it. Each verification attempt takes a token from the bucket of the
user name it claims and from the bucket of the address it comes from; a success gives both
back, so only failures use them up. An empty bucket refuses the attempt at once, before any
hashing, and says when to retry; buckets refill at a steady rate, so a client that stops
failing is admitted again without anyone's intervention.

A peer's bucket is larger than a user's: one address (a NAT, a shared host, every local test
client) carries many users, while guesses at one account should stop sooner. Attempts whose
password was already verified (``scram.VerifiedPasswords``) never reach the throttle, so a
flood of wrong guesses for a user does not lock out its clients that are signed in already.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, slots=True)
class Limit:
    """``burst`` failures at once, then one every ``1 / per_second`` seconds."""

    burst: int
    per_second: float


USER = "user"
PEER = "peer"
DEFAULT_LIMITS: Mapping[str, Limit] = {USER: Limit(burst=5, per_second=0.5), PEER: Limit(burst=20, per_second=2.0)}


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float
    failures: int = 0  # failures since the last success, for the log


class FailureThrottle:
    """Token buckets per (kind, name), e.g. ``{"user": "alice", "peer": "10.0.0.7"}``."""

    def __init__(self, limits: Mapping[str, Limit] = DEFAULT_LIMITS, capacity: int = 10_000) -> None:
        self._limits = limits
        self._capacity = capacity
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def _bucket(self, kind: str, name: str, now: float) -> _Bucket:
        limit = self._limits[kind]
        bucket = self._buckets.get((kind, name))
        if bucket is None:
            if len(self._buckets) >= self._capacity:
                self._forget_full(now)
            bucket = self._buckets[(kind, name)] = _Bucket(float(limit.burst), now)
        else:
            bucket.tokens = min(float(limit.burst), bucket.tokens + (now - bucket.at) * limit.per_second)
            bucket.at = now
        return bucket

    def acquire(self, keys: Mapping[str, str], now: float) -> float:
        """0.0 when an attempt may verify (a token is taken from every key's bucket); otherwise
        the seconds until it may, and nothing is taken."""
        buckets = {kind: self._bucket(kind, name, now) for kind, name in keys.items()}
        waits = [(1.0 - b.tokens) / self._limits[kind].per_second for kind, b in buckets.items() if b.tokens < 1.0]
        if waits:
            return max(waits)
        for bucket in buckets.values():
            bucket.tokens -= 1.0
        return 0.0

    def succeeded(self, keys: Mapping[str, str], now: float) -> None:
        """The attempt verified: its tokens come back and the failure streaks end."""
        for kind, name in keys.items():
            bucket = self._bucket(kind, name, now)
            bucket.tokens = min(float(self._limits[kind].burst), bucket.tokens + 1.0)
            bucket.failures = 0

    def failed(self, keys: Mapping[str, str], now: float) -> dict[str, int]:
        """The attempt did not verify (its tokens stay spent); each key's failures in a row."""
        counts = {}
        for kind, name in keys.items():
            bucket = self._bucket(kind, name, now)
            bucket.failures += 1
            counts[kind] = bucket.failures
        return counts

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled (they hold nothing a fresh one would not); if a flood
        of distinct names leaves none full, drop the older half: the peer's bucket still holds."""
        full = [key for key, b in self._buckets.items()
                if b.tokens + (now - b.at) * self._limits[key[0]].per_second >= self._limits[key[0]].burst]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= self._capacity:
            for key in sorted(self._buckets, key=lambda k: self._buckets[k].at)[: len(self._buckets) // 2]:
                del self._buckets[key]
