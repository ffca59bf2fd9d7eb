"""LeaderPartitionState: HW, ISR proposals (KIP-497 maximal ISR, KIP-903 eligibility),
min.insync.replicas, delayed produces and fencing."""

import pytest

from data_plane.replication.divergence import DivergingEpoch, FetchRejected, ServeFrom
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import (
    AlterPartitionCommitted,
    AlterPartitionRefused,
    BrokerStatus,
    FollowerFetch,
    LeaderPartitionState,
    follower_high_watermark,
)

LEADER, F1, F2 = 1, 2, 3
EPOCH = 4
LAG_MS = 100
UP = BrokerStatus(broker_epoch=7, fenced=False, in_controlled_shutdown=False)
E = ErrorCode


def leader(isr=(LEADER, F1, F2), leo=10, hw=0, min_insync=2, history=((0, 0), (EPOCH, 10))):
    return LeaderPartitionState(
        leader_id=LEADER, leader_epoch=EPOCH, partition_epoch=1, replicas=[LEADER, F1, F2],
        isr=frozenset(isr), leader_history=history, log_end_offset=leo, high_watermark=hw,
        min_insync_replicas=min_insync, now_ms=0,
    )


def fetch(state, replica, offset, now_ms=0, *, last_epoch=EPOCH, broker=UP, broker_epoch=7,
          leader_epoch=EPOCH):
    return state.on_follower_fetch(
        FollowerFetch(replica, broker_epoch, leader_epoch, offset, last_epoch), broker, 0, now_ms)


# ---------------------------------------------------------------- high watermark

@pytest.mark.parametrize(
    "isr, fetches, expected_hw",
    [
        ((LEADER, F1, F2), [(F1, 10)], 0),              # F2 unknown holds it
        ((LEADER, F1, F2), [(F1, 10), (F2, 7)], 7),     # min over the ISR
        ((LEADER, F1, F2), [(F1, 10), (F2, 10)], 10),
        ((LEADER, F1), [(F1, 8), (F2, 0)], 8),          # non-ISR follower does not count
        ((LEADER,), [], 0),                             # alone, below min.insync.replicas (2): frozen (KIP-966)
        ((LEADER, F1, F2), [(F1, 10), (F2, 10), (F2, 6)], 10),  # never goes down
    ],
)
def test_high_watermark_is_min_leo_over_isr_and_never_decreases(isr, fetches, expected_hw) -> None:
    state = leader(isr=isr)
    state.on_leader_append(10, 0)
    for replica, offset in fetches:
        fetch(state, replica, offset, last_epoch=0 if offset <= 10 else EPOCH)
    assert state.high_watermark == expected_hw


def test_leader_append_alone_advances_hw_and_reports_it() -> None:
    state = leader(isr=(LEADER,), min_insync=1)
    assert state.on_leader_append(12, 0).high_watermark == 12
    assert state.on_leader_append(12, 1).high_watermark is None


def test_diverging_fetch_does_not_count_toward_hw() -> None:
    state = leader(isr=(LEADER, F1), leo=10)
    state.on_leader_append(12, 0)
    # F1 claims offset 12 but its last epoch (3) is not ours: its records differ from 10 on.
    answer = fetch(state, F1, 12, last_epoch=3)
    assert answer.fetch == DivergingEpoch(0, 10)
    assert state.high_watermark == 0 and state.progress[F1].log_end_offset == -1


# ---------------------------------------------------------------- ISR expansion

@pytest.mark.parametrize(
    "hw, fetch_offset, broker, broker_epoch, proposes",
    [
        (5, 10, UP, 7, True),
        (5, 12, UP, 7, True),
        (5, 4, UP, 7, False),                   # below HW
        (0, 9, UP, 7, False),                   # below the start of the leader's epoch (10)
        (5, 10, None, 7, False),                # not registered
        (5, 10, BrokerStatus(7, True, False), 7, False),   # fenced
        (5, 10, BrokerStatus(7, False, True), 7, False),   # controlled shutdown
        (5, 10, UP, 6, False),                  # KIP-903: stale broker epoch
    ],
)
def test_isr_expansion_rule(hw, fetch_offset, broker, broker_epoch, proposes) -> None:
    state = leader(isr=(LEADER, F1), hw=hw)
    state.on_leader_append(12, 0)
    answer = fetch(state, F2, fetch_offset, broker=broker, broker_epoch=broker_epoch,
                   last_epoch=0 if fetch_offset <= 10 else EPOCH)
    proposal = answer.decisions.isr_proposal
    assert (proposal is not None) == proposes
    if proposes:
        assert proposal.new_isr == {LEADER, F1, F2}
        assert proposal.partition_epoch == 1 and proposal.leader_epoch == EPOCH
        assert proposal.added_broker_epochs == ((F2, 7),)


