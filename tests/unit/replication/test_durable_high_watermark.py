"""--durability fsync in the leader core: the HW counts the offsets each ISR member reported
fsynced (the leader's own by `on_leader_synced`, followers' in their fetches), not LEOs."""

import pytest

from server_common.errors import ErrorCode
from data_plane.replication.partition_state import BrokerStatus, FollowerFetch, LeaderPartitionState

LEADER, F1, F2 = 1, 2, 3
EPOCH = 4
UP = BrokerStatus(broker_epoch=7, fenced=False, in_controlled_shutdown=False)


def durable_leader(isr=(LEADER, F1, F2), leo=0, durable=0) -> LeaderPartitionState:
    return LeaderPartitionState(
        leader_id=LEADER, leader_epoch=EPOCH, partition_epoch=1, replicas=[LEADER, F1, F2],
        isr=frozenset(isr), leader_history=((EPOCH, 0),), log_end_offset=leo, high_watermark=0,
        min_insync_replicas=2, now_ms=0, durable_offset=durable,
    )


def fetch(state: LeaderPartitionState, replica: int, offset: int, durable: int):
    return state.on_follower_fetch(FollowerFetch(replica, 7, EPOCH, offset, EPOCH, durable_offset=durable), UP, 0, 0)


@pytest.mark.parametrize(
    "leader_durable, follower_reports, expected_hw",
    [
        (0, [(F1, 10, 10), (F2, 10, 10)], 0),        # the leader has not fsynced: nothing committed
        (10, [(F1, 10, 10), (F2, 10, 4)], 4),        # F2 holds 10 but fsynced only 4
        (10, [(F1, 10, 10), (F2, 10, -1)], 0),       # a follower that says nothing holds the HW
        (6, [(F1, 10, 10), (F2, 10, 10)], 6),        # the leader's own fsync is the limit
        (10, [(F1, 10, 10), (F2, 10, 10)], 10),
        (10, [(F1, 10, 10), (F2, 8, 12)], 8),        # a durable offset above the fetch offset counts as the fetch offset
    ],
)
def test_hw_is_the_least_durable_offset_over_the_isr(leader_durable, follower_reports, expected_hw) -> None:
    state = durable_leader()
    state.on_leader_append(10, 0)
    state.on_leader_synced(leader_durable, 0)
    for replica, offset, durable in follower_reports:
        fetch(state, replica, offset, durable)
    assert state.high_watermark == expected_hw


def test_acks_all_completes_only_when_every_isr_member_fsynced() -> None:
    state = durable_leader()
    state.on_leader_append(5, 0)
    state.add_delayed_produce("p", 5, deadline_ms=1000, now_ms=0)
    assert fetch(state, F1, 5, 5).decisions.completed == ()
    assert fetch(state, F2, 5, 5).decisions.completed == ()  # both followers durable, the leader not yet
    decisions = state.on_leader_synced(5, 0)
    assert decisions.high_watermark == 5
    assert [(o.token, o.error) for o in decisions.completed] == [("p", ErrorCode.NONE)]


def test_out_of_isr_follower_does_not_hold_the_durable_hw() -> None:
    state = durable_leader(isr=(LEADER, F1))
    state.on_leader_append(5, 0)
    state.on_leader_synced(5, 0)  # F2, outside the ISR, has never fetched
    assert fetch(state, F1, 5, 3).decisions.high_watermark == 3


def test_page_cache_durability_counts_log_end_offsets() -> None:
    """The negative of the above: without a durable offset, fetch offsets commit."""
    state = LeaderPartitionState(
        leader_id=LEADER, leader_epoch=EPOCH, partition_epoch=1, replicas=[LEADER, F1, F2],
        isr=frozenset((LEADER, F1, F2)), leader_history=((EPOCH, 0),), log_end_offset=0, high_watermark=0,
        min_insync_replicas=2, now_ms=0,
    )
    state.on_leader_append(10, 0)
    fetch(state, F1, 10, -1)
    fetch(state, F2, 10, -1)
    assert state.high_watermark == 10
    with pytest.raises(AssertionError):
        state.on_leader_synced(10, 0)
