"""The fuzz test's answer check (tests/integration/proto_fuzz.py) flags each kind of answer a
client cannot act on, and passes the documented ones."""

from __future__ import annotations

import grpc
import pytest

from kraftlog_proto import broker_pb2, common_pb2, controller_pb2
from tests.integration.proto_fuzz import answer_problems


class Refusal(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def fetch_answer(code: int, message: str) -> broker_pb2.FetchResponse:
    partition = broker_pb2.FetchPartitionResponse(partition=0, error_code=code, error_message=message)
    return broker_pb2.FetchResponse(topics=[broker_pb2.FetchTopicResponse(topic="t", partitions=[partition])])


@pytest.mark.parametrize("answer, may_wait, flagged", [
    (Refusal(grpc.StatusCode.UNKNOWN, "Unexpected <class 'AssertionError'>: -2"), False, "UNKNOWN"),
    (Refusal(grpc.StatusCode.INVALID_ARGUMENT, "Exception calling application: boom"), False, "internal error"),
    (Refusal(grpc.StatusCode.INVALID_ARGUMENT, " "), False, "without a message"),
    (Refusal(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), False, "DEADLINE_EXCEEDED"),
    (Refusal(grpc.StatusCode.FAILED_PRECONDITION, "no"), False, "FAILED_PRECONDITION"),
    (fetch_answer(common_pb2.UNKNOWN_SERVER_ERROR, "KeyError: 3"), False, "UNKNOWN_SERVER_ERROR"),
    (fetch_answer(common_pb2.OFFSET_OUT_OF_RANGE, ""), False, "without an error_message"),
    (fetch_answer(9999, "what"), False, "is not an ErrorCode"),
    (controller_pb2.CreateTopicsResponse(topics=[controller_pb2.TopicResult(name="t", error_code=common_pb2.INVALID_TOPIC)]), False, "without an error_message"),
])
def test_answers_a_client_cannot_act_on_are_flagged(answer, may_wait, flagged) -> None:
    problems = answer_problems(answer, may_wait)
    assert any(flagged in p for p in problems), problems


@pytest.mark.parametrize("answer, may_wait", [
    (Refusal(grpc.StatusCode.INVALID_ARGUMENT, "acks must be -1 (all), 0 or 1, got 7"), False),
    (Refusal(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), True),
    (fetch_answer(common_pb2.OFFSET_OUT_OF_RANGE, "offset 9 is above the log end 3: ListOffsets and restart"), False),
    (fetch_answer(common_pb2.NONE, ""), False),
])
def test_documented_answers_pass(answer, may_wait) -> None:
    assert answer_problems(answer, may_wait) == []
