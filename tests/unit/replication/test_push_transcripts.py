"""The races the push path brings, as transcripts through the two pure cores.

A leader pushes what it appends into a caught-up follower's held fetch
(`data_plane/broker/fetch_session.py`); the follower appends it through `FollowerCore` and
acknowledges with its next fetch, which the leader core (`LeaderPartitionState`) takes like
any other. Each transcript plays one race step by step, with records as (epoch, value)
pairs, and checks the guard that keeps the rules: a stale push is dropped by the follower,
an acknowledgement counts only what the follower can hold. Each guard is named in the test;
without it the transcript ends with a wrong log or a HW over records the ISR lacks.
"""

from data_plane.replication.divergence import DivergingEpoch
from data_plane.replication.epoch_history import as_history
from data_plane.replication.follower import Append, FollowerCore, FollowerLog, Ignore, LeaderAnswer
from data_plane.replication.partition_state import BrokerStatus, FollowerFetch, LeaderPartitionState
from server_common.errors import ErrorCode

LEADER, F1, F2 = 1, 2, 3
UP = BrokerStatus(broker_epoch=7, fenced=False, in_controlled_shutdown=False)
CORE = FollowerCore()


def leader(epoch: int, history: tuple[tuple[int, int], ...], leo: int, hw: int) -> LeaderPartitionState:
    return LeaderPartitionState(
        leader_id=LEADER, leader_epoch=epoch, partition_epoch=1, replicas=[LEADER, F1, F2],
        isr=frozenset({LEADER, F1, F2}), leader_history=history, log_end_offset=leo, high_watermark=hw,
        min_insync_replicas=2, now_ms=0,
    )


def follower(leo: int, epoch: int, history: tuple[tuple[int, int], ...], hw: int = 0) -> FollowerLog:
    return FollowerLog(log_start_offset=0, log_end_offset=leo, history=as_history(history), high_watermark=hw,
                       leader_epoch=epoch)


def push(asked_epoch: int, asked_offset: int, base: int, records: list, leader_leo: int, hw: int) -> LeaderAnswer:
    """A pushed answer to a fetch held at (``asked_epoch``, ``asked_offset``)."""
    return LeaderAnswer(asked_leader_epoch=asked_epoch, asked_fetch_offset=asked_offset, error=ErrorCode.NONE,
                        message="", records=records, high_watermark=hw, log_start_offset=0,
                        log_end_offset=leader_leo, records_base_offset=base)


def ack(state: LeaderPartitionState, replica: int, offset: int, last_epoch: int, epoch: int,
        acknowledgeable: int | None, now_ms: int = 1):
    fetch = FollowerFetch(replica, 7, epoch, offset, last_epoch, acknowledgeable=acknowledgeable)
    return state.on_follower_fetch(fetch, UP, 0, now_ms)


def test_a_push_that_crosses_a_leader_change_is_dropped() -> None:
    """F1 holds a fetch at 5 in epoch 3; the leader appends offset 5 and pushes it; before the
    push arrives F1 learns of epoch 4 (another leader, which may not have offset 5). Guard:
    `drop_stale_answers`' leader-epoch check."""
    log = follower(leo=5, epoch=4, history=((0, 0), (3, 2)))
    decision = CORE.decide(log, push(asked_epoch=3, asked_offset=5, base=5, records=[(3, "x")], leader_leo=6, hw=5))
    assert isinstance(decision, Ignore), decision


def test_a_push_to_a_follower_that_has_just_truncated_is_dropped() -> None:
    """F1 held a fetch at 10; a diverging answer for another round made it truncate to 8
    before the push of offsets 10-11 arrives: appending would leave a gap. Guards:
    `drop_stale_answers`' asked-offset check, and the records' base offset check behind it
    (either one drops it; without both the test fails)."""
    log = follower(leo=8, epoch=3, history=((0, 0), (3, 6)))
    decision = CORE.decide(log, push(asked_epoch=3, asked_offset=10, base=10, records=[(3, "a"), (3, "b")],
                                     leader_leo=12, hw=8))
    assert isinstance(decision, Ignore), decision


