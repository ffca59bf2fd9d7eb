"""Which failures the client retries, and what it tells the user."""

import grpc
import pytest

from data_plane.client.errors import KraftlogError, from_error_code, from_rpc_error
from kraftlog_proto import common_pb2


@pytest.mark.parametrize(
    "code",
    [
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_LEADER_EPOCH",
        "FENCED_LEADER_EPOCH",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "BROKER_NOT_AVAILABLE",
    ],
)
def test_transient_conditions_are_retriable(code):
    assert KraftlogError(code, "x").retriable


@pytest.mark.parametrize("code", ["MESSAGE_TOO_LARGE", "CORRUPT_MESSAGE", "INVALID_REQUEST", "OFFSET_OUT_OF_RANGE"])
def test_permanent_conditions_are_not_retriable(code):
    assert not KraftlogError(code, "x").retriable


def test_leader_moves_ask_for_a_metadata_refresh_but_replica_shortage_does_not():
    assert KraftlogError("NOT_LEADER_OR_FOLLOWER").refresh_metadata
    assert KraftlogError("FENCED_LEADER_EPOCH").refresh_metadata
    assert not KraftlogError("NOT_ENOUGH_REPLICAS").refresh_metadata


def test_message_names_code_detail_and_advice():
    err = from_error_code(common_pb2.NOT_ENOUGH_REPLICAS, "isr=[1]", "t-0")
    assert err.code == "NOT_ENOUGH_REPLICAS"
    assert "t-0: isr=[1]" in str(err) and "min.insync.replicas" in str(err)


def test_unknown_wire_code_stays_visible():
    assert from_error_code(999, "", "t-0").code == "ERROR_CODE_999"


class _RpcError(grpc.RpcError):
    def __init__(self, status):
        self._status = status

    def code(self):
        return self._status

    def details(self):
        return "details"


def test_grpc_status_mapping():
    assert from_rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE), "h:1").code == "BROKER_NOT_AVAILABLE"
    assert from_rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE), "h:1").retriable
    assert from_rpc_error(_RpcError(grpc.StatusCode.DEADLINE_EXCEEDED), "h:1").code == "REQUEST_TIMED_OUT"
    too_large = from_rpc_error(_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED), "h:1")
    assert too_large.code == "MESSAGE_TOO_LARGE" and not too_large.retriable
    assert not from_rpc_error(_RpcError(grpc.StatusCode.INVALID_ARGUMENT), "h:1").retriable


def test_a_group_coordinator_answer_carries_its_advice_once():
    message = "group billing does not exist here: check the name (kraftlog groups list)"
    assert str(KraftlogError("GROUP_ID_NOT_FOUND", message)) == f"GROUP_ID_NOT_FOUND: {message}"
    # without the broker's message the client's advice stands in
    assert "kraftlog groups list" in str(KraftlogError("GROUP_ID_NOT_FOUND"))


@pytest.mark.parametrize("message, advised, not_advised", [
    # the client's own limit: raising the topic's max.message.bytes or batch_size cannot help
    ("record of 2000 bytes > max_request_size=1000", "kraftlog produce --max-request-size", "batch_size"),
    ("a record of 9 bytes cannot fit in buffer_memory=8", "raise the producer's buffer_memory", "max.message.bytes"),
    ("t-0: batch at position 0 is 2000 bytes, over the topic's max.message.bytes=1000", "kraftlog topics alter NAME --config max.message.bytes=N",
     "max_request_size"),
])
def test_message_too_large_advises_on_the_limit_that_was_hit(message, advised, not_advised):
    error = str(KraftlogError("MESSAGE_TOO_LARGE", message))
    advice = error[len(message):]
    assert advised in advice and not_advised not in advice, error
