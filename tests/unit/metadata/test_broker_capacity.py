"""Broker capacity: each broker registers how many replicas it can host, and the controller
refuses creations, partition increases and reassignments that would go past it, whole."""

from __future__ import annotations

from metadata_quorum import reassignment, topic_admin
from metadata_quorum.broker_capacity import replica_counts
from metadata_quorum.delta import image_from_snapshot
from metadata_quorum.image import image_to_records
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, topic_ids, with_topic


def create(image, *topics: tuple[str, int, int], validate_only: bool = False):
    request = pb.CreateTopicsRequest(
        topics=[pb.CreateTopicsRequest.Topic(name=n, num_partitions=p, replication_factor=rf) for n, p, rf in topics],
        validate_only=validate_only,
    )
    return topic_admin.create_topics(image, request, topic_ids())


def test_the_registered_capacity_is_in_the_image_and_its_snapshot() -> None:
    image = cluster(max_replicas=10)
    assert {b.max_replicas for b in image.brokers.values()} == {10}
    again = image_from_snapshot(image.cluster_id, image_to_records(image), image.offset)
    assert {b.max_replicas for b in again.brokers.values()} == {10}


def test_a_topic_that_fits_is_created_up_to_the_last_replica() -> None:
    image = commit(cluster(max_replicas=10), create(cluster(max_replicas=10), ("t", 10, 3)))
    assert replica_counts(image) == {1: 10, 2: 10, 3: 10}


def test_a_topic_past_a_broker_capacity_is_refused_whole_naming_broker_limit_and_count() -> None:
    image = with_topic(cluster(max_replicas=10), "old", 4, 3)
    decision = create(image, ("t", 7, 3))
    result = decision.response.topics[0]
    assert result.error_code == common.BROKER_CAPACITY_EXCEEDED
    assert "would put 11 replicas on broker 1 (4 now + 7)" in result.error_message
    assert "capacity of 10" in result.error_message and "--max-replicas" in result.error_message
    assert decision.records == ()  # nothing half created
    assert create(image, ("t", 7, 3), validate_only=True).response.topics[0].error_code == common.BROKER_CAPACITY_EXCEEDED


def test_topics_earlier_in_a_request_count_against_those_after() -> None:
    decision = create(cluster(max_replicas=10), ("a", 6, 3), ("b", 6, 3), ("c", 4, 3))
    assert [t.error_code for t in decision.response.topics] == [common.NONE, common.BROKER_CAPACITY_EXCEEDED, common.NONE]
    image = commit(cluster(max_replicas=10), decision)
    assert sorted(image.topics) == ["a", "c"] and replica_counts(image) == {1: 10, 2: 10, 3: 10}


def test_brokers_stating_no_limit_take_any_number() -> None:
    assert create(cluster(), ("t", 500, 3)).response.topics[0].error_code == common.NONE


def test_a_partition_increase_past_capacity_is_refused() -> None:
    image = with_topic(cluster(max_replicas=10), "t", 8, 3)
    grow = lambda total: topic_admin.create_partitions(image, pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsRequest.Topic(name="t", total_count=total)]))
    refused = grow(11)
    assert refused.response.topics[0].error_code == common.BROKER_CAPACITY_EXCEEDED and refused.records == ()
    assert "growing topic 't' from 8 to 11 partitions would put 11 replicas" in refused.response.topics[0].error_message
    assert grow(10).response.topics[0].error_code == common.NONE


def test_a_reassignment_onto_a_full_broker_is_refused() -> None:
    image = commit(cluster(max_replicas=2), create(cluster(max_replicas=2), ("spread", 3, 1), ("t", 1, 1)))
    full = image.topics["t"].partitions[0].replicas[0]  # holds a spread partition and t-0: 2 of 2
    elsewhere = next(p for p in image.topics["spread"].partitions.values() if p.replicas[0] != full)
    move = lambda target: reassignment.alter_partition_reassignments(
        image, pb.AlterPartitionReassignmentsRequest(reassignments=[pb.AlterPartitionReassignmentsRequest.Reassignment(
            topic="spread", partition=elsewhere.partition, replicas=pb.BrokerIdList(ids=target))]))
    refused = move([full])
    assert refused.response.partitions[0].error_code == common.BROKER_CAPACITY_EXCEEDED and refused.records == ()
    assert f"moving spread-{elsewhere.partition} to [{full}] would put 3 replicas on broker {full} (2 now + 1)" in refused.response.partitions[0].error_message
    assert move([elsewhere.replicas[0]]).response.partitions[0].error_code == common.NONE  # staying put adds nothing