def test_pushes_reordered_with_fetch_answers_are_dropped_unless_they_continue_the_log() -> None:
    """F1 asks at 10. A push built for a later position (records from 12) overtakes the fetch
    answer that carries 10-11, and both name the fetch at 10. Only the one continuing the log
    applies; after it the follower's log end moved, so the late one is stale too. Guard: the
    records' base offset check (`LeaderAnswer.records_base_offset`)."""
    log = follower(leo=10, epoch=3, history=((0, 0), (3, 6)))
    early_push = push(asked_epoch=3, asked_offset=10, base=12, records=[(3, "c")], leader_leo=13, hw=10)
    assert isinstance(CORE.decide(log, early_push), Ignore)
    fetched = push(asked_epoch=3, asked_offset=10, base=10, records=[(3, "a"), (3, "b")], leader_leo=12, hw=10)
    assert isinstance(CORE.decide(log, fetched), Append)
    after = follower(leo=12, epoch=3, history=((0, 0), (3, 6)), hw=10)
    assert isinstance(CORE.decide(after, fetched), Ignore)


def test_an_acknowledgement_of_offsets_the_leader_has_since_truncated_does_not_move_the_hw() -> None:
    """In epoch 3 the old leader pushed offsets 5-7 to F1. It lost leadership; the new leader
    (this one, epoch 4) held epoch 3 only to 6 and appended offset 6 in epoch 4. F1, now in
    epoch 4, acknowledges 8 with last epoch 3: its offsets 6-7 are not ours. Guard: the
    divergence check before `_update_progress` in `on_follower_fetch`."""
    state = leader(epoch=4, history=((0, 0), (3, 2), (4, 6)), leo=7, hw=5)
    ack(state, F2, 7, last_epoch=4, epoch=4, acknowledgeable=7)
    decided = ack(state, F1, 8, last_epoch=3, epoch=4, acknowledgeable=8)
    assert decided.fetch == DivergingEpoch(3, 6)
    assert state.high_watermark == 5 and state.progress[F1].log_end_offset == -1


def test_a_follower_acknowledging_an_offset_it_never_received_does_not_move_the_hw() -> None:
    """The leader's log ends at 10; the session sent F1 records up to 8 only. F1 (a faulty or
    confused follower) acknowledges 10. Guard: `LeaderPartitionState._acknowledged` caps the
    acknowledgement at what the session sent (`FollowerFetch.acknowledgeable`)."""
    state = leader(epoch=3, history=((0, 0), (3, 4)), leo=10, hw=4)
    ack(state, F2, 10, last_epoch=3, epoch=3, acknowledgeable=10)
    ack(state, F1, 10, last_epoch=3, epoch=3, acknowledgeable=8)
    assert state.progress[F1].log_end_offset == 8
    assert state.high_watermark == 8
    ack(state, F1, 10, last_epoch=3, epoch=3, acknowledgeable=10)  # the rest was sent: now it counts
    assert state.high_watermark == 10


def test_a_plain_fetch_is_taken_at_its_word_and_a_restart_at_the_log_start_always_counts() -> None:
    """No session bound (a fetch as Kafka's): the follower's offset counts as before. With a
    bound below our log start (the follower restarted at it after OFFSET_OUT_OF_RANGE), the log
    start counts: nothing below it exists to be sent."""
    state = leader(epoch=3, history=((0, 0), (3, 4)), leo=10, hw=4)
    ack(state, F1, 10, last_epoch=3, epoch=3, acknowledgeable=None)
    assert state.progress[F1].log_end_offset == 10
    fetch = FollowerFetch(F2, 7, 3, 6, -1, acknowledgeable=2)
    state.on_follower_fetch(fetch, UP, 6, 1)
    assert state.progress[F2].log_end_offset == 6
