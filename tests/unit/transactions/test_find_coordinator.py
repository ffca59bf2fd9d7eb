"""FindCoordinator with key_type TRANSACTION: answered from `__transaction_state` with the same
CRC-32 placement as groups, and the topic created (compacted) on first use."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from data_plane.coordination.internal_topic import InternalTopic
from server_common.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, offsets_partition
from data_plane.groups.service import GroupCoordinatorService
from server_common.errors import ErrorCode
from kraftlog_proto import controller_pb2, group_pb2


def image(topics: dict[str, int]):
    brokers = {i: SimpleNamespace(host=f"h{i}", port=9000 + i, fenced=False) for i in (1, 2, 3)}
    return SimpleNamespace(brokers=brokers, topics={
        name: SimpleNamespace(partitions={i: SimpleNamespace(leader=1 + i % 3) for i in range(n)}) for name, n in topics.items()})


def test_transactional_ids_are_placed_on_the_transaction_state_topic_with_the_group_hash():
    async def scenario():
        current = image({OFFSETS_TOPIC: 2, TRANSACTION_STATE_TOPIC: 5})
        created: list[controller_pb2.CreateTopicsRequest] = []
        async def create(request):
            created.append(request)
            return controller_pb2.CreateTopicsResponse()
        service = GroupCoordinatorService(None, InternalTopic(1, 2, lambda: current, create), None,
                                          InternalTopic(1, 5, lambda: current, create, TRANSACTION_STATE_TOPIC))
        answer = await service.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=["tx-a", "tx-b"], key_type=group_pb2.TRANSACTION), None)
        for found in answer.coordinators:
            assert found.error_code == ErrorCode.NONE
            assert found.node_id == 1 + offsets_partition(found.key, 5) % 3
        group = await service.FindCoordinator(group_pb2.FindCoordinatorRequest(keys=["tx-a"], key_type=group_pb2.GROUP), None)
        assert group.coordinators[0].node_id == 1 + offsets_partition("tx-a", 2) % 3  # the offsets topic, not the transaction one
        assert not created
    asyncio.run(scenario())


def test_a_missing_transaction_state_topic_is_created_compacted():
    async def scenario():
        created: list[controller_pb2.CreateTopicsRequest] = []
        async def create(request):
            created.append(request)
            return controller_pb2.CreateTopicsResponse()
        topic = InternalTopic(1, 7, lambda: image({}), create, TRANSACTION_STATE_TOPIC)
        [answer] = topic.find(["tx"])
        assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and TRANSACTION_STATE_TOPIC in answer.error_message
        await topic._creating
        [request] = created
        assert request.topics[0].name == TRANSACTION_STATE_TOPIC and request.topics[0].num_partitions == 7
        assert request.topics[0].replication_factor == 3 and request.topics[0].configs["cleanup.policy"] == "compact"
    asyncio.run(scenario())
