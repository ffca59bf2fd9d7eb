"""Broker lifecycle decisions with explicit time: registration, unfencing once caught up,
session expiry, a new controller's grace period, leadership moves, controlled shutdown,
AlterPartition validation (KIP-497/903) and producer-id blocks."""

from __future__ import annotations

import pytest

from metadata_quorum import broker_decisions as bd
from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.delta import apply_all
from metadata_quorum.image import NO_LEADER
from metadata_quorum.records import BrokerRegistrationChangeRecord, FenceBrokerRecord, RegisterBrokerRecord
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import cluster, commit, with_topic

SESSION_MS = 9000


def heartbeat(image, hb, broker_id, now_ms, offset=None, **flags):
    request = pb.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=image.brokers[broker_id].epoch, current_metadata_offset=image.offset if offset is None else offset, **flags)
    return bd.broker_heartbeat(image, request, hb, now_ms)


def register(image, hb, broker_id, now_ms, incarnation):
    return bd.register_broker(image, pb.RegisterBrokerRequest(broker_id=broker_id, host="h", port=1, incarnation_id=incarnation), hb, now_ms)


def test_registration_starts_fenced_and_unfences_once_caught_up():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1,), hb)
    decision = register(image, hb, 2, 0, "new")
    assert [type(r) for r in decision.records] == [RegisterBrokerRecord]
    image = commit(image, decision)
    assert image.brokers[2].fenced and image.brokers[2].epoch == image.offset
    behind = heartbeat(image, hb, 2, 10, offset=image.offset - 1)
    assert behind.records == () and behind.response.is_fenced and not behind.response.is_caught_up
    caught_up = heartbeat(image, hb, 2, 20)
    assert not caught_up.response.is_fenced and caught_up.response.is_caught_up
    assert not commit(image, caught_up).brokers[2].fenced


def test_same_incarnation_retry_keeps_epoch_and_changes_nothing():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1,), hb)
    retry = register(image, hb, 1, 100, "inc-1")
    assert retry.records == () and retry.response.broker_epoch == image.brokers[1].epoch
    assert retry.response.error_code == common.NONE


def test_a_new_incarnation_takes_over_a_live_registration_at_once():
    """A broker restarting with the same id while its old session still counts as alive (a
    newly active controller grants every broker a full one) registers at once: new epoch,
    fenced until caught up, and the old epoch's leaderships and ISR places move in the same
    entry."""
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 3, 3)
    old_epoch = image.brokers[1].epoch
    assert hb.is_alive(1, 100)
    takeover = register(image, hb, 1, 100, "restarted")
    assert takeover.response.error_code == common.NONE
    after = commit(image, takeover)
    assert after.brokers[1].incarnation_id == "restarted" and after.brokers[1].fenced
    assert after.brokers[1].epoch > old_epoch
    assert all(p.leader != 1 and 1 not in p.isr for p in after.topics["t"].partitions.values())
    again = register(after, hb, 1, 150, "restarted")
    assert again.records == () and again.response.broker_epoch == after.brokers[1].epoch


def test_the_replaced_process_is_refused_and_cannot_take_the_id_back_by_heartbeating():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1,), hb)
    old_epoch = image.brokers[1].epoch
    image = commit(image, register(image, hb, 1, 100, "restarted"))
    stale = bd.broker_heartbeat(image, pb.BrokerHeartbeatRequest(broker_id=1, broker_epoch=old_epoch, current_metadata_offset=image.offset), hb, 200)
    assert stale.records == () and stale.response.is_fenced
    assert stale.response.error_code == common.DUPLICATE_BROKER_REGISTRATION
    assert "stop this process" in stale.response.error_message
    ahead = bd.broker_heartbeat(image, pb.BrokerHeartbeatRequest(broker_id=1, broker_epoch=image.brokers[1].epoch + 5), hb, 200)
    assert ahead.response.error_code == common.STALE_BROKER_EPOCH


def test_a_registration_without_incarnation_id_is_refused():
    hb = BrokerHeartbeatManager(SESSION_MS)
    decision = register(cluster((1,), hb), hb, 2, 0, "")
    assert decision.records == () and decision.response.error_code == common.INVALID_REQUEST
    assert "incarnation id" in decision.response.error_message


@pytest.mark.parametrize("last_heartbeat_ms,now_ms,fenced", [(0, SESSION_MS, False), (0, SESSION_MS + 1, True), (5000, SESSION_MS + 1, False)])
def test_session_expiry(last_heartbeat_ms, now_ms, fenced):
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1, 2), hb, now_ms=0)
    heartbeat(image, hb, 1, last_heartbeat_ms)
    heartbeat(image, hb, 2, now_ms)
    decision = bd.expired_broker_fencing(image, hb, now_ms)
    assert (decision.response == 1) is fenced
    if fenced:
        assert commit(image, decision).brokers[1].fenced