def test_pending_expansion_counts_the_new_member_for_hw() -> None:
    state = leader(isr=(LEADER,), min_insync=1, hw=10)
    state.on_leader_append(20, 0)
    assert state.high_watermark == 20                   # alone
    answer = fetch(state, F1, 20)
    assert answer.decisions.isr_proposal.new_isr == {LEADER, F1}
    assert state.maximal_isr == {LEADER, F1} and state.isr == {LEADER}
    state.on_leader_append(25, 0)
    assert state.high_watermark == 20                   # waits for F1 while pending
    assert fetch(state, F1, 25).decisions.high_watermark == 25
    state.on_alter_partition_result(AlterPartitionRefused(E.INVALID_UPDATE_VERSION), 0)
    assert state.pending_isr is None and state.isr == {LEADER}
    assert state.on_leader_append(30, 0).high_watermark == 30


def test_one_proposal_at_a_time() -> None:
    state = leader(isr=(LEADER,), min_insync=1)
    assert fetch(state, F1, 10).decisions.isr_proposal is not None
    assert fetch(state, F2, 10).decisions.isr_proposal is None
    state.on_alter_partition_result(AlterPartitionCommitted(EPOCH, 2, frozenset({LEADER, F1})), 0)
    assert state.isr == {LEADER, F1} and state.partition_epoch == 2
    assert fetch(state, F2, 10).decisions.isr_proposal.new_isr == {LEADER, F1, F2}


# ---------------------------------------------------------------- ISR shrink

@pytest.mark.parametrize(
    "f2_fetches, now_ms, shrinks",
    [
        ([], 100, False),                    # exactly the limit: not yet
        ([], 101, True),                     # never fetched since election
        ([(50, 10)], 151, True),             # fetched, but was never caught up
        ([(50, 12)], 151, False),            # caught up at 50
    ],
)
def test_isr_shrink_by_time_not_caught_up(f2_fetches, now_ms, shrinks) -> None:
    state = leader()
    state.on_leader_append(12, 0)
    for at_ms, offset in f2_fetches:
        fetch(state, F2, offset, at_ms, last_epoch=0 if offset <= 10 else EPOCH)
    fetch(state, F1, state.log_end_offset, now_ms)
    proposal = state.on_tick(now_ms, LAG_MS).isr_proposal
    assert (proposal is not None) == shrinks
    if shrinks:
        assert proposal.new_isr == {LEADER, F1}


def test_reaching_the_leo_seen_at_the_previous_fetch_counts_as_caught_up_then() -> None:
    """A busy partition: F2 never reaches the moving LEO, but each fetch reaches the LEO of
    its previous fetch, so it was caught up at the previous fetch time (Kafka's rule)."""
    state = leader()
    state.on_leader_append(12, 0)
    fetch(state, F1, 12, 0)
    fetch(state, F2, 10, 50, last_epoch=0)               # sees LEO 12
    state.on_leader_append(15, 60)
    fetch(state, F1, 15, 60)
    fetch(state, F2, 12, 120)                            # reached 12: caught up as of 50
    assert state.progress[F2].last_caught_up_ms == 50
    assert state.on_tick(140, LAG_MS).isr_proposal is None
    assert state.on_tick(151, LAG_MS).isr_proposal.new_isr == {LEADER, F1}


class Lease:
    """A fetch session's lease as the leader core sees it: its last round that held the partition."""

    def __init__(self, last_round_ms: int) -> None:
        self.last_round_ms = last_round_ms

    def vouched_until_ms(self) -> int:
        return self.last_round_ms


def session_fetch(state, replica, offset, now_ms, lease):
    return state.on_follower_fetch(FollowerFetch(replica, 7, EPOCH, offset, EPOCH, session=lease), UP, 0, now_ms)


def test_a_session_follower_idle_at_the_leo_is_caught_up_until_its_last_round() -> None:
    """F2 fetched at the LEO once, through a session, then only sent empty rounds (the last at
    1000): when the LEO moves at 1020 it counts as caught up at 1000, not at its fetch (0);
    it is shrunk only if it does not fetch the new records within the lag after that."""
    state = leader()
    state.on_leader_append(12, 0)
    lease = Lease(0)
    session_fetch(state, F1, 12, 0, Lease(0))
    session_fetch(state, F2, 12, 0, lease)
    lease.last_round_ms = 1000  # empty rounds until 1000
    state.on_leader_append(15, 1020)
    assert state.progress[F2].last_caught_up_ms == 1000
    session_fetch(state, F1, 15, 1020, Lease(1020))
    assert state.on_tick(1100, LAG_MS).isr_proposal is None
    assert state.on_tick(1101, LAG_MS).isr_proposal.new_isr == {LEADER, F1}


