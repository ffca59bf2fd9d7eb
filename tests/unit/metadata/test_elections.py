"""Elections: unclean elections only where allowed, logged and counted in metadata; enabling
unclean elections elects offline partitions; automatic preferred-leader rebalancing; a
fenced or shutting-down broker loses every leadership and ISR membership in one entry."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from metadata_quorum import broker_decisions as bd
from metadata_quorum import election, topic_admin
from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.delta import apply_all, image_from_snapshot
from metadata_quorum.image import NO_LEADER, RecordRejected, image_to_records
from metadata_quorum.decision import Decision
from metadata_quorum.records import BrokerRegistrationChangeRecord, FenceBrokerRecord, PartitionChangeRecord
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, with_topic

SESSION_MS = 9000


def heartbeat(image, hb, broker_id, now_ms, **flags):
    request = pb.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=image.brokers[broker_id].epoch, current_metadata_offset=image.offset, **flags)
    return bd.broker_heartbeat(image, request, hb, now_ms)


def change(image, partition=0, **fields):
    """Apply a PartitionChangeRecord to t-<partition> directly (a state the test needs)."""
    p = image.partition("t", partition)
    return apply_all(image, [PartitionChangeRecord(image.topics["t"].topic_id, partition, p.partition_epoch, **fields)])


def offline_with_live_out_of_sync_replica(unclean: str):
    """t-0 on brokers (1, 2): ISR shrunk to (1,), broker 2 fenced, then broker 1's session
    expires (the partition goes offline, broker 1 from the ISR into the ELR), then broker 2
    heartbeats again."""
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2), hb), "t", 1, 2, {"unclean.leader.election.enable": unclean})
    image = change(image, leader=1, isr=(1,)) if image.partition("t", 0).leader != 1 else change(image, isr=(1,))
    image = apply_all(image, [FenceBrokerRecord(2, image.brokers[2].epoch)])
    image = commit(image, bd.expired_broker_fencing(image, hb, SESSION_MS + 1))
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (NO_LEADER, (), (1,))
    return image, heartbeat(image, hb, 2, SESSION_MS + 2)


@pytest.mark.parametrize("unclean,leader,count", [("false", NO_LEADER, 0), ("true", 2, 1)])
def test_unclean_election_only_where_allowed_and_counted(unclean, leader, count):
    image, decision = offline_with_live_out_of_sync_replica(unclean)
    after = commit(image, decision)
    p = after.partition("t", 0)
    assert (p.leader, p.unclean_leader_elections) == (leader, count)
    if count:
        assert p.isr == (2,) and p.leader_epoch == image.partition("t", 0).leader_epoch + 1
        restored = image_from_snapshot(after.cluster_id, image_to_records(after), after.offset)
        assert restored.partition("t", 0).unclean_leader_elections == 1, "the count survives snapshots"
        assert topic_admin.describe_topics(after)[0].partitions[0].unclean_leader_elections == 1


def test_unclean_election_is_a_warning_with_topic_partition_and_epochs():
    """The decision logs nothing itself: it returns the warning, which the shell logs."""
    image, _ = offline_with_live_out_of_sync_replica("true")
    hb = BrokerHeartbeatManager(SESSION_MS)
    with capture_logs() as logs:
        decision = heartbeat(image, hb, 2, SESSION_MS + 2)
    assert logs == []
    p = image.partition("t", 0)
    unclean = [h for h in decision.happened if h.event.startswith("unclean leader election")]
    assert len(unclean) == 1
    assert unclean[0].level == "warning"
    entry = unclean[0].fields
    assert (entry["topic"], entry["partition"], entry["leader"], entry["previous_isr"], entry["previous_eligible_leader_replicas"]) == ("t", 0, 2, [], [1])
    assert (entry["leader_epoch"], entry["partition_epoch"], entry["unclean_leader_elections"]) == (p.leader_epoch + 1, p.partition_epoch + 1, 1)


def test_apply_refuses_an_unclean_mark_on_an_in_sync_leader():
    image = with_topic(cluster((1, 2)), "t", 1, 2)
    p = image.partition("t", 0)
    other = p.replicas[1]
    with pytest.raises(RecordRejected):
        change(image, leader=other, unclean_leader_election=True)  # other is in the ISR: a clean election
    assert change(image, leader=other).partition("t", 0).unclean_leader_elections == 0


def alter_config(image, key, value):
    op = pb.AlterConfigsRequest.Op(key=key, value=value)
    return topic_admin.alter_configs(image, pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name="t", ops=[op])]))


def test_enabling_unclean_election_elects_offline_partitions_in_the_same_entry():
    image, still_offline = offline_with_live_out_of_sync_replica("false")
    image = commit(image, still_offline)  # broker 2 unfenced, partition still offline
    assert image.partition("t", 0).leader == NO_LEADER and not image.brokers[2].fenced
    other = alter_config(image, "retention.ms", "1000")
    assert commit(image, other).partition("t", 0).leader == NO_LEADER, "other configs elect nobody"
    decision = alter_config(image, "unclean.leader.election.enable", "true")
    assert [type(r).__name__ for r in decision.records] == ["ConfigRecord", "PartitionChangeRecord"]
    p = commit(image, decision).partition("t", 0)
    assert (p.leader, p.isr, p.unclean_leader_elections, p.eligible_leader_replicas) == (2, (2,), 1, ())


def test_rebalance_moves_leaders_back_to_usable_in_sync_preferred_replicas():
    image = with_topic(cluster((1, 2, 3)), "t", 3, 3)
    for n in range(3):
        p = image.partition("t", n)
        image = change(image, n, leader=p.replicas[1])
    out_of_sync = image.partition("t", 1).replicas[0]
    image = change(image, 1, isr=tuple(b for b in image.partition("t", 1).isr if b != out_of_sync))
    shutting_down = image.partition("t", 2).replicas[0]
    assert shutting_down != out_of_sync, "placement puts each partition's first replica on another broker"
    image = apply_all(image, [BrokerRegistrationChangeRecord(shutting_down, image.brokers[shutting_down].epoch, True)])
    decision = election.rebalance_leaders(image)
    after = commit(image, decision)
    moved = [n for n in range(3) if after.partition("t", n).leader == after.partition("t", n).replicas[0]]
    assert moved == [0], "only the partition whose preferred replica is usable and in sync"
    assert decision.response == 1
    assert after.partition("t", 0).leader_epoch == image.partition("t", 0).leader_epoch + 1
    assert election.rebalance_leaders(after).records == (), "nothing left to move"


def test_rebalance_is_bounded_per_entry():
    image = with_topic(cluster((1, 2, 3)), "t", 3, 3)
    for n in range(3):
        image = change(image, n, leader=image.partition("t", n).replicas[1])
    first = election.rebalance_leaders(image, changes_max=2)
    assert first.response == 2
    assert election.rebalance_leaders(commit(image, first), changes_max=2).response == 1


def test_fencing_moves_every_leadership_and_isr_membership_then_fences():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 6, 3)
    image = change(image, 5, isr=(1,), leader=1)  # broker 1 is the last in-sync replica here
    heartbeat(image, hb, 2, SESSION_MS + 1)
    heartbeat(image, hb, 3, SESSION_MS + 1)
    decision = bd.expired_broker_fencing(image, hb, SESSION_MS + 1)
    assert decision.response == 1
    assert type(decision.records[-1]) is FenceBrokerRecord and len(decision.entries()) == 1
    assert {r.partition for r in decision.records[:-1]} == set(range(6)), "every partition with broker 1 in its ISR changes"
    after = commit(image, decision)
    for n in range(5):
        p = after.partition("t", n)
        assert 1 not in p.isr and p.leader in (2, 3)
    last = after.partition("t", 5)
    assert (last.leader, last.isr, last.eligible_leader_replicas) == (NO_LEADER, (), (1,)), "the last in-sync replica leaves the ISR for the ELR"


def test_fencing_a_broker_in_many_isrs_commits_in_bounded_entries_fence_last(monkeypatch):
    """Each entry holds at most PARTITION_CHANGES_PER_ENTRY_MAX records, and every prefix
    leaves the broker registered and unfenced: a controller that stops between entries leaves
    a live registration that the next one fences again, moving what is left."""
    monkeypatch.setattr(bd, "PARTITION_CHANGES_PER_ENTRY_MAX", 4)
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 10, 3)
    heartbeat(image, hb, 2, SESSION_MS + 1)
    heartbeat(image, hb, 3, SESSION_MS + 1)
    decision = bd.expired_broker_fencing(image, hb, SESSION_MS + 1)
    entries = decision.entries()
    assert [len(e) for e in entries] == [4, 4, 3] and type(entries[-1][-1]) is FenceBrokerRecord
    halfway = commit(image, Decision(tuple(entries[0]), None))
    assert not halfway.brokers[1].fenced
    again = bd.expired_broker_fencing(halfway, hb, SESSION_MS + 1)  # the next controller's turn
    after = commit(halfway, again)
    assert after.brokers[1].fenced
    assert all(1 not in p.isr and p.leader in (2, 3) for p in after.topics["t"].partitions.values())


def test_controlled_shutdown_hands_leaderships_to_in_sync_replicas_in_one_entry():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 6, 3)
    image = change(image, 5, isr=(1,), leader=1)
    decision = heartbeat(image, hb, 1, 10, want_shutdown=True)
    kinds = [type(r).__name__ for r in decision.records]
    assert kinds[0] == "BrokerRegistrationChangeRecord" and kinds[-1] == "FenceBrokerRecord"
    assert kinds[1:-1] == ["PartitionChangeRecord"] * 6
    after = commit(image, decision)
    assert decision.response.should_shutdown and after.brokers[1].fenced
    assert all(1 not in after.partition("t", n).isr and after.partition("t", n).leader in (2, 3) for n in range(5))
    assert (after.partition("t", 5).leader, after.partition("t", 5).isr, after.partition("t", 5).eligible_leader_replicas) == (NO_LEADER, (), (1,))


def test_rebalance_builds_no_election_for_a_partition_its_preferred_replica_leads(monkeypatch):
    image = with_topic(cluster((1, 2, 3)), "t", 30, 3)
    image = change(image, 7, leader=image.partition("t", 7).replicas[1])
    considered: list[int] = []
    preferred = election.preferred_election

    def counting(p, usable):
        considered.append(p.partition)
        return preferred(p, usable)

    monkeypatch.setattr(election, "preferred_election", counting)
    decision = election.rebalance_leaders(image)
    assert decision.response == 1 and considered == [7], "only the partition its preferred replica does not lead"
