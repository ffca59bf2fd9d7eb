"""Eligible leader replicas (KIP-966) in the controller's pure decisions: every transition
of ELR and last-known ELR (AlterPartition shrink and expand, fencing, controlled shutdown,
clean and unclean re-registration, offline logs reported in heartbeats, min ISR lowered,
reassignment), the election order (ISR, ELR, last-known ELR, unclean), the records' wire
and snapshot forms, the apply-side checks, the unsafe negative control, and a property test:
over random fault sequences, every replica a clean election may choose holds every
committed record."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_quorum import broker_decisions as bd
from metadata_quorum import election, topic_admin
from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.delta import apply_all, image_from_snapshot
from metadata_quorum.image import NO_LEADER, RecordRejected, image_to_records
from metadata_quorum.records import FenceBrokerRecord, PartitionChangeRecord, decode, encode
from metadata_quorum.reassignment import alter_partition_reassignments
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, with_topic

SESSION_MS = 9000


def heartbeat(image, hb, broker_id, now_ms=1, **fields):
    request = pb.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=image.brokers[broker_id].epoch, current_metadata_offset=image.offset, **fields)
    return bd.broker_heartbeat(image, request, hb, now_ms)


def fence(image, hb, broker_id):
    """Fence ``broker_id`` as its closed session stream does (moves first, then the fence)."""
    return commit(image, bd.disconnected_broker_fencing(image, broker_id, image.brokers[broker_id].epoch))


def register(image, hb, broker_id, incarnation, previous_epoch=-1):
    request = pb.RegisterBrokerRequest(broker_id=broker_id, host="h", port=1, incarnation_id=incarnation, previous_broker_epoch=previous_epoch)
    image = commit(image, bd.register_broker(image, request, hb, 1))
    return commit(image, heartbeat(image, hb, broker_id))  # caught up: unfenced


def alter(image, leader, isr):
    p = image.partition("t", 0)
    request = pb.AlterPartitionRequest(broker_id=leader, broker_epoch=image.brokers[leader].epoch, partitions=[pb.AlterPartitionRequest.PartitionState(
        topic="t", partition=0, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        new_isr=[pb.AlterPartitionRequest.NewIsrReplica(broker_id=b, broker_epoch=image.brokers[b].epoch) for b in isr],
    )])
    decision = bd.alter_partition(image, request)
    assert decision.response.partitions[0].error_code == common.NONE, decision.response.partitions[0].error_message
    return commit(image, decision)


def rf3(min_isr="2", **configs):
    """t-0 on brokers 1, 2, 3 led by 1, min.insync.replicas ``min_isr``."""
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 1, 3, {"min.insync.replicas": min_isr, **configs})
    p = image.partition("t", 0)
    image = apply_all(image, [PartitionChangeRecord(image.topics["t"].topic_id, 0, p.partition_epoch, leader=1, replicas=(1, 2, 3))])
    return image, hb


def state(image):
    p = image.partition("t", 0)
    return p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr


# ---------------------------------------------------------------- entering and leaving the ELR


def test_alter_partition_shrink_below_min_isr_puts_the_removed_replica_in_the_elr_and_expand_clears_it():
    image, _ = rf3()
    image = alter(image, 1, (1, 2))
    assert state(image) == (1, (1, 2), (), ()), "still at min ISR: no ELR"
    image = alter(image, 1, (1,))
    assert state(image) == (1, (1,), (2,), ()), "below min ISR: 2 left with everything up to the frozen HW"
    before = image.partition("t", 0)
    image = alter(image, 1, (1, 3))
    assert state(image) == (1, (1, 3), (), ()), "back at min ISR: ELR cleared (the HW moves again)"
    assert image.partition("t", 0).leader_epoch == before.leader_epoch, "ELR changes need no new leader epoch"


def test_a_replica_rejoining_the_isr_leaves_the_elr():
    image, _ = rf3(min_isr="3")
    image = alter(image, 1, (1,))
    assert state(image) == (1, (1,), (2, 3), ())
    image = alter(image, 1, (1, 2))
    assert state(image) == (1, (1, 2), (3,), ())


def test_fencing_down_to_an_empty_isr_then_electing_from_the_elr():
    image, hb = rf3()
    image = fence(image, hb, 3)
    assert state(image) == (1, (1, 2), (), ())
    image = fence(image, hb, 2)
    assert state(image) == (1, (1,), (2,), ())
    image = fence(image, hb, 1)
    assert state(image) == (NO_LEADER, (), (1, 2), ()), "the last ISR member leaves the ISR for the ELR"
    before = image.partition("t", 0)
    image = commit(image, heartbeat(image, hb, 2))  # broker 2's same registration comes back (a pause): unfenced
    after = image.partition("t", 0)
    assert state(image) == (2, (2,), (1,), ()), "elected from the ELR, alone in the ISR; 1 stays eligible"
    assert (after.leader_epoch, after.unclean_leader_elections) == (before.leader_epoch + 1, 0)


def test_controlled_shutdown_of_the_last_isr_member_keeps_it_eligible():
    image, hb = rf3()
    image = fence(image, hb, 3)
    image = fence(image, hb, 2)
    decision = heartbeat(image, hb, 1, want_shutdown=True)
    image = commit(image, decision)
    assert decision.response.should_shutdown and state(image) == (NO_LEADER, (), (1, 2), ())


def test_clean_restart_stays_eligible_and_is_elected():
    image, hb = rf3()
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 1, "inc-1b", previous_epoch=image.brokers[1].epoch)
    assert state(image) == (1, (1,), (2,), ()), "a clean shutdown keeps the ELR place: elected at unfence"


def test_unclean_restart_leaves_the_elr_for_the_last_known_elr_and_another_eligible_replica_is_elected():
    image, hb = rf3()
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 1, "inc-1b", previous_epoch=-1)
    assert state(image) == (NO_LEADER, (), (2,), (1,)), "broker 1 may have lost its tail: never elected while 2 may come back"
    image = register(image, hb, 2, "inc-2b", previous_epoch=image.brokers[2].epoch)
    assert state(image) == (2, (2,), (), (1,))
    assert image.partition("t", 0).unclean_leader_elections == 0


def test_a_stale_previous_epoch_is_an_unclean_shutdown():
    image, hb = rf3()
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 1, "inc-1b", previous_epoch=image.brokers[1].epoch - 1)
    assert state(image)[2:] == ((2,), (1,))


def test_unclean_restart_of_a_live_isr_member_takes_it_out_of_the_isr():
    """A process replaced before its session ran out (kill -9 and a fast restart)."""
    image, hb = rf3()
    image = alter(image, 1, (1, 2))
    image = register(image, hb, 2, "inc-2b", previous_epoch=-1)
    assert state(image) == (1, (1,), (), (2,)), "out of the ISR; with no clean member it is only last-known"


def test_when_isr_and_elr_are_empty_a_last_known_elr_member_is_elected_and_counted_unclean():
    image, hb = rf3()
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 2, "inc-2b")
    assert state(image) == (NO_LEADER, (), (1,), (2,)), "1 might still come back with everything"
    image = register(image, hb, 1, "inc-1b")  # the last eligible one restarted uncleanly too: nobody is known to hold everything
    p = image.partition("t", 0)
    assert state(image) == (2, (2,), (), ()) and p.unclean_leader_elections == 1, "the first usable last-known member, counted"


def test_unclean_election_prefers_the_last_known_elr():
    image, hb = rf3(**{"unclean.leader.election.enable": "true"})
    image = fence(image, hb, 3)
    image = fence(image, hb, 2)
    image = fence(image, hb, 1)
    image = commit(image, bd.register_broker(image, pb.RegisterBrokerRequest(broker_id=2, host="h", port=1, incarnation_id="2b"), hb, 1))
    image = apply_all(image, [FenceBrokerRecord(2, image.brokers[2].epoch)])
    assert state(image) == (NO_LEADER, (), (1,), (2,))
    image = commit(image, heartbeat(image, hb, 3))  # 3 (out of sync since the first fence) is back
    assert state(image)[0] == 3, "unclean allowed and no ISR, ELR or last-known member usable: 3"
    image, hb = rf3(**{"unclean.leader.election.enable": "true"})
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 2, "inc-2b")
    image = commit(image, heartbeat(image, hb, 3))
    assert state(image)[0] == 2, "the last-known ELR member before the replica that left first"


def test_offline_log_reported_in_a_heartbeat_moves_leadership_and_leaves_isr_and_elr():
    image, hb = rf3()
    decision = heartbeat(image, hb, 1, offline_replicas=[pb.TopicPartitionRef(topic="t", partition=0)])
    image = commit(image, decision)
    assert state(image) == (2, (2, 3), (), ())
    assert heartbeat(image, hb, 1, offline_replicas=[pb.TopicPartitionRef(topic="t", partition=0)]).records == (), "reported again: nothing left to do"


def test_a_whole_failed_disk_moves_in_bounded_entries(monkeypatch):
    monkeypatch.setattr(bd, "PARTITION_CHANGES_PER_ENTRY_MAX", 2)
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 5, 3)
    decision = heartbeat(image, hb, 1, offline_replicas=[pb.TopicPartitionRef(topic="t", partition=n) for n in range(5)])
    assert [len(entry) for entry in decision.entries()] == [2, 2, 1]
    after = commit(image, decision)
    assert all(1 not in p.isr and p.leader != 1 for p in after.topics["t"].partitions.values())


def test_lowering_min_isr_clears_an_elr_the_isr_now_satisfies():
    image, _ = rf3()
    image = alter(image, 1, (1, 2))
    image = alter(image, 1, (1,))
    assert state(image) == (1, (1,), (2,), ())
    op = pb.AlterConfigsRequest.Op(key="min.insync.replicas", value="1")
    decision = topic_admin.alter_configs(image, pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name="t", ops=[op])]))
    image = commit(image, decision)
    assert state(image) == (1, (1,), (), ()), "with min ISR 1 the HW moves again: 2 is no longer known to be up to date"


def test_a_replica_reassigned_away_leaves_the_elr():
    image, hb = rf3(min_isr="3")
    image = alter(image, 1, (1,))
    assert state(image)[2] == (2, 3)
    request = pb.AlterPartitionReassignmentsRequest(reassignments=[pb.AlterPartitionReassignmentsRequest.Reassignment(topic="t", partition=0, replicas=pb.BrokerIdList(ids=[1, 2]))])
    image = commit(image, alter_partition_reassignments(image, request))
    assert state(image) == (1, (1,), (2,), ())


# ---------------------------------------------------------------- records, snapshots, checks


def test_elr_fields_survive_the_wire_snapshots_and_describe():
    image, hb = rf3()
    for b in (3, 2, 1):
        image = fence(image, hb, b)
    image = register(image, hb, 1, "inc-1b")
    restored = image_from_snapshot(image.cluster_id, image_to_records(image), image.offset)
    assert state(restored) == state(image) == (NO_LEADER, (), (2,), (1,))
    described = topic_admin.describe_topics(image)[0].partitions[0]
    assert (list(described.eligible_leader_replicas), list(described.last_known_elr)) == ([2], [1])
    record = PartitionChangeRecord("id", 0, 3, eligible_leader_replicas=(2,), last_known_elr=())
    assert decode(encode(record)) == record, "an empty last-known ELR is a change (present), not absent"
    assert decode(encode(PartitionChangeRecord("id", 0, 3))).eligible_leader_replicas is None


@pytest.mark.parametrize("fields", [
    {"eligible_leader_replicas": (1,)},            # the leader, in the ISR
    {"eligible_leader_replicas": (4,)},            # not a replica
    {"last_known_elr": (2,)},                      # in the ISR
    {"isr": (1,), "eligible_leader_replicas": (2,), "last_known_elr": (2,)},  # in both
])
def test_apply_refuses_an_inconsistent_elr(fields):
    image, _ = rf3()
    p = image.partition("t", 0)
    with pytest.raises(RecordRejected):
        apply_all(image, [PartitionChangeRecord(image.topics["t"].topic_id, 0, p.partition_epoch, **fields)])


def test_unsafe_negative_control_elects_outside_isr_and_elr(monkeypatch):
    image, hb = rf3()
    image = alter(image, 1, (1, 2))  # 3 is out of sync, min ISR kept: no ELR
    monkeypatch.setattr(election, "_unsafe_outside_isr_elr", True)
    image = fence(image, hb, 1)
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.unclean_leader_elections) == (3, (3,), 0), "chosen outside ISR and ELR, and not even counted"


# ---------------------------------------------------------------- property: a clean choice holds everything

EVENTS = st.lists(
    st.tuples(st.sampled_from(["write", "fence", "clean-restart", "unclean-restart", "unfence", "shrink", "expand"]), st.integers(1, 3)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, min_isr=st.integers(1, 3))
def test_every_replica_a_clean_election_may_choose_holds_every_committed_record(events, min_isr):
    """A model of the data: a write commits (the HW moves) only while the ISR has at least
    min ISR members, and reaches the ISR; an unclean restart loses what was not flushed
    (everything, at worst); a replica rejoins the ISR only after catching up with the leader.
    Invariants after every step: ISR and ELR disjoint, the ELR empty once the ISR reaches min
    ISR, the leader in the ISR, and every ISR and ELR member up to date, so a leader chosen
    without an unclean mark never lacks a committed record."""
    image, hb = rf3(min_isr=str(min_isr))
    up_to_date = {1: True, 2: True, 3: True}
    alive = {1: True, 2: True, 3: True}
    for kind, b in events:
        p = image.partition("t", 0)
        if kind == "write" and p.leader != NO_LEADER and len(p.isr) >= min_isr:
            assert up_to_date[p.leader]
            for r in (1, 2, 3):
                up_to_date[r] = r in p.isr
        elif kind == "fence" and alive[b]:
            image, alive[b] = fence(image, hb, b), False
        elif kind in ("clean-restart", "unclean-restart") and not alive[b]:
            clean = kind == "clean-restart"
            up_to_date[b] = up_to_date[b] and clean
            incarnation = f"{b}-{image.offset}"
            request = pb.RegisterBrokerRequest(broker_id=b, host="h", port=1, incarnation_id=incarnation, previous_broker_epoch=image.brokers[b].epoch if clean else -1)
            image = commit(image, bd.register_broker(image, request, hb, 1))
            alive[b] = True
        elif kind == "unfence" and alive[b] and image.brokers[b].fenced:
            image = commit(image, heartbeat(image, hb, b))
        elif kind == "shrink" and p.leader != NO_LEADER and b in p.isr and b != p.leader:
            image = alter(image, p.leader, tuple(r for r in p.isr if r != b))
        elif kind == "expand" and p.leader != NO_LEADER and b not in p.isr and alive[b] and not image.brokers[b].fenced:
            image = alter(image, p.leader, (*p.isr, b))
            up_to_date[b] = up_to_date[p.leader]
        p = image.partition("t", 0)
        assert not set(p.isr) & set(p.eligible_leader_replicas) and not set(p.last_known_elr) & (set(p.isr) | set(p.eligible_leader_replicas))
        assert len(p.isr) < min_isr or not p.eligible_leader_replicas
        assert p.leader == NO_LEADER or p.leader in p.isr
        if p.unclean_leader_elections == 0:
            assert all(up_to_date[r] for r in (*p.isr, *p.eligible_leader_replicas)), (p, up_to_date)
        else:  # an unclean (last-known ELR) election: the committed history restarts from that leader
            up_to_date = {r: r in p.isr for r in (1, 2, 3)}
            image = replace_unclean_count(image)


def replace_unclean_count(image):
    """The property test's reset after an unclean election: the counter back to 0 (in the
    image only) so later clean elections are judged again against the new history."""
    topic = image.topics["t"]
    p = replace(topic.partitions[0], unclean_leader_elections=0)
    new_topic = replace(topic, partitions=topic.partitions.set(0, p))
    return replace(image, topics=image.topics.set("t", new_topic), topics_by_id=image.topics_by_id.set(topic.topic_id, new_topic))