@pytest.mark.parametrize(
    "lease_ms, f2_offset, caught_up_ms",
    [
        (None, 12, 0),      # no session: only the fetch itself counts (negative control)
        (5000, 12, 1020),   # a lease is never taken past the moment the LEO moves
        (1000, 11, 0),      # a follower behind our LEO gains nothing from its session
    ],
)
def test_a_session_vouches_only_for_a_follower_at_the_leo_and_only_until_now(lease_ms, f2_offset, caught_up_ms) -> None:
    state = leader()
    state.on_leader_append(12, 0)
    session_fetch(state, F2, f2_offset, 0, None if lease_ms is None else Lease(lease_ms))
    state.on_leader_append(15, 1020)
    assert state.progress[F2].last_caught_up_ms == caught_up_ms


def test_pending_shrink_keeps_counting_the_old_member_until_committed() -> None:
    state = leader(min_insync=1)
    state.on_leader_append(12, 0)
    fetch(state, F1, 12, 1)
    fetch(state, F2, 10, 1, last_epoch=0)
    assert state.high_watermark == 10
    decisions = state.on_tick(500, LAG_MS)
    assert decisions.isr_proposal.new_isr == {LEADER, F1}
    assert state.high_watermark == 10                    # F2 still counted while pending
    committed = state.on_alter_partition_result(
        AlterPartitionCommitted(EPOCH, 2, frozenset({LEADER, F1})), 500)
    assert committed.high_watermark == 12


def test_stale_alter_partition_answer_after_metadata_is_ignored() -> None:
    state = leader(min_insync=1)
    state.on_leader_append(12, 0)
    fetch(state, F1, 12, 1)
    state.on_tick(500, LAG_MS)
    assert state.pending_isr is not None
    state.on_partition_change(leader_epoch=EPOCH, partition_epoch=2, replicas=[LEADER, F1, F2],
                              isr=frozenset({LEADER, F1}), now_ms=500)
    assert state.pending_isr is None and state.isr == {LEADER, F1}
    assert state.on_alter_partition_result(
        AlterPartitionCommitted(EPOCH, 2, frozenset({LEADER, F1})), 501).high_watermark is None
    assert state.partition_epoch == 2


def test_answer_committed_under_another_leader_epoch_is_not_applied() -> None:
    """Leadership moved while the proposal was in flight: the controller's answer describes
    the next leader's ISR, which this (soon replaced) state must not take as its own."""
    state = leader(min_insync=1)
    state.on_leader_append(12, 0)
    fetch(state, F1, 12, 1)
    state.on_tick(500, LAG_MS)
    assert state.pending_isr is not None
    state.on_alter_partition_result(AlterPartitionCommitted(EPOCH + 1, 3, frozenset({F1})), 501)
    assert state.pending_isr is None and state.isr == {LEADER, F1, F2} and state.partition_epoch == 1


def test_partition_epoch_never_goes_backwards() -> None:
    state = leader()
    state.on_partition_change(leader_epoch=EPOCH, partition_epoch=1, replicas=[LEADER, F1],
                              isr=frozenset({LEADER}), now_ms=0)
    assert state.isr == {LEADER, F1, F2} and state.partition_epoch == 1


# ---------------------------------------------------------------- produce

@pytest.mark.parametrize(
    "isr, min_insync, acks, expected",
    [
        ((LEADER, F1), 2, -1, E.NONE),
        ((LEADER,), 2, -1, E.NOT_ENOUGH_REPLICAS),
        ((LEADER,), 2, 1, E.NONE),          # min.insync only binds acks=all
        ((LEADER,), 2, 0, E.NONE),
    ],
)
def test_check_produce(isr, min_insync, acks, expected) -> None:
    assert leader(isr=isr, min_insync=min_insync).check_produce(acks) == expected


def test_delayed_produce_completes_when_hw_passes_it() -> None:
    state = leader(isr=(LEADER, F1))
    state.on_leader_append(12, 0)
    assert state.add_delayed_produce("a", 11, 1000, 0).completed == ()
    assert state.add_delayed_produce("b", 12, 1000, 0).completed == ()
    assert [o.token for o in fetch(state, F1, 11, 5).decisions.completed] == ["a"]
    done = fetch(state, F1, 12, 6).decisions.completed
    assert [(o.token, o.error) for o in done] == [("b", E.NONE)]


