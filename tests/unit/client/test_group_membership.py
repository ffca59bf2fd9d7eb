"""The member's reconciliation core (data_plane/client/group_membership.py), driven with
coordinator answers as transcripts: what the member sends, what it must revoke and assign,
and what it reports owned."""

from __future__ import annotations

import pytest

from data_plane.client.group_membership import (
    Action, GroupMembership, MemberState, Subscription, from_topic_partitions, to_topic_partitions,
)
from kraftlog_proto import common_pb2, group_pb2


def answer(epoch: int, assignment=None, error=common_pb2.NONE, interval_ms: int = 500) -> group_pb2.ConsumerGroupHeartbeatResponse:
    a = group_pb2.ConsumerGroupHeartbeatResponse(error_code=error, member_epoch=epoch, heartbeat_interval_ms=interval_ms)
    if assignment is not None:
        a.has_assignment = True
        a.assignment.extend(to_topic_partitions(assignment))
    return a


def joined(owned=frozenset(), epoch: int = 1) -> GroupMembership:
    m = GroupMembership("g", "m1", client_id="c")
    m.subscribe(Subscription(("t",)))
    m.on_heartbeat_answer(m.heartbeat_request(), answer(epoch, owned))
    rec = m.next_reconciliation()
    m.reconciled(rec)
    m.on_heartbeat_answer(m.heartbeat_request(), answer(epoch))
    assert m.state == MemberState.STABLE and m.owned == frozenset(owned)
    return m


def test_join_sends_subscription_and_owned_then_acknowledges_assignment():
    m = GroupMembership("g", "m1", client_id="c", rebalance_timeout_ms=3000)
    assert not m.wants_heartbeat()
    m.subscribe(Subscription(("t",)))
    first = m.heartbeat_request()
    assert (first.member_epoch, first.subscription_changed, list(first.subscribed_topic_names)) == (0, True, ["t"])
    assert first.owned_changed and not first.owned_partitions and first.rebalance_timeout_ms == 3000
    assert m.on_heartbeat_answer(first, answer(3, {("t", 0), ("t", 1)})) == Action.CONTINUE
    assert m.state == MemberState.RECONCILING and m.member_epoch == 3 and m.reconciliation_due()
    rec = m.next_reconciliation()
    assert (rec.revoke, rec.assign, rec.lost) == (frozenset(), {("t", 0), ("t", 1)}, False)
    assert m.next_reconciliation() is None  # one at a time
    m.reconciled(rec)
    ack = m.heartbeat_request()
    assert m.heartbeat_due_now() and ack.owned_changed and from_topic_partitions(ack.owned_partitions) == {("t", 0), ("t", 1)}
    assert not ack.subscription_changed and ack.member_epoch == 3
    m.on_heartbeat_answer(ack, answer(3))
    steady = m.heartbeat_request()
    assert not steady.owned_changed and not steady.subscription_changed and not m.heartbeat_due_now()


def test_revocation_is_reported_only_after_the_poll_thread_finished_it():
    m = joined({("t", 0), ("t", 1)})
    m.on_heartbeat_answer(m.heartbeat_request(), answer(4, {("t", 0)}))
    still = m.heartbeat_request()
    assert not still.owned_changed  # nothing reported before the poll thread released t-1
    rec = m.next_reconciliation()
    assert (rec.revoke, rec.assign) == ({("t", 1)}, frozenset())
    m.reconciled(rec)
    ack = m.heartbeat_request()
    assert from_topic_partitions(ack.owned_partitions) == {("t", 0)} and ack.member_epoch == 4


def test_a_newer_target_during_reconciliation_is_reconciled_next():
    m = joined({("t", 0)})
    m.on_heartbeat_answer(m.heartbeat_request(), answer(2, {("t", 0), ("t", 1)}))
    rec = m.next_reconciliation()
    m.on_heartbeat_answer(m.heartbeat_request(), answer(3, {("t", 1), ("t", 2)}))
    m.reconciled(rec)
    assert m.state == MemberState.RECONCILING and m.owned == {("t", 0), ("t", 1)}
    rec2 = m.next_reconciliation()
    assert (rec2.revoke, rec2.assign) == ({("t", 0)}, {("t", 2)})
    m.reconciled(rec2)
    assert m.state == MemberState.STABLE and m.owned == {("t", 1), ("t", 2)}


