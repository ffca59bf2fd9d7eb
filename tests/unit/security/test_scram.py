"""SCRAM-SHA-256 credentials: RFC 7677's test vector, salting, and the verification cache."""

import base64

import pytest

from server_common import scram


def test_rfc7677_vector() -> None:
    """RFC 7677 section 3: user "user", password "pencil", this salt, 4096 iterations."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = scram.derive("pencil", salt, 4096)
    # ServerSignature = HMAC(ServerKey, AuthMessage) is "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    import hashlib, hmac

    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    signature = hmac.new(credential.server_key, auth_message, hashlib.sha256).digest()
    assert base64.b64encode(signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_verify_and_salt() -> None:
    a, b = scram.derive("secret"), scram.derive("secret")
    assert a.salt != b.salt and a.stored_key != b.stored_key  # a random salt per derivation
    assert scram.verify("secret", a) and not scram.verify("Secret", a) and not scram.verify("", a)
    with pytest.raises(ValueError, match="between 4096 and 16384"):
        scram.derive("secret", iterations=1000)
    with pytest.raises(ValueError, match="between 4096 and 16384"):
        scram.derive("secret", iterations=2**31 - 1)  # refused before any hashing: the test would hang otherwise
    legacy = scram.ScramCredential(a.salt, a.stored_key, a.server_key, 2**31 - 1)
    assert not scram.verify("secret", legacy)  # a stored count above the bound is never hashed


def test_cache_drops_a_changed_credential() -> None:
    cache = scram.VerifiedPasswords()
    old = scram.derive("one")
    cache.remember("alice", "one", old)
    assert cache.cached("alice", "one", old) and not cache.cached("alice", "two", old)
    new = scram.derive("two")  # the user's password was altered
    assert not cache.cached("alice", "one", new)  # the cached success of the old password does not count
    assert not cache.cached("alice", "one", None)  # deleted user


def test_an_unknown_user_costs_the_same_hashing_as_a_real_one(monkeypatch) -> None:
    """A wrong password is refused after one PBKDF2 of the default count whether the user exists
    or not, so the time of a refusal does not tell which names are accounts."""
    real = scram.derive("secret")
    work: list[int] = []
    pbkdf2 = scram.hashlib.pbkdf2_hmac
    monkeypatch.setattr(scram.hashlib, "pbkdf2_hmac", lambda *a: work.append(a[3]) or pbkdf2(*a))
    assert not scram.verify("guess", real) and not scram.verify("guess", None)
    assert work == [scram.ITERATIONS_MIN, scram.ITERATIONS_MIN]