def test_delayed_produce_already_satisfied_completes_at_once() -> None:
    state = leader(isr=(LEADER,), min_insync=1)
    state.on_leader_append(12, 0)
    assert [o.token for o in state.add_delayed_produce("a", 12, 1000, 0).completed] == ["a"]


def test_delayed_produce_expires_with_request_timed_out() -> None:
    state = leader(isr=(LEADER, F1))
    state.on_leader_append(12, 0)
    state.add_delayed_produce("a", 12, 50, 0)
    assert state.on_tick(49, LAG_MS).completed == ()
    done = state.on_tick(50, LAG_MS).completed
    assert [(o.token, o.error) for o in done] == [("a", E.REQUEST_TIMED_OUT)]
    assert fetch(state, F1, 12, 51).decisions.completed == ()


def test_isr_below_min_insync_freezes_the_high_watermark_until_it_is_back() -> None:
    """KIP-966: the HW does not move while the ISR is below min.insync.replicas, so a
    replica that left the ISR then holds everything up to the HW (an eligible leader
    replica); a produce waiting meanwhile completes only once the ISR is back."""
    state = leader(isr=(LEADER, F1), min_insync=2)
    state.on_leader_append(12, 0)
    state.add_delayed_produce("a", 12, 10_000, 0)
    state.on_tick(500, LAG_MS)                           # F1 never fetched: shrink to {LEADER}
    decisions = state.on_alter_partition_result(AlterPartitionCommitted(EPOCH, 2, frozenset({LEADER})), 500)
    assert decisions.completed == () and decisions.high_watermark is None and state.high_watermark == 0
    assert state.on_leader_append(20, 600).high_watermark is None, "an acks=1 append alone does not move it either"
    assert state.check_produce(-1) == E.NOT_ENOUGH_REPLICAS
    assert fetch(state, F1, 20, 700).decisions.isr_proposal is not None  # F1 caught up: back in
    done = state.on_alter_partition_result(AlterPartitionCommitted(EPOCH, 3, frozenset({LEADER, F1})), 700)
    assert done.high_watermark == 20 and [(o.token, o.error) for o in done.completed] == [("a", E.NONE)]


def test_resign_fails_every_waiting_produce_and_kills_the_state() -> None:
    state = leader()
    state.on_leader_append(12, 0)
    state.add_delayed_produce("a", 11, 1000, 0)
    state.add_delayed_produce("b", 12, 1000, 0)
    failed = state.resign()
    assert [(o.token, o.error) for o in failed] == [
        ("a", E.NOT_LEADER_OR_FOLLOWER), ("b", E.NOT_LEADER_OR_FOLLOWER)]
    with pytest.raises(AssertionError):
        state.on_leader_append(13, 1)


# ---------------------------------------------------------------- fencing

@pytest.mark.parametrize(
    "leader_epoch, replica, expected",
    [
        (EPOCH - 1, F1, FetchRejected(E.FENCED_LEADER_EPOCH)),
        (EPOCH + 1, F1, FetchRejected(E.UNKNOWN_LEADER_EPOCH)),
        (EPOCH, 9, FetchRejected(E.NOT_LEADER_OR_FOLLOWER)),     # not a replica
        (EPOCH, F1, ServeFrom(10)),
    ],
)
def test_follower_fetch_fencing(leader_epoch, replica, expected) -> None:
    state = leader()
    answer = fetch(state, replica, 10, leader_epoch=leader_epoch, last_epoch=0)
    assert answer.fetch == expected
    if not isinstance(expected, ServeFrom):
        assert answer.decisions.high_watermark is None and state.progress[F1].log_end_offset == -1


def test_follower_high_watermark_is_capped_by_its_log_and_never_lowered_by_a_response() -> None:
    assert follower_high_watermark(10, 7, 3) == 7
    assert follower_high_watermark(10, 12, 3) == 10
    assert follower_high_watermark(2, 12, 5) == 5


def test_a_leader_continuing_an_epoch_starts_its_leadership_at_its_log_end() -> None:
    """After a restart a broker may lead on in the epoch it led before (it started at 5 in
    the log); what it published before is unknown, so its leadership starts at its LEO: a
    follower joins the ISR only from there, and the shell hides the HW until it gets there."""
    state = leader(isr=(LEADER, F1), leo=10, hw=7, history=((0, 0), (EPOCH, 5)))
    assert state.leadership_start_offset == 10
    assert fetch(state, F2, 8).decisions.isr_proposal is None  # past the HW, short of the start
    assert fetch(state, F2, 10).decisions.isr_proposal is not None
