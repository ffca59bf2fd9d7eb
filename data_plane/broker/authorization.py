"""The broker's ACL checks, one call per BrokerService handler (docs/security.md, the table).

Produce, Fetch, ListOffsets and DeleteRecords answer a refused partition in its own entry
(TOPIC_AUTHORIZATION_FAILED, naming the principal, operation and topic, and the
`kraftlog acls create` that would allow it) and serve the others; a Produce carrying a
transactional id its principal may not WRITE, or transactional batches and no transactional
id, is refused as a whole (TRANSACTIONAL_ID_AUTHORIZATION_FAILED in every partition's entry); Metadata lists only the
topics the principal may DESCRIBE, and answers a topic it names without DESCRIBE with
TOPIC_AUTHORIZATION_FAILED; the replication stream, repair reads and DescribeLogs are
for brokers (CLUSTER_ACTION on the cluster).
"""

from __future__ import annotations

import inspect
from typing import AsyncIterator, Awaitable, Callable, Sequence, TypeVar

from data_plane.partition_errors import PartitionError
from data_plane.requests import ProduceItem
from data_plane.record_batch import CorruptBatchError, iter_headers
from server_common.errors import ErrorCode
from kraftlog_proto import broker_pb2
from server_common.authorization import AccessControl

Item = TypeVar("Item")
Answer = TypeVar("Answer")


async def serve_authorized(access: AccessControl, operation: str, items: Sequence[Item], topic_of: Callable[[Item], tuple[str, int]],
                           serve: Callable[[list[Item]], Awaitable[list[Answer]] | list[Answer]], refused: Callable[[str, int, PartitionError], Answer]) -> list[Answer]:
    """The answers in ``items``' order: ``serve`` answers the items the call may ``operation``
    on their topic, ``refused`` builds the answer of each other one. ``serve`` is awaited here,
    not through a helper: a produce's every call below stands one frame lower for each."""
    refusals: dict[int, PartitionError] = {}
    if access.enabled:
        for index, item in enumerate(items):
            found = access.first_refusal(operation, "topic", (topic_of(item)[0],))
            if found is not None:
                refusals[index] = PartitionError(ErrorCode(found[0]), found[1])
    allowed = [item for index, item in enumerate(items) if index not in refusals]
    answers: Awaitable[list[Answer]] | list[Answer] = serve(allowed) if allowed or not refusals else []
    served = await answers if inspect.isawaitable(answers) else answers
    if not refusals:
        return served
    answered = iter(served)
    return [refused(*topic_of(item), refusals[index]) if index in refusals else next(answered) for index, item in enumerate(items)]


def transactional_refusal(access: AccessControl, transactional_id: str, items: Sequence[ProduceItem]) -> PartitionError | None:
    """The refusal of a whole Produce that carries a transactional id its principal may not
    WRITE, or transactional batches and no transactional id (Kafka's
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, in both cases): WRITE on a
    topic allows writing to it, not writing as the transactional producer of an id the
    principal was not given, and a transactional batch without an id names none it may write
    as (nor one the leader could ask the coordinator about). None when allowed."""
    if not transactional_id:
        if not any(_carries_transactional(item.batches) for item in items):
            return None
        return PartitionError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              "transactional batches in a produce without transactional_id: set the producer's "
                              "transactional id in the request (and the principal needs WRITE on it)")
    found = access.first_refusal("write", "transactional_id", (transactional_id,))
    return None if found is None else PartitionError(ErrorCode(found[0]), found[1])


def _carries_transactional(batches: bytes) -> bool:
    """Whether any batch has the transactional bit (a corrupt buffer is left to the append,
    which refuses it in its partition's entry)."""
    try:
        return any(header.is_transactional for _, header in iter_headers(batches))
    except CorruptBatchError:
        return False


async def readable_stream(access: AccessControl, requests: AsyncIterator[broker_pb2.ConsumeRequest], context) -> AsyncIterator[broker_pb2.ConsumeRequest]:
    """A Consume stream's requests, after its open was checked: READ on every topic it names,
    else the stream ends with PERMISSION_DENIED (a stream has no per-partition answer to refuse in)."""
    async for request in requests:
        if request.HasField("open"):
            await access.abort_if_refused(context, "read", "topic", {t.topic for t in request.open.topics})
        yield request


def describable(access: AccessControl, response: broker_pb2.MetadataResponse, named: bool) -> broker_pb2.MetadataResponse:
    """``response`` as the call may see it, as Kafka answers: a topic the call may not
    DESCRIBE is left out of a listing of every topic; a topic the request ``named`` is answered
    with TOPIC_AUTHORIZATION_FAILED and nothing else (whether it exists or not, so the answer
    does not tell), so a client can say why instead of "unknown topic"."""
    if not access.enabled:
        return response
    for topic in [t for t in response.topics if not access.allows("describe", "topic", t.name)]:
        if not named:
            response.topics.remove(topic)
            continue
        name = topic.name
        code, message = access.first_refusal("describe", "topic", (name,))
        topic.Clear()
        topic.name, topic.error_code, topic.error_message = name, code, message
    return response
