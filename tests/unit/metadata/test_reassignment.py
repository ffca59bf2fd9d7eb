"""Partition reassignment (KIP-455 as Kafka's KRaft controller runs it): the merged replica
set, completion when the leader's AlterPartition brings the new replicas into the ISR (in
the same record), leadership moving off a removed leader, epochs, cancellation, validation."""

from __future__ import annotations

import pytest

from metadata_quorum import broker_decisions as bd
from metadata_quorum import reassignment, topic_admin
from metadata_quorum.delta import apply_all, image_from_snapshot
from metadata_quorum.image import RecordRejected, image_to_records
from metadata_quorum.records import PartitionChangeRecord
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, with_topic


def reassign(image, targets: dict):
    """AlterPartitionReassignments for topic t: {partition: replicas or None (cancel)}."""
    items = [pb.AlterPartitionReassignmentsRequest.Reassignment(topic="t", partition=n, replicas=None if r is None else pb.BrokerIdList(ids=r)) for n, r in targets.items()]
    return reassignment.alter_partition_reassignments(image, pb.AlterPartitionReassignmentsRequest(reassignments=items))


def alter_isr(image, new_isr, partition=0):
    """The leader of t-<partition> proposes ``new_isr``."""
    p = image.partition("t", partition)
    state = pb.AlterPartitionRequest.PartitionState(
        topic="t", partition=partition, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        new_isr=[pb.AlterPartitionRequest.NewIsrReplica(broker_id=b, broker_epoch=image.brokers[b].epoch) for b in new_isr],
    )
    return bd.alter_partition(image, pb.AlterPartitionRequest(broker_id=p.leader, broker_epoch=image.brokers[p.leader].epoch, partitions=[state]))


@pytest.fixture
def placed():
    """t-0 with replication factor 3 on a 4-broker cluster, ISR full; returns (image, replicas, spare broker)."""
    image = with_topic(cluster((1, 2, 3, 4)), "t", 1, 3)
    p = image.partition("t", 0)
    spare = next(b for b in (1, 2, 3, 4) if b not in p.replicas)
    assert p.isr == p.replicas and p.leader == p.replicas[0]
    return image, p.replicas, spare


