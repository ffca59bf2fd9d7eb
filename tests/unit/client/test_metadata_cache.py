"""Leader lookup from Metadata answers and NOT_LEADER hints."""

import pytest

from data_plane.client.metadata_cache import MetadataCache, parse_bootstrap
from kraftlog_proto import broker_pb2, common_pb2


def response(leader=1, epoch=5, partitions=2, topic_id="id1", brokers=(1, 2)):
    answer = broker_pb2.MetadataResponse(
        cluster_id="c",
        brokers=[common_pb2.BrokerEndpoint(broker_id=b, host="127.0.0.1", port=9000 + b) for b in brokers],
        controllers=[common_pb2.BrokerEndpoint(broker_id=100, host="10.0.0.1", port=7000)],
    )
    topic = answer.topics.add(name="t", topic_id=topic_id)
    for p in range(partitions):
        topic.partitions.add(partition=p, leader_id=leader, leader_epoch=epoch, replicas=[1, 2], isr=[1, 2])
    return answer


def test_leader_lookup():
    cache = MetadataCache("127.0.0.1:9001")
    cache.want(["t"])
    cache.update(response(), now_ms=1)
    leader = cache.leader(("t", 1))
    assert (leader.broker_id, leader.address, leader.leader_epoch) == (1, "127.0.0.1:9001", 5)
    assert cache.partition_count("t") == 2 and cache.leader(("t", 2)) is None
    assert not cache.stale and cache.snapshot.controllers == ("10.0.0.1:7000",)


def test_an_older_leader_epoch_does_not_overwrite_a_newer_one():
    cache = MetadataCache("h:1")
    cache.update(response(leader=2, epoch=6), 1)
    cache.update(response(leader=1, epoch=5), 2)  # a broker lagging in metadata
    assert cache.leader(("t", 0)).broker_id == 2


def test_a_recreated_topic_resets_epochs():
    cache = MetadataCache("h:1")
    cache.update(response(leader=2, epoch=6), 1)
    cache.update(response(leader=1, epoch=0, topic_id="id2"), 2)
    assert cache.leader(("t", 0)).broker_id == 1


def test_leader_hint_moves_the_leader_without_a_refresh():
    cache = MetadataCache("h:1")
    cache.update(response(leader=1, epoch=5, brokers=(1,)), 1)
    endpoint = common_pb2.BrokerEndpoint(broker_id=3, host="127.0.0.1", port=9003)
    cache.apply_leader_hint(("t", 0), common_pb2.LeaderHint(leader_id=3, leader_epoch=6), [endpoint])
    assert cache.leader(("t", 0)) == (3, "127.0.0.1:9003", 6)
    assert cache.leader(("t", 1)).broker_id == 1


def test_useless_hint_forgets_the_leader_and_marks_stale():
    cache = MetadataCache("h:1")
    cache.update(response(), 1)
    cache.apply_leader_hint(("t", 0), common_pb2.LeaderHint(leader_id=-1, leader_epoch=0))
    assert cache.leader(("t", 0)) is None and cache.stale


def test_offline_partition_and_topic_errors():
    cache = MetadataCache("h:1")
    cache.want(["t", "missing"])
    answer = response(leader=-1)
    answer.topics.add(name="missing", error_code=common_pb2.UNKNOWN_TOPIC_OR_PARTITION)
    cache.update(answer, 1)
    assert cache.leader(("t", 0)) is None and cache.stale
    assert cache.topic_error("missing") == "UNKNOWN_TOPIC_OR_PARTITION"


def test_refresh_asks_known_brokers_before_bootstrap():
    cache = MetadataCache("b:1,127.0.0.1:9001")
    cache.update(response(), 1)
    assert list(cache.refresh_addresses()) == ["127.0.0.1:9001", "127.0.0.1:9002", "b:1"]


@pytest.mark.parametrize("bad", ["", "host", "host:port", ":9"])
def test_bad_bootstrap_is_refused(bad):
    with pytest.raises(ValueError):
        parse_bootstrap(bad)
