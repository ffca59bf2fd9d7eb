"""What an authorization check and a cached password check cost (printed; nothing asserted on speed).

Run: pytest -m benchmark -s tests/unit/security/test_authorizer_benchmark.py
"""

import time

import pytest

from server_common import scram
from server_common.authorizer import AclBinding, Authorizer

pytestmark = pytest.mark.benchmark
CHECKS = 200_000


def per_call_us(call, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - start) / count * 1e6


def test_cost_of_a_check() -> None:
    acls = [AclBinding(f"User:u{i}", "*", "topic", f"t{j}", "literal", "write", "allow") for i in range(100) for j in range(100)]
    authorizer = Authorizer(acls, ["User:admin"])
    memoised = per_call_us(lambda: authorizer.authorize("User:u5", "127.0.0.1", "write", "topic", "t7"), CHECKS)
    first = per_call_us(lambda: Authorizer(acls[:100], ()).authorize("User:u0", "127.0.0.1", "write", "topic", "t99"), 2_000)
    credential = scram.derive("pw")
    cache = scram.VerifiedPasswords()
    cached = per_call_us(lambda: cache.check("alice", "pw", credential), CHECKS)
    pbkdf2 = per_call_us(lambda: scram.verify("pw", credential), 20)
    print(f"\nauthorization check, memoised (10,000 ACLs): {memoised:.2f} µs; first decision incl. building an Authorizer of "
          f"100 ACLs: {first:.1f} µs; cached password check: {cached:.2f} µs; PBKDF2 verify (4096 iterations): {pbkdf2:.0f} µs")
    assert authorizer.authorize("User:u5", "127.0.0.1", "write", "topic", "t7") and not authorizer.authorize("User:u5", "h", "read", "topic", "t7")
