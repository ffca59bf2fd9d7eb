"""The failure budget of password verifications (server_common/auth_throttle.py), with the time
passed in: a burst, then a steady rate; successes cost nothing; a user's budget is spent apart
from its peer's; memory stays bounded under a flood of names."""

from __future__ import annotations

from server_common.auth_throttle import PEER, USER, FailureThrottle, Limit

LIMITS = {USER: Limit(burst=3, per_second=0.5), PEER: Limit(burst=5, per_second=1.0)}


def fail(throttle: FailureThrottle, keys: dict[str, str], now: float) -> float:
    wait = throttle.acquire(keys, now)
    if wait == 0:
        throttle.failed(keys, now)
    return wait


def test_a_burst_then_one_attempt_per_refill_and_successes_are_free() -> None:
    throttle = FailureThrottle(LIMITS)
    alice = {USER: "alice", PEER: "10.0.0.1"}
    assert [fail(throttle, alice, 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert fail(throttle, alice, 0.0) == 2.0  # the user's budget is spent: one more token in 1 / 0.5 s
    assert fail(throttle, alice, 1.0) == 1.0
    assert fail(throttle, alice, 2.0) == 0.0  # refilled: one more attempt
    assert throttle.failed(alice, 2.0) == {USER: 5, PEER: 5}  # failures in a row, for the log
    bob = {USER: "bob", PEER: "10.0.0.1"}
    for now in (10.0, 10.0, 10.0, 10.0, 10.0, 10.0):  # a correct password gives its token back
        assert throttle.acquire(bob, now) == 0.0
        throttle.succeeded(bob, now)


def test_the_peer_budget_stops_guesses_spread_over_many_names_and_spares_other_peers() -> None:
    throttle = FailureThrottle(LIMITS)
    assert [fail(throttle, {USER: f"user-{n}", PEER: "10.0.0.9"}, 0.0) for n in range(6)] == [0.0] * 5 + [1.0]
    assert throttle.acquire({USER: "user-99", PEER: "10.0.0.2"}, 0.0) == 0.0  # another address is not held back
    refused = throttle.acquire({USER: "carol", PEER: "10.0.0.9"}, 0.0)
    assert refused == 1.0 and throttle.acquire({USER: "carol", PEER: "10.0.0.3"}, 0.0) == 0.0  # nothing was taken from carol


def test_a_flood_of_names_keeps_memory_bounded() -> None:
    throttle = FailureThrottle(LIMITS, capacity=100)
    for n in range(1000):
        fail(throttle, {USER: f"name-{n}", PEER: f"10.1.{n // 250}.{n % 250}"}, float(n) / 1000)
    assert len(throttle._buckets) <= 100
