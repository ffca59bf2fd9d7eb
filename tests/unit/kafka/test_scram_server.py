"""The door's SCRAM-SHA-256 and SCRAM-SHA-512 server (data_plane/kafka/scram_server.py) against
an independent client: kafka-python's ``ScramClient``, the one its consumers and producers
authenticate with."""

from __future__ import annotations

import pytest
from kafka.net.sasl.scram import ScramClient

from data_plane.kafka.scram_server import ScramFailed, ScramServer
from server_common.scram import MECHANISMS, ScramCredential, derive

ALICE = derive("wonderland", iterations=4096)
# alice as a record written before SCRAM-SHA-512 was served stores her: no SHA-512 keys
OLD_ALICE = ScramCredential(ALICE.salt, ALICE.stored_key, ALICE.server_key, ALICE.iterations)
USERS = {"alice": ALICE, "a,b=c": derive("odd", iterations=4096), "old-alice": OLD_ALICE}


@pytest.fixture(params=sorted(MECHANISMS))
def mechanism(request: pytest.FixtureRequest) -> str:
    return request.param


def server(mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    return ScramServer(MECHANISMS[mechanism], USERS.get, "servernonce123", b"broker secret")


def exchange(user: str, password: str, scram: ScramServer) -> ScramClient:
    client = ScramClient(user, password, scram.mechanism.name)
    client.process_server_first_message(scram.first(client.first_message()))
    client.process_server_final_message(scram.final(client.final_message()))  # raises on a wrong server signature
    return client


def test_the_right_password_authenticates_and_the_server_proves_it_knows_the_key(mechanism: str) -> None:
    scram = server(mechanism)
    exchange("alice", "wonderland", scram)
    assert scram.user == "alice"


def test_a_proof_of_the_other_mechanism_does_not_hold() -> None:
    """The SHA-512 exchange checks the SHA-512 keys: a SHA-256 client's proof is refused."""
    scram = server("SCRAM-SHA-512")
    client = ScramClient("alice", "wonderland", "SCRAM-SHA-256")
    client.process_server_first_message(scram.first(client.first_message()))
    with pytest.raises(ScramFailed, match="unknown user or wrong password"):
        scram.final(client.final_message())


def test_a_user_stored_before_sha512_authenticates_with_sha256_only() -> None:
    exchange("old-alice", "wonderland", server("SCRAM-SHA-256"))
    scram = server("SCRAM-SHA-512")
    client = ScramClient("old-alice", "wonderland", "SCRAM-SHA-512")
    client.process_server_first_message(scram.first(client.first_message()))
    with pytest.raises(ScramFailed, match="unknown user or wrong password"):
        scram.final(client.final_message())


def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof(mechanism: str) -> None:
    for user, password in [("alice", "rabbit"), ("mallory", "wonderland")]:
        scram = server(mechanism)
        client = ScramClient(user, password, mechanism)
        first = scram.first(client.first_message())  # no difference yet: a salt and a count either way
        assert b",s=" in first and b",i=4096" in first
        client.process_server_first_message(first)
        with pytest.raises(ScramFailed, match="unknown user or wrong password"):
            scram.final(client.final_message())
        assert scram.user is None


def test_an_unknown_user_gets_the_same_salt_every_time() -> None:
    """A fresh salt per attempt would tell a name that is no account from one that is."""
    firsts = [server().first(b"n,,n=mallory,r=abc").split(b",")[1] for _ in range(2)]
    assert firsts[0] == firsts[1]


def test_a_name_with_escaped_characters_is_the_user_it_names(mechanism: str) -> None:
    scram = server(mechanism)
    client = ScramClient("a=2Cb=3Dc", "odd", mechanism)  # kafka-python sends the name as given: escape it
    client.process_server_first_message(scram.first(client.first_message()))
    scram.final(client.final_message())
    assert scram.user == "a,b=c"


@pytest.mark.parametrize("first, why", [
    (b"p=tls-unique,,n=alice,r=x", "channel binding"),
    (b"n,,n=alice", "n=<user>,r=<nonce>"),
    (b"n,,n=alice,r=x,tokenauth=true", "extensions"),
    (b"n,a=bob,n=alice,r=x", "authorization id"),
    (b"n,,n=al=ice,r=x", "malformed SCRAM username"),
    (b"\xff", "not UTF-8"),
])
def test_a_malformed_or_unserved_first_message_is_refused_saying_why(first: bytes, why: str) -> None:
    with pytest.raises(ScramFailed, match=why):
        server().first(first)


def test_a_final_message_that_does_not_continue_the_exchange_is_refused() -> None:
    scram = server()
    client = ScramClient("alice", "wonderland", "SCRAM-SHA-256")
    client.process_server_first_message(scram.first(client.first_message()))
    final = client.final_message().replace(b"servernonce123", b"othernonce")
    with pytest.raises(ScramFailed, match="nonce"):
        scram.final(final)