def test_start_grows_the_replica_set_and_keeps_leader_and_isr(placed):
    image, (a, b, c), d = placed
    decision = reassign(image, {0: [b, c, d]})
    assert len(decision.records) == 1
    after = commit(image, decision)
    p, before = after.partition("t", 0), image.partition("t", 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((b, c, d, a), (d,), (a,))
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (a, (a, b, c), before.leader_epoch, before.partition_epoch + 1)
    result = decision.response.partitions[0]
    assert (result.error_code, list(result.adding_replicas), list(result.removing_replicas)) == (common.NONE, [d], [a])


def test_alter_partition_bringing_the_new_replica_in_sync_completes_and_moves_the_removed_leader(placed):
    image, (a, b, c), d = placed
    image = commit(image, reassign(image, {0: [b, c, d]}))
    before = image.partition("t", 0)
    decision = alter_isr(image, [a, b, c, d])
    assert len(decision.records) == 1, "catch-up and completion are one record"
    p = commit(image, decision).partition("t", 0)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((b, c, d), (b, c, d), (), ())
    assert p.leader == b, "leadership moves to the first target replica in sync"
    assert (p.leader_epoch, p.partition_epoch) == (before.leader_epoch + 1, before.partition_epoch + 1)
    answer = decision.response.partitions[0]
    assert (answer.error_code, answer.leader, list(answer.replicas)) == (common.NONE, b, [b, c, d])


def test_completion_bumps_the_leader_epoch_even_when_the_leader_stays(placed):
    image, (a, b, c), d = placed
    image = commit(image, reassign(image, {0: [a, b, d]}))
    before = image.partition("t", 0)
    decision = alter_isr(image, [a, b, c, d])
    assert decision.records[0].leader == a, "the record names the unchanged leader to start a new epoch"
    p = commit(image, decision).partition("t", 0)
    assert (p.leader, p.replicas, p.isr, p.leader_epoch) == (a, (a, b, d), (a, b, d), before.leader_epoch + 1)


def test_partial_catch_up_does_not_complete():
    image = with_topic(cluster((1, 2, 3, 4, 5)), "t", 1, 3)
    a, b, c = image.partition("t", 0).replicas
    d, e = (x for x in (1, 2, 3, 4, 5) if x not in (a, b, c))
    image = commit(image, reassign(image, {0: [d, e, a]}))
    image = commit(image, alter_isr(image, [a, b, c, d]))
    p = image.partition("t", 0)
    assert (p.adding_replicas, p.isr) == ((d, e), (a, b, c, d)), "e has not caught up yet"
    p = commit(image, alter_isr(image, [a, b, c, d, e])).partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((d, e, a), (a, d, e), a, ())


def test_removing_only_completes_at_once(placed):
    image, (a, b, c), _ = placed
    decision = reassign(image, {0: [a, b]})
    p = commit(image, decision).partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((a, b), (a, b), a, (), ())
    assert decision.response.partitions[0].replicas == [a, b]


def test_reordering_completes_at_once_without_a_new_leader_epoch(placed):
    image, (a, b, c), _ = placed
    p = commit(image, reassign(image, {0: [c, b, a]})).partition("t", 0)
    assert (p.replicas, p.leader, p.leader_epoch) == ((c, b, a), a, image.partition("t", 0).leader_epoch)


def test_same_target_changes_nothing(placed):
    image, replicas, _ = placed
    decision = reassign(image, {0: list(replicas)})
    assert decision.records == () and decision.response.partitions[0].error_code == common.NONE


def test_new_target_keeps_replicas_still_catching_up_as_adding():
    image = with_topic(cluster((1, 2, 3, 4, 5, 6)), "t", 1, 3)
    a, b, c = image.partition("t", 0).replicas
    d, e, f = (x for x in range(1, 7) if x not in (a, b, c))
    image = commit(image, reassign(image, {0: [d, e, f]}))
    image = commit(image, reassign(image, {0: [d, e, b]}))
    p = image.partition("t", 0)
    assert (p.adding_replicas, set(p.removing_replicas)) == ((d, e), {f, a, c})
    assert commit(image, alter_isr(image, [a, b, c, d])).partition("t", 0).adding_replicas == (d, e), "e is not in sync: no completion"


def test_cancel_reverts_to_the_original_replicas(placed):
    image, (a, b, c), d = placed
    image = commit(image, reassign(image, {0: [b, c, d]}))
    image = commit(image, alter_isr(image, [a, b, c]))  # nothing new, ISR unchanged: no record
    p = commit(image, reassign(image, {0: None})).partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((b, c, a), (a, b, c), a, (), ())


def test_cancel_without_a_reassignment_is_refused(placed):
    image, _, _ = placed
    decision = reassign(image, {0: None})
    assert (decision.records, decision.response.partitions[0].error_code) == ((), common.NO_REASSIGNMENT_IN_PROGRESS)


@pytest.mark.parametrize("allowed", [False, True])
def test_cancel_needing_an_unclean_election_only_where_the_topic_allows_it(allowed):
    image = with_topic(cluster((1, 2, 3)), "t", 1, 1, {"unclean.leader.election.enable": str(allowed).lower()})
    (a,) = image.partition("t", 0).replicas
    b, c = (x for x in (1, 2, 3) if x != a)
    image = commit(image, reassign(image, {0: [b, c]}))
    image = commit(image, alter_isr(image, [a, b]))  # b in sync, c not yet
    image = commit(image, topic_admin.elect_leaders(image, pb.ElectLeadersRequest()))  # b, the new first replica, leads
    image = commit(image, alter_isr(image, [b]))  # the leader drops a from the ISR
    assert image.partition("t", 0).isr == (b,), "every in-sync replica is one being added"
    decision = reassign(image, {0: None})
    if not allowed:
        result = decision.response.partitions[0]
        assert (decision.records, result.error_code) == ((), common.INVALID_REQUEST)
        assert "unclean.leader.election.enable=true" in result.error_message
        return
    assert decision.records[0].unclean_leader_election
    p = commit(image, decision).partition("t", 0)
    assert (p.replicas, p.leader, p.isr, p.unclean_leader_elections) == ((a,), a, (a,), 1)


@pytest.mark.parametrize(
    "targets,code,text",
    [
        ({0: []}, common.INVALID_REQUEST, "is empty"),
        ({0: [1, 1]}, common.INVALID_REQUEST, "names a broker twice"),
        ({0: [1, 9]}, common.INVALID_REQUEST, "brokers [9] are not registered"),
        ({7: [1]}, common.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
    ],
)
def test_invalid_targets_are_refused_with_guidance(placed, targets, code, text):
    image, _, _ = placed
    decision = reassign(image, targets)
    result = decision.response.partitions[0]
    assert (decision.records, result.error_code) == ((), code)
    assert text in result.error_message


def test_a_partition_listed_twice_is_refused_once(placed):
    image, (a, b, c), _ = placed
    items = [pb.AlterPartitionReassignmentsRequest.Reassignment(topic="t", partition=0, replicas=pb.BrokerIdList(ids=r)) for r in ([a, b], [a, c])]
    decision = reassignment.alter_partition_reassignments(image, pb.AlterPartitionReassignmentsRequest(reassignments=items))
    assert [r.error_code for r in decision.response.partitions] == [common.NONE, common.INVALID_REQUEST]
    assert commit(image, decision).partition("t", 0).replicas == (a, b)


def test_list_shows_only_partitions_in_progress():
    image = with_topic(cluster((1, 2, 3, 4)), "t", 2, 3)
    a, b, c = image.partition("t", 0).replicas
    d = next(x for x in (1, 2, 3, 4) if x not in (a, b, c))
    image = commit(image, reassign(image, {0: [b, c, d]}))
    listed = reassignment.list_partition_reassignments(image, pb.ListPartitionReassignmentsRequest()).partitions
    assert [(r.topic, r.partition, list(r.adding_replicas), list(r.removing_replicas)) for r in listed] == [("t", 0, [d], [a])]
    other = pb.ListPartitionReassignmentsRequest(topics=[pb.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[1])])
    assert list(reassignment.list_partition_reassignments(image, other).partitions) == []


def test_reassignment_state_survives_a_snapshot_and_new_partitions_use_the_target_size(placed):
    image, (a, b, c), d = placed
    image = commit(image, reassign(image, {0: [b, c, d]}))
    restored = image_from_snapshot(image.cluster_id, image_to_records(image), image.offset)
    assert restored == image
    grown = commit(image, topic_admin.create_partitions(image, pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsRequest.Topic(name="t", total_count=2)])))
    assert len(grown.partition("t", 1).replicas) == 3


def test_apply_rejects_replica_sets_that_do_not_fit(placed):
    image, (a, b, c), d = placed
    topic_id = image.topics["t"].topic_id
    epoch = image.partition("t", 0).partition_epoch
    with pytest.raises(RecordRejected):
        apply_all(image, [PartitionChangeRecord(topic_id, 0, epoch, adding_replicas=(d,))])  # d is not a replica
    with pytest.raises(RecordRejected):
        apply_all(image, [PartitionChangeRecord(topic_id, 0, epoch, adding_replicas=(a,), removing_replicas=(a,))])
