"""Topic administration decisions: validation with guidance, placement, one entry per request."""

from __future__ import annotations

import pytest

from metadata_quorum import topic_admin
from metadata_quorum.delta import apply_all, image_from_snapshot
from metadata_quorum.image import RecordRejected, image_to_records
from metadata_quorum.records import ConfigRecord, PartitionRecord, TopicRecord
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, topic_ids, with_topic


def create(image, name="t", partitions=1, rf=1, configs=None, validate_only=False):
    request = pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name=name, num_partitions=partitions, replication_factor=rf, configs=configs or {})], validate_only=validate_only)
    return topic_admin.create_topics(image, request, topic_ids())


@pytest.mark.parametrize(
    "name,partitions,rf,configs,code,text",
    [
        ("", 1, 1, {}, common.INVALID_TOPIC, "empty"),
        (".", 1, 1, {}, common.INVALID_TOPIC, "reserved"),
        ("..", 1, 1, {}, common.INVALID_TOPIC, "reserved"),
        ("a" * 250, 1, 1, {}, common.INVALID_TOPIC, "limit is 249"),
        ("bad name!", 1, 1, {}, common.INVALID_TOPIC, "illegal characters [' ', '!']"),
        ("existing", 1, 1, {}, common.TOPIC_ALREADY_EXISTS, "already exists"),
        ("t", 0, 1, {}, common.INVALID_PARTITIONS, "between 1 and"),
        ("t", 1, 0, {}, common.INVALID_REPLICATION_FACTOR, "at least 1"),
        ("t", 1, 4, {}, common.INVALID_REPLICATION_FACTOR, "start more brokers or lower the replication factor"),
        ("t", 1, 1, {"retention.ms": "soon"}, common.INVALID_CONFIG, "must be an integer"),
        ("t", 1, 1, {"no.such.key": "1"}, common.INVALID_CONFIG, "known keys"),
    ],
)
def test_create_topic_validation(name, partitions, rf, configs, code, text):
    image = with_topic(cluster(), "existing", 1, 1)
    decision = create(image, name, partitions, rf, configs)
    result = decision.response.topics[0]
    assert (result.error_code, decision.records) == (code, ())
    assert text in result.error_message


def test_legal_name_characters():
    assert topic_admin.topic_name_problem("a.B_c-9") is None
    assert topic_admin.topic_name_problem("x" * 249) is None


def test_create_produces_one_entry_with_partitions_then_topic_and_configs():
    decision = create(cluster(), "orders", 3, 2, {"retention.ms": "1000"})
    kinds = [type(r) for r in decision.records]
    assert kinds == [PartitionRecord, PartitionRecord, PartitionRecord, TopicRecord, ConfigRecord]
    assert len(decision.entries()) == 1
    partitions = [r for r in decision.records if isinstance(r, PartitionRecord)]
    assert sorted(p.leader for p in partitions) == [1, 2, 3]
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in partitions)


def test_large_topic_commits_in_bounded_entries_and_appears_whole_with_the_last():
    count = 2 * topic_admin.PARTITIONS_PER_ENTRY_MAX + 7
    decision = create(cluster(), "big", count, 3, {"min.insync.replicas": "2"})
    entries = decision.entries()
    assert len(entries) == 3
    assert all(len(e) <= topic_admin.PARTITIONS_PER_ENTRY_MAX for e in entries[:-1])
    assert [type(r) for r in entries[-1][-2:]] == [TopicRecord, ConfigRecord]
    image = cluster()
    for entry in entries[:-1]:
        image = apply_all(image, entry)
        assert "big" not in image.topics and not image.topics_by_id  # nobody sees half a topic
        assert image_from_snapshot(image.cluster_id, image_to_records(image), image.offset) == image
    image = apply_all(image, entries[-1])
    assert len(image.topics["big"].partitions) == count and not image.pending_partitions
    assert {p.topic for p in image.topics["big"].partitions.values()} == {"big"}
    assert dict(image.configs["big"]) == {"min.insync.replicas": "2"}


