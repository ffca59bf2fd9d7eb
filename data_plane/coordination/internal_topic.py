"""An internal coordinator topic (`__consumer_offsets`, or `__transaction_state` for the
transaction coordinator): created through the controller on the first FindCoordinator that
finds it missing, and the answer to FindCoordinator from the image.

Replication factor min(3, unfenced brokers), `cleanup.policy=compact` (the latest record of
each key is the state), `min.insync.replicas` min(2, RF) so an acknowledged group write
survives the loss of one replica whenever there are three.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import structlog

from server_common.internal_topics import OFFSETS_TOPIC, offsets_partition
from server_common.errors import ErrorCode
from kraftlog_proto import controller_pb2, group_pb2

log = structlog.get_logger("groups")

CreateTopics = Callable[[controller_pb2.CreateTopicsRequest], Awaitable[controller_pb2.CreateTopicsResponse]]


def creation_request(partitions: int, live_brokers: int, name: str = OFFSETS_TOPIC) -> controller_pb2.CreateTopicsRequest:
    replication = max(1, min(3, live_brokers))
    configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, replication))}
    topic = controller_pb2.CreateTopicsRequest.Topic(name=name, num_partitions=partitions,
                                                     replication_factor=replication, configs=configs)
    return controller_pb2.CreateTopicsRequest(topics=[topic])


class InternalTopic:
    """Answers FindCoordinator; creates the topic once (one creation in flight at a time)."""

    def __init__(self, broker_id: int, partitions: int, image: Callable[[], object], create_topics: CreateTopics,
                 name: str = OFFSETS_TOPIC) -> None:
        self.broker_id = broker_id
        self.name = name
        self.partitions = partitions
        self._image = image
        self._create_topics = create_topics
        self._creating: asyncio.Task | None = None
        self._log = log.bind(broker_id=broker_id)

    def find(self, keys: list[str]) -> list[group_pb2.Coordinator]:
        image = self._image()
        topic = image.topics.get(self.name) if image is not None else None
        if topic is None:
            self._ensure_created(image)
            return [_unavailable(key, f"the {self.name} topic is being created: retry FindCoordinator shortly") for key in keys]
        answers = []
        for key in keys:
            index = offsets_partition(key, len(topic.partitions))
            leader = topic.partitions[index].leader
            broker = image.brokers.get(leader)
            if leader < 0 or broker is None or broker.fenced:
                answers.append(_unavailable(key, f"{self.name}-{index} has no leader right now: retry FindCoordinator shortly"))
            else:
                answers.append(group_pb2.Coordinator(key=key, node_id=leader, host=broker.host, port=broker.port))
        return answers

    def _ensure_created(self, image) -> None:
        if self._creating is not None and not self._creating.done():
            return
        live = sum(1 for b in image.brokers.values() if not b.fenced) if image is not None else 0
        if live == 0:
            return  # no metadata yet: the next FindCoordinator tries again
        self._creating = asyncio.ensure_future(self._create(creation_request(self.partitions, live, self.name)))

    async def _create(self, request: controller_pb2.CreateTopicsRequest) -> None:
        try:
            response = await self._create_topics(request)
        except Exception as exc:  # the controller unreachable: the next FindCoordinator tries again
            self._log.warning("creating an internal topic failed", topic=self.name, error=str(exc))
            return
        results = [(t.error_code, t.error_message) for t in response.topics] or [(response.error_code, response.error_message)]
        for code, message in results:
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                self._log.warning("creating an internal topic refused", topic=self.name, error=ErrorCode(code).name, message=message)
                return
        self._log.info("internal topic created", topic=self.name, partitions=request.topics[0].num_partitions,
                       replication_factor=request.topics[0].replication_factor)


def _unavailable(key: str, message: str) -> group_pb2.Coordinator:
    return group_pb2.Coordinator(key=key, node_id=-1, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=message)
