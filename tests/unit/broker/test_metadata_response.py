"""Metadata answers that name no topic: a request with ``brokers_only`` (what a client that
wants no topic yet sends, a producer starting) is answered with the brokers and controllers
alone, so its cost does not grow with the cluster's partitions; an empty topic list without it
still lists every topic."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from data_plane.broker.server import BrokerServer
from data_plane.broker.service import BrokerService
from data_plane.client.metadata_cache import MetadataCache
from kraftlog_proto import broker_pb2
from metadata_quorum.delta import apply_all
from metadata_quorum.image import MetadataImage
from metadata_quorum.records import PartitionRecord, RegisterBrokerRecord, TopicRecord

TOPICS = ("a", "b")


def image() -> MetadataImage:
    brokers = apply_all(MetadataImage.empty("c"), [RegisterBrokerRecord(b, -1, "127.0.0.1", 9000 + b, "", f"i{b}", fenced=False)
                                                     for b in (1, 2, 3)])
    records = []
    for name in TOPICS:
        records += [PartitionRecord(f"{name}-id", p, (1, 2, 3), (1, 2, 3), 1, 0, 0) for p in range(2)]
        records.append(TopicRecord(name, f"{name}-id"))
    return apply_all(brokers, records)


def answer(topics: list[str] | None) -> broker_pb2.MetadataResponse:
    """`BrokerServer.metadata_response` over ``image()``, with only what it reads of the server."""
    server = SimpleNamespace(metadata=SimpleNamespace(image=image()), config=SimpleNamespace(broker_id=1, controllers=[]),
                             replicas=SimpleNamespace(unsafe_leaderships=dict))
    return BrokerServer.metadata_response(server, topics)


def test_every_topic_named_or_none():
    assert [t.name for t in answer(None).topics] == list(TOPICS)
    assert [t.name for t in answer(["b"]).topics] == ["b"]
    brokers_only = answer([])
    assert not brokers_only.topics and [b.broker_id for b in brokers_only.brokers] == [1, 2, 3]


def service_asked(request: broker_pb2.MetadataRequest) -> list[str] | None:
    """What `BrokerService.Metadata` asks the server's answer for, given ``request``."""
    asked = []

    def metadata_response(topics):
        asked.append(topics)
        return answer(topics)

    service = BrokerService(SimpleNamespace(), metadata_response, lambda: None)
    asyncio.run(service.Metadata(request, context=None))
    return asked[0]


def test_the_grpc_door_tells_brokers_only_from_every_topic():
    assert service_asked(broker_pb2.MetadataRequest(brokers_only=True)) == []
    assert service_asked(broker_pb2.MetadataRequest()) is None  # the listing of every topic, as before
    assert service_asked(broker_pb2.MetadataRequest(topics=["a"])) == ["a"]


def test_a_client_that_wants_no_topic_asks_for_the_brokers_alone():
    cache = MetadataCache("127.0.0.1:9001")
    assert cache.request() == broker_pb2.MetadataRequest(brokers_only=True)
    cache.want(["t"])
    assert cache.request() == broker_pb2.MetadataRequest(topics=["t"])