def test_an_unfinished_creation_is_abandoned_without_a_trace():
    image = cluster()
    entries = create(image, "big", topic_admin.PARTITIONS_PER_ENTRY_MAX + 1, 3).entries()
    half = apply_all(image, entries[0])
    abandon = topic_admin.abandon_pending_topics(half)
    assert abandon.response == 1
    after = commit(half, abandon)
    assert not after.pending_partitions and "big" not in after.topics
    assert topic_admin.abandon_pending_topics(after).records == ()
    with pytest.raises(RecordRejected):  # the rest of the creation cannot commit any more
        apply_all(after, entries[1])


@pytest.mark.parametrize("rf,value,ok", [(3, "3", True), (3, "4", False), (1, "2", False), (2, "1", True)])
def test_min_insync_replicas_above_the_replication_factor_is_refused_at_creation(rf, value, ok):
    result = create(cluster(), "t", 1, rf, {"min.insync.replicas": value}).response.topics[0]
    assert (result.error_code == common.NONE) == ok
    if not ok:
        assert result.error_code == common.INVALID_CONFIG
        assert f"set it to at most {rf}" in result.error_message


def test_min_insync_replicas_above_the_replication_factor_is_refused_at_alter():
    image = with_topic(cluster(), "t", 2, 2, {"min.insync.replicas": "2"})

    def alter(*ops):
        return topic_admin.alter_configs(image, pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name="t", ops=list(ops))]))

    refused = alter(pb.AlterConfigsRequest.Op(key="min.insync.replicas", value="3"))
    assert refused.records == () and refused.response.topics[0].error_code == common.INVALID_CONFIG
    assert "larger than the replication factor 2" in refused.response.topics[0].error_message
    assert alter(pb.AlterConfigsRequest.Op(key="min.insync.replicas", value="1")).response.topics[0].error_code == common.NONE
    assert alter(pb.AlterConfigsRequest.Op(key="min.insync.replicas", op=pb.AlterConfigsRequest.DELETE)).response.topics[0].error_code == common.NONE


def test_rf_counts_only_usable_brokers():
    from metadata_quorum.records import FenceBrokerRecord

    image = cluster()
    image = apply_all(image, [FenceBrokerRecord(3, image.brokers[3].epoch)])
    assert create(image, rf=3).response.topics[0].error_code == common.INVALID_REPLICATION_FACTOR
    assert create(image, rf=2).response.topics[0].error_code == common.NONE


def test_validate_only_writes_nothing():
    decision = create(cluster(), validate_only=True)
    assert decision.records == () and decision.response.topics[0].error_code == common.NONE


def test_duplicate_in_one_request():
    request = pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name="t", num_partitions=1, replication_factor=1)] * 2)
    results = topic_admin.create_topics(cluster(), request, topic_ids()).response.topics
    assert [r.error_code for r in results] == [common.NONE, common.INVALID_REQUEST]


def test_delete_topics():
    image = with_topic(cluster(), "t", 2, 1, {"retention.ms": "5"})
    decision = topic_admin.delete_topics(image, pb.DeleteTopicsRequest(names=["t", "ghost"]))
    assert [r.error_code for r in decision.response.topics] == [common.NONE, common.UNKNOWN_TOPIC_OR_PARTITION]
    after = commit(image, decision)
    assert "t" not in after.topics and "t" not in after.configs and not after.topics_by_id


