"""The door's SCRAM-SHA-256 server (data_plane/kafka/scram_server.py) against an independent
client: kafka-python's ``ScramClient``, the one its consumers and producers authenticate with."""

from __future__ import annotations

import pytest
from kafka.net.sasl.scram import ScramClient

from data_plane.kafka.scram_server import ScramFailed, ScramServer
from server_common.scram import derive

USERS = {"alice": derive("wonderland", iterations=4096), "a,b=c": derive("odd", iterations=4096)}


def server() -> ScramServer:
    return ScramServer(USERS.get, "servernonce123", b"broker secret")


def exchange(user: str, password: str, scram: ScramServer) -> ScramClient:
    client = ScramClient(user, password, "SCRAM-SHA-256")
    client.process_server_first_message(scram.first(client.first_message()))
    client.process_server_final_message(scram.final(client.final_message()))  # raises on a wrong server signature
    return client


def test_the_right_password_authenticates_and_the_server_proves_it_knows_the_key() -> None:
    scram = server()
    exchange("alice", "wonderland", scram)
    assert scram.user == "alice"


def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof() -> None:
    for user, password in [("alice", "rabbit"), ("mallory", "wonderland")]:
        scram = server()
        client = ScramClient(user, password, "SCRAM-SHA-256")
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


def test_a_name_with_escaped_characters_is_the_user_it_names() -> None:
    scram = server()
    client = ScramClient("a=2Cb=3Dc", "odd", "SCRAM-SHA-256")  # kafka-python sends the name as given: escape it
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