@pytest.mark.parametrize("code", [common_pb2.FENCED_MEMBER_EPOCH, common_pb2.UNKNOWN_MEMBER_ID])
def test_fencing_loses_everything_then_rejoins_with_epoch_zero(code):
    m = joined({("t", 0), ("t", 1)}, epoch=5)
    assert m.on_heartbeat_answer(m.heartbeat_request(), answer(0, error=code)) == Action.CONTINUE
    assert m.state == MemberState.FENCED and not m.wants_heartbeat()  # no rejoin before the partitions are dropped
    rec = m.next_reconciliation()
    assert rec.lost and rec.revoke == {("t", 0), ("t", 1)} and not rec.assign
    m.reconciled(rec)
    rejoin = m.heartbeat_request()
    assert m.state == MemberState.JOINING and rejoin.member_epoch == 0 and rejoin.subscription_changed
    assert rejoin.owned_changed and not rejoin.owned_partitions


def test_fencing_voids_a_reconciliation_in_progress():
    m = joined({("t", 0)})
    m.on_heartbeat_answer(m.heartbeat_request(), answer(2, {("t", 0), ("t", 1)}))
    rec = m.next_reconciliation()
    m.on_heartbeat_answer(m.heartbeat_request(), answer(0, error=common_pb2.FENCED_MEMBER_EPOCH))
    m.reconciled(rec)  # finished after the fencing: changes nothing
    assert m.owned == {("t", 0)} and m.state == MemberState.FENCED
    lost = m.next_reconciliation()
    assert lost.lost and lost.revoke == {("t", 0)}
    m.reconciled(lost)
    assert m.owned == frozenset() and m.state == MemberState.JOINING


def test_coordinator_errors_ask_for_rediscovery_or_retry_and_keep_pending_news():
    m = GroupMembership("g", "m1")
    m.subscribe(Subscription(pattern="t.*"))
    req = m.heartbeat_request()
    assert req.subscribed_topic_regex == "t.*" and not req.subscribed_topic_names
    assert m.on_heartbeat_answer(req, answer(0, error=common_pb2.NOT_COORDINATOR)) == Action.FIND_COORDINATOR
    assert m.on_heartbeat_answer(req, answer(0, error=common_pb2.COORDINATOR_LOAD_IN_PROGRESS)) == Action.RETRY_LATER
    assert m.heartbeat_request().subscription_changed  # still to be said


def test_other_errors_are_fatal():
    m = GroupMembership("g", "m1")
    m.subscribe(Subscription(("t",)))
    assert m.on_heartbeat_answer(m.heartbeat_request(), answer(0, error=common_pb2.UNRELEASED_INSTANCE_ID)) == Action.FATAL
    assert m.state == MemberState.FATAL and m.fatal_error[0] == common_pb2.UNRELEASED_INSTANCE_ID and not m.wants_heartbeat()


def test_leave_epochs_dynamic_and_static():
    m = joined({("t", 0)})
    m.leave()
    assert m.heartbeat_request().member_epoch == -1
    static = GroupMembership("g", "m2", instance_id="worker-1")
    static.subscribe(Subscription(("t",)))
    static.leave()
    assert static.heartbeat_request().member_epoch == -2 and static.heartbeat_request().instance_id == "worker-1"
    static.on_heartbeat_answer(static.heartbeat_request(), answer(-2))
    assert static.state == MemberState.UNSUBSCRIBED


def test_release_all_revokes_what_is_owned():
    m = joined({("t", 0), ("t", 3)})
    rec = m.release_all()
    assert rec.revoke == {("t", 0), ("t", 3)} and not rec.lost
    m.reconciled(rec)
    assert m.owned == frozenset()


def test_subscription_needs_names_or_pattern():
    with pytest.raises(ValueError):
        Subscription()
    with pytest.raises(ValueError):
        Subscription(("t",), "t.*")


def test_no_successful_heartbeat_for_the_session_timeout_loses_the_partitions():
    m = GroupMembership("g", "m1", session_timeout_ms=3000)
    m.subscribe(Subscription(("t",)))
    assert not m.session_lost(99_999)  # never answered: owns nothing to drop
    m.on_heartbeat_answer(m.heartbeat_request(), answer(1, {("t", 0)}))
    m.heartbeat_succeeded(1000)
    m.reconciled(m.next_reconciliation())
    assert not m.session_lost(3999)
    assert m.session_lost(4000) and m.state == MemberState.FENCED
    lost = m.next_reconciliation()
    assert lost.lost and lost.revoke == {("t", 0)}
    assert not m.session_lost(9000)  # already dropping