def test_new_active_controller_gives_a_full_session():
    old = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1, 2), old, now_ms=0)
    new = BrokerHeartbeatManager(SESSION_MS)  # failover at t=60s: nobody heard for a minute
    new.start_grace(image.brokers, now_ms=60_000)
    assert bd.expired_broker_fencing(image, new, 60_000 + SESSION_MS).response is None
    assert bd.expired_broker_fencing(image, new, 60_000 + SESSION_MS + 1).response == 1


def test_a_controller_stall_is_not_held_against_brokers():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = cluster((1, 2), hb, now_ms=0)  # both heard at 0
    hb.credit_stall(3000, now_ms=SESSION_MS)  # the controller could not process heartbeats for 3 s
    assert bd.expired_broker_fencing(image, hb, SESSION_MS + 3000).response is None
    assert bd.expired_broker_fencing(image, hb, SESSION_MS + 3001).response == 1
    hb.credit_stall(10 * SESSION_MS, now_ms=SESSION_MS + 4000)  # never beyond now
    assert bd.expired_broker_fencing(image, hb, 2 * SESSION_MS + 4000).response is None
    assert bd.expired_broker_fencing(image, hb, 2 * SESSION_MS + 4001).response == 1


def test_fencing_moves_leadership_to_another_isr_member():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 3, 3)
    led_by_1 = [n for n, p in image.topics["t"].partitions.items() if p.leader == 1]
    heartbeat(image, hb, 2, SESSION_MS + 1)
    heartbeat(image, hb, 3, SESSION_MS + 1)
    after = commit(image, bd.expired_broker_fencing(image, hb, SESSION_MS + 1))
    assert after.brokers[1].fenced
    for n, p in after.topics["t"].partitions.items():
        before = image.topics["t"].partitions[n]
        assert 1 not in p.isr and p.leader in (2, 3)
        assert p.leader_epoch == before.leader_epoch + (1 if n in led_by_1 else 0)
        assert p.partition_epoch == before.partition_epoch + 1


def test_last_isr_member_moves_to_the_elr_without_leader_and_returns_on_unfence():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1,), hb), "t", 1, 1)
    fenced = commit(image, bd.expired_broker_fencing(image, hb, SESSION_MS + 1))
    p = fenced.partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (NO_LEADER, (), (1,))
    back = commit(fenced, heartbeat(fenced, hb, 1, SESSION_MS + 2))
    p = back.partition("t", 0)
    assert not back.brokers[1].fenced and (p.leader, p.isr) == (1, (1,)) and p.leader_epoch == 2


def test_controlled_shutdown_moves_leaders_then_allows_shutdown():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2), hb), "t", 4, 2)
    first = heartbeat(image, hb, 1, 10, want_shutdown=True)
    image = commit(image, first)
    assert first.response.should_shutdown and image.brokers[1].in_controlled_shutdown and image.brokers[1].fenced
    assert all(p.leader == 2 and p.isr == (2,) for p in image.topics["t"].partitions.values())


def test_controlled_shutdown_moves_in_bounded_entries_leaderships_first(monkeypatch):
    """A broker in more ISRs than one entry may change leaves them over several heartbeats:
    each entry holds at most PARTITION_CHANGES_PER_ENTRY_MAX changes, leaderships move
    before ISR places, and only the heartbeat after the last move fences the broker and lets
    it stop."""
    monkeypatch.setattr(bd, "PARTITION_CHANGES_PER_ENTRY_MAX", 3)
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2), hb), "t", 10, 2)
    led = sum(p.leader == 1 for p in image.topics["t"].partitions.values())
    assert 3 < led < 10
    steps = []
    while True:
        decision = heartbeat(image, hb, 1, 10, want_shutdown=True)
        image = commit(image, decision)
        changes = [r for r in decision.records if type(r).__name__ == "PartitionChangeRecord"]
        assert len(changes) <= 3
        steps.append((len(changes), sum(r.leader is not None for r in changes), decision.response.should_shutdown, image.brokers[1].fenced))
        if decision.response.should_shutdown:
            break
        assert len(steps) < 10, steps
    # 10 changes in entries of 3: leaderships (the first `led` changes) before ISR places
    assert [n for n, _, _, _ in steps] == [3, 3, 3, 1]
    assert sum(moved for _, moved, _, _ in steps) == led and all(moved == n for n, moved, _, _ in steps[: led // 3])
    assert [(stop, fenced) for _, _, stop, fenced in steps] == [(False, False)] * 3 + [(True, True)]
    assert all(p.leader == 2 and p.isr == (2,) for p in image.topics["t"].partitions.values())


def test_controlled_shutdown_of_sole_replica_leaves_partition_offline():
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1,), hb), "t", 1, 1)
    image = commit(image, heartbeat(image, hb, 1, 10, want_shutdown=True))
    assert image.partition("t", 0).leader == NO_LEADER


