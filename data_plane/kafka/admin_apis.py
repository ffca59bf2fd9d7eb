"""CreateTopics and DeleteTopics on the Kafka door: forwarded to the active controller through
the broker's own controller link, after the same ACL check the controller makes of a gRPC
caller (CREATE, DELETE on the topic), made here for the Kafka client's principal, since the
controller sees the broker's. Per topic, as Kafka answers: a refused topic does not stop the
others."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Awaitable, Callable, NamedTuple

from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.entities import NO_THROTTLE, build, millis, response_type, sibling
from data_plane.kafka.error_codes import to_kafka as kafka_code
from kraftlog_proto import controller_pb2
from server_common.authorization import AccessControl

CREATE_TOPICS, DELETE_TOPICS = 19, 20
KAFKA_DEFAULT_PARTITIONS = 1  # Kafka's num.partitions, for a CreateTopics that says -1
KAFKA_DEFAULT_REPLICATION = 1  # Kafka's default.replication.factor, likewise


class Answer(NamedTuple):
    """One topic's answer."""

    code: KafkaError
    message: str | None
    topic_id: str = ""


@dataclass
class AdminApis:
    access: AccessControl
    create_topics: Callable[..., Awaitable[controller_pb2.CreateTopicsResponse]]
    delete_topics: Callable[..., Awaitable[controller_pb2.DeleteTopicsResponse]]

    async def create(self, request):
        answers, wanted = screened(self.access, "create", request.topics, "give num_partitions and replication_factor instead",
                                   lambda t: controller_pb2.CreateTopicsRequest.Topic(
                                       name=t.name, num_partitions=KAFKA_DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions,
                                       replication_factor=KAFKA_DEFAULT_REPLICATION if t.replication_factor == -1 else t.replication_factor,
                                       configs={c.name: c.value for c in t.configs if c.value is not None}))
        if wanted:
            answers.update(await forward(self.create_topics, controller_pb2.CreateTopicsRequest(
                topics=wanted, validate_only=getattr(request, "validate_only", False)), [t.name for t in wanted], millis(request.timeout)))
        out = response_type(request)
        entry = sibling(out, "CreatableTopicResult")
        by_name = {t.name: t for t in request.topics}
        return build(out, throttle_time=NO_THROTTLE, topics=tuple(
            build(entry, name=name, error_code=a.code, error_message=a.message, topic_config_error_code=0,
                  topic_id=uuid.UUID(a.topic_id) if a.topic_id else uuid.UUID(int=0),
                  num_partitions=by_name[name].num_partitions, replication_factor=by_name[name].replication_factor, configs=None)
            for name, a in answers.items()))

    async def delete(self, request):
        names = list(request.topic_names)
        answers = refusals(self.access, "delete", names)
        allowed = [n for n in names if n not in answers]
        if allowed:
            answers.update(await forward(self.delete_topics, controller_pb2.DeleteTopicsRequest(names=allowed), allowed,
                                               millis(request.timeout)))
        out = response_type(request)
        entry = sibling(out, "DeletableTopicResult")
        return build(out, throttle_time=NO_THROTTLE, responses=tuple(
            build(entry, name=name, error_code=answers[name].code, error_message=answers[name].message) for name in names))


def refusals(access: AccessControl, operation: str, names: list[str]) -> dict[str, Answer]:
    """The topics of ``names`` the Kafka client may not ``operation``, with the refusal."""
    refused = {}
    for name in names:
        found = access.first_refusal(operation, "topic", (name,))
        if found is not None:
            refused[name] = Answer(kafka_code(found[0]), found[1])
    return refused


def screened(access: AccessControl, operation: str, topics, give_instead: str, entry: Callable) -> tuple[dict[str, Answer], list]:
    """The requested topics refused here (an ACL, a manual replica assignment), and the
    controller request's ``entry`` for each of the others."""
    answers = refusals(access, operation, [t.name for t in topics])
    wanted = []
    for t in topics:
        if t.name in answers:
            continue
        if t.assignments:
            answers[t.name] = Answer(KafkaError.invalid_request, f"replica assignments are chosen by kraftlog's controller: {give_instead}")
            continue
        wanted.append(entry(t))
    return answers, wanted


async def forward(call, request, names: list[str], timeout_ms: int) -> dict[str, Answer]:
    """The controller's answer per topic; a call that fails as a whole answers every topic with its error."""
    try:
        response = await call(request, max(timeout_ms, 1_000) / 1000)
    except Exception as exc:  # the controllers unreachable past the deadline: retriable
        return {name: Answer(KafkaError.request_timed_out, f"the controllers did not answer ({exc}): retry") for name in names}
    if response.error_code:
        return {name: Answer(kafka_code(response.error_code), response.error_message) for name in names}
    return {t.name: Answer(kafka_code(t.error_code), t.error_message or None, t.topic_id) for t in response.topics}
