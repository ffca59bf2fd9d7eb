"""A client's retry of a CreateTopics whose first attempt was cut off by its deadline but
did create the topic: the controller names the topic's id in its TOPIC_ALREADY_EXISTS answer
only when the topic has the very shape asked for, and the client reads that answer to a
retry as success. Any other existing topic stays an error; a topic is never seen half made."""

from __future__ import annotations

import grpc
import pytest

from metadata_quorum import topic_admin
from metadata_quorum.controller_client import ControllerClient, retried_create_answer
from metadata_quorum.controller_router import ControllerError
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, topic_ids


def request(partitions: int, rf: int) -> pb.CreateTopicsRequest:
    return pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name="scale-0", num_partitions=partitions, replication_factor=rf)])


def test_a_retry_that_finds_its_own_complete_topic_answers_success() -> None:
    image = cluster()
    first = topic_admin.create_topics(image, request(1200, 3), topic_ids())  # three entries of partitions
    assert first.entry_starts, "a creation large enough to span several entries"
    image = commit(image, first)
    created_id = first.response.topics[0].topic_id

    retry = topic_admin.create_topics(image, request(1200, 3), topic_ids())
    (result,) = retry.response.topics
    assert not retry.records
    assert (result.error_code, result.topic_id) == (common.TOPIC_ALREADY_EXISTS, created_id)
    (answered,) = retried_create_answer(retry.response).topics
    assert (answered.error_code, answered.topic_id, answered.error_message) == (common.NONE, created_id, "")
    assert result.error_code == common.TOPIC_ALREADY_EXISTS, "the controller's own answer is left as it was"


def test_an_existing_topic_of_another_shape_stays_an_error_even_on_a_retry() -> None:
    image = cluster()
    image = commit(image, topic_admin.create_topics(image, request(10, 3), topic_ids()))
    for other in (request(12, 3), request(10, 2)):
        (result,) = topic_admin.create_topics(image, other, topic_ids()).response.topics
        assert result.error_code == common.TOPIC_ALREADY_EXISTS and not result.topic_id
        assert "already exists with 10 partitions at replication factor 3" in result.error_message
        (answered,) = retried_create_answer(pb.CreateTopicsResponse(topics=[result])).topics
        assert answered.error_code == common.TOPIC_ALREADY_EXISTS


def test_a_first_attempt_still_says_the_topic_exists() -> None:
    """Without a cut-off attempt the client does not reinterpret the answer: creating a topic
    that exists is an error, whatever its shape (the client raises on it)."""
    image = cluster()
    image = commit(image, topic_admin.create_topics(image, request(4, 3), topic_ids()))
    (result,) = topic_admin.create_topics(image, request(4, 3), topic_ids()).response.topics
    assert result.error_code == common.TOPIC_ALREADY_EXISTS
    assert "choose another name or delete it first" in result.error_message


class _DeadlineExceeded(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "deadline exceeded"


class _Stub:
    """CreateTopics whose first attempts are cut off by their deadline, then answered."""

    def __init__(self, cut_offs: int, answer: pb.TopicResult) -> None:
        self.cut_offs, self.answer, self.calls = cut_offs, answer, 0

    def CreateTopics(self, request, timeout):
        self.calls += 1
        if self.calls <= self.cut_offs:
            raise _DeadlineExceeded()
        return pb.CreateTopicsResponse(topics=[self.answer])


@pytest.mark.parametrize("cut_offs, created", [(1, True), (0, False)], ids=["retried", "first-attempt"])
def test_the_client_reads_already_exists_with_the_id_as_success_only_on_a_retry(monkeypatch: pytest.MonkeyPatch, cut_offs: int, created: bool) -> None:
    exists = pb.TopicResult(name="scale-0", topic_id="tid", error_code=common.TOPIC_ALREADY_EXISTS, error_message="topic 'scale-0' already exists")
    stub = _Stub(cut_offs, exists)
    client = ControllerClient("127.0.0.1:1", timeout_s=30)
    monkeypatch.setattr(client, "_stub", lambda endpoint: stub)
    monkeypatch.setattr(client._router, "on_unreachable", lambda: 0.0)
    with client:
        if created:
            assert client.create_topic("scale-0", 2500, 3) == "tid"
        else:
            with pytest.raises(ControllerError) as failed:
                client.create_topic("scale-0", 2500, 3)
            assert failed.value.code == common.TOPIC_ALREADY_EXISTS
    assert stub.calls == cut_offs + 1