def alter(image, leader, new_isr, leader_epoch=None, partition_epoch=None, epochs=None):
    p = image.partition("t", 0)
    state = pb.AlterPartitionRequest.PartitionState(
        topic="t",
        partition=0,
        leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=[pb.AlterPartitionRequest.NewIsrReplica(broker_id=b, broker_epoch=(epochs or {}).get(b, image.brokers[b].epoch if b in image.brokers else 0)) for b in new_isr],
    )
    leader_epoch_of_broker = image.brokers[leader].epoch
    return bd.alter_partition(image, pb.AlterPartitionRequest(broker_id=leader, broker_epoch=leader_epoch_of_broker, partitions=[state]))


@pytest.fixture
def shrunk():
    """t-0 on brokers (1, 2, 3), leader 1, ISR shrunk to (1,)."""
    hb = BrokerHeartbeatManager(SESSION_MS)
    image = with_topic(cluster((1, 2, 3), hb), "t", 1, 3)
    assert image.partition("t", 0).leader == image.partition("t", 0).replicas[0]
    leader = image.partition("t", 0).leader
    image = commit(image, alter(image, leader, [leader]))
    return image, leader


def test_alter_partition_expands_isr(shrunk):
    image, leader = shrunk
    others = [b for b in (1, 2, 3) if b != leader]
    decision = alter(image, leader, [leader, others[0]])
    result = decision.response.partitions[0]
    assert result.error_code == common.NONE and list(result.isr) == [leader, others[0]]
    assert result.partition_epoch == image.partition("t", 0).partition_epoch + 1
    assert commit(image, decision).partition("t", 0).isr == (leader, others[0])


@pytest.mark.parametrize(
    "case,code",
    [
        ("stale partition epoch", common.INVALID_UPDATE_VERSION),
        ("old leader epoch", common.FENCED_LEADER_EPOCH),
        ("not the leader", common.NOT_LEADER_OR_FOLLOWER),
        ("fenced replica", common.INELIGIBLE_REPLICA),
        ("shutting down replica", common.INELIGIBLE_REPLICA),
        ("stale replica broker epoch", common.INELIGIBLE_REPLICA),
        ("non-replica", common.INVALID_REQUEST),
    ],
)
def test_alter_partition_refusals(shrunk, case, code):
    image, leader = shrunk
    other = next(b for b in (1, 2, 3) if b != leader)
    args: dict = {}
    requester = leader
    new_isr = [leader, other]
    if case == "stale partition epoch":
        args["partition_epoch"] = image.partition("t", 0).partition_epoch - 1
    elif case == "old leader epoch":
        args["leader_epoch"] = image.partition("t", 0).leader_epoch - 1
    elif case == "not the leader":
        requester = other
    elif case == "fenced replica":
        image = apply_all(image, [FenceBrokerRecord(other, image.brokers[other].epoch)])
    elif case == "shutting down replica":
        image = apply_all(image, [BrokerRegistrationChangeRecord(other, image.brokers[other].epoch, True)])
    elif case == "stale replica broker epoch":
        args["epochs"] = {other: image.brokers[other].epoch - 1}
    elif case == "non-replica":
        image = cluster((1, 2, 3, 4))  # fresh, with a fourth broker
        image = with_topic(image, "t", 1, 3)
        requester = image.partition("t", 0).leader
        new_isr = [requester, next(b for b in (1, 2, 3, 4) if b not in image.partition("t", 0).replicas)]
    decision = alter(image, requester, new_isr, **args)
    result = decision.response.partitions[0]
    assert (result.error_code, decision.records) == (code, ()), result.error_message
    assert result.error_message


def test_alter_partition_from_stale_broker_epoch():
    image = with_topic(cluster(), "t", 1, 1)
    leader = image.partition("t", 0).leader
    current = image.brokers[leader].epoch
    replaced = bd.alter_partition(image, pb.AlterPartitionRequest(broker_id=leader, broker_epoch=current - 1)).response
    assert replaced.error_code == common.DUPLICATE_BROKER_REGISTRATION
    unknown = bd.alter_partition(image, pb.AlterPartitionRequest(broker_id=leader, broker_epoch=current + 1)).response
    assert unknown.error_code == common.STALE_BROKER_EPOCH
    unregistered = bd.alter_partition(image, pb.AlterPartitionRequest(broker_id=leader, broker_epoch=-1)).response
    assert unregistered.error_code == common.STALE_BROKER_EPOCH and "no broker epoch yet" in unregistered.error_message


def test_producer_id_blocks_do_not_overlap():
    image = cluster((1,))
    request = pb.AllocateProducerIdsRequest(broker_id=1, broker_epoch=image.brokers[1].epoch)
    first = bd.allocate_producer_ids(image, request)
    image = commit(image, first)
    second = bd.allocate_producer_ids(image, request)
    assert (first.response.producer_id_start, second.response.producer_id_start) == (0, 1000)
    assert first.response.producer_id_len == 1000