def test_create_partitions_grows_only():
    image = with_topic(cluster(), "t", 2, 2)
    grow = topic_admin.create_partitions(image, pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsRequest.Topic(name="t", total_count=5)]))
    after = commit(image, grow)
    assert sorted(after.topics["t"].partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in after.topics["t"].partitions.values())
    shrink = topic_admin.create_partitions(after, pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsRequest.Topic(name="t", total_count=3)]))
    assert shrink.response.topics[0].error_code == common.INVALID_PARTITIONS
    assert "already has 5 partitions" in shrink.response.topics[0].error_message


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_internal_topics_keep_their_partition_count_and_cannot_be_deleted(internal: str) -> None:
    """Whoever asks (the CLI refuses first, another client may not): a coordinator's state is
    found by hashing its id over the count."""
    request = pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name=internal, num_partitions=3, replication_factor=3),
                                             pb.CreateTopicsRequest.Topic(name="t", num_partitions=1, replication_factor=1)])
    image = commit(cluster(), topic_admin.create_topics(cluster(), request, topic_ids()))
    grow = topic_admin.create_partitions(image, pb.CreatePartitionsRequest(topics=[
        pb.CreatePartitionsRequest.Topic(name=internal, total_count=6), pb.CreatePartitionsRequest.Topic(name="t", total_count=2)]))
    assert [r.error_code for r in grow.response.topics] == [common.INVALID_PARTITIONS, common.NONE]
    assert "cannot change" in grow.response.topics[0].error_message
    delete = topic_admin.delete_topics(image, pb.DeleteTopicsRequest(names=[internal, "t"]))
    assert [r.error_code for r in delete.response.topics] == [common.INVALID_REQUEST, common.NONE]
    after = commit(image, delete)
    assert internal in after.topics and len(after.topics[internal].partitions) == 3 and "t" not in after.topics


def test_alter_configs_set_and_delete():
    image = with_topic(cluster(), "t", 1, 1, {"retention.ms": "5"})
    ops = [pb.AlterConfigsRequest.Op(key="retention.ms", op=pb.AlterConfigsRequest.DELETE), pb.AlterConfigsRequest.Op(key="unclean.leader.election.enable", value="TRUE")]
    after = commit(image, topic_admin.alter_configs(image, pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name="t", ops=ops)])))
    assert dict(after.configs["t"]) == {"unclean.leader.election.enable": "true"}
    bad = topic_admin.alter_configs(after, pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name="t", ops=[pb.AlterConfigsRequest.Op(key="segment.bytes", value="1")])]))
    assert bad.response.topics[0].error_code == common.INVALID_CONFIG and bad.records == ()


def test_describe_configs_marks_defaults():
    image = with_topic(cluster(), "t", 1, 1, {"retention.ms": "5"})
    entries = {e.key: e for e in topic_admin.describe_configs(image, pb.DescribeConfigsRequest(topics=["t"])).topics[0].entries}
    assert (entries["retention.ms"].value, entries["retention.ms"].is_default) == ("5", False)
    assert (entries["unclean.leader.election.enable"].value, entries["unclean.leader.election.enable"].is_default) == ("false", True)


def test_preferred_election_moves_leader_back():
    from metadata_quorum.records import PartitionChangeRecord

    image = with_topic(cluster(), "t", 1, 3)
    p = image.partition("t", 0)
    other = p.replicas[1]
    image = apply_all(image, [PartitionChangeRecord(image.topics["t"].topic_id, 0, p.partition_epoch, leader=other)])
    decision = topic_admin.elect_leaders(image, pb.ElectLeadersRequest())
    assert decision.response.partitions[0].leader == p.replicas[0]
    again = topic_admin.elect_leaders(commit(image, decision), pb.ElectLeadersRequest())
    assert again.response.partitions[0].error_code == common.ELECTION_NOT_NEEDED


def test_a_negative_partition_is_an_invalid_request_not_an_unknown_one():
    """UNKNOWN_TOPIC_OR_PARTITION is retriable (a topic just created may not be known yet):
    a client following the retry rules asked about partition -1 until its deadline."""
    image = with_topic(cluster(), "t", 1, 3)
    request = pb.ElectLeadersRequest(topics=[pb.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[-1])])
    [answer] = topic_admin.elect_leaders(image, request).response.partitions
    assert answer.error_code == common.INVALID_REQUEST and "partition numbers are >= 0" in answer.error_message
