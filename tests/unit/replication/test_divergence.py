"""Epoch history arithmetic and both sides of divergence (KIP-101, KIP-279, KIP-595)."""

import pytest

from data_plane.replication.divergence import (
    DivergingEpoch,
    FetchRejected,
    ServeFrom,
    check_follower_fetch,
    truncation_for_diverging_epoch,
)
from data_plane.replication.epoch_history import (
    EpochEndOffset,
    assign_epoch,
    end_offset_for_epoch,
    truncate_from_end,
)
from server_common.errors import ErrorCode

HISTORY = ((1, 0), (3, 4), (5, 6))  # leader log end 9


@pytest.mark.parametrize(
    "requested, expected",
    [
        (5, EpochEndOffset(5, 9)),   # latest epoch ends at the log end
        (3, EpochEndOffset(3, 6)),   # held epoch ends where the next begins
        (4, EpochEndOffset(3, 6)),   # never held: largest held epoch below it (KIP-279)
        (2, EpochEndOffset(1, 4)),
        (0, EpochEndOffset(0, 0)),   # older than the history: where the history starts
        (6, None),                   # newer than anything seen
        (-1, None),
    ],
)
def test_end_offset_for_epoch(requested: int, expected: EpochEndOffset | None) -> None:
    assert end_offset_for_epoch(HISTORY, 9, requested) == expected


def test_end_offset_for_epoch_on_empty_history() -> None:
    assert end_offset_for_epoch((), 0, 0) is None


@pytest.mark.parametrize(
    "history, epoch, start, expected",
    [
        ((), 0, 0, ((0, 0),)),
        (((0, 0),), 2, 5, ((0, 0), (2, 5))),
        (((0, 0),), 0, 5, ((0, 0),)),                  # same epoch: already covered
        (((0, 0), (2, 5)), 3, 5, ((0, 0), (3, 5))),    # empty epoch 2 replaced (elected twice)
        (((0, 0), (1, 3)), 0, 3, ((0, 0),)),           # empty epoch 1 led, then follower of 0
    ],
)
def test_assign_epoch(history, epoch, start, expected) -> None:
    assert assign_epoch(history, epoch, start) == expected


def test_assign_epoch_refuses_epochs_going_backwards_over_records() -> None:
    with pytest.raises(AssertionError):
        assign_epoch(((0, 0), (2, 3)), 1, 5)


def test_truncate_from_end_drops_epochs_starting_at_or_after_the_offset() -> None:
    assert truncate_from_end(HISTORY, 6) == ((1, 0), (3, 4))
    assert truncate_from_end(HISTORY, 5) == ((1, 0), (3, 4))
    assert truncate_from_end(HISTORY, 0) == ()


@pytest.mark.parametrize(
    "fetch_offset, last_epoch, log_start, expected",
    [
        (9, 5, 0, ServeFrom(9)),                    # caught up
        (7, 5, 0, ServeFrom(7)),
        (5, 3, 0, ServeFrom(5)),                    # behind, same lineage
        (6, 3, 0, ServeFrom(6)),                    # exactly at the end of epoch 3
        (7, 3, 0, DivergingEpoch(3, 6)),            # holds epoch-3 records we do not
        (5, 4, 0, DivergingEpoch(3, 6)),            # holds an epoch we never had
        (4, 2, 0, DivergingEpoch(1, 4)),
        (10, 5, 0, DivergingEpoch(5, 9)),           # ahead of us in our own epoch
        (0, -1, 0, ServeFrom(0)),                   # empty follower
        (10, -1, 0, FetchRejected(ErrorCode.OFFSET_OUT_OF_RANGE)),
        (2, 1, 3, FetchRejected(ErrorCode.OFFSET_OUT_OF_RANGE)),  # below log start
        (9, 6, 0, FetchRejected(ErrorCode.OFFSET_OUT_OF_RANGE)),  # epoch we cannot place
    ],
)
def test_check_follower_fetch(fetch_offset, last_epoch, log_start, expected) -> None:
    assert check_follower_fetch(
        leader_history=HISTORY,
        log_start_offset=log_start,
        log_end_offset=9,
        fetch_offset=fetch_offset,
        last_fetched_epoch=last_epoch,
    ) == expected


@pytest.mark.parametrize(
    "diverging, follower_history, follower_leo, offset, complete",
    [
        # holds the epoch: min(leader end, own end)
        (DivergingEpoch(3, 6), ((1, 0), (3, 4)), 8, 6, True),
        (DivergingEpoch(3, 6), ((1, 0), (3, 4), (4, 5)), 7, 5, True),
        # lacks the epoch: cut to where its own next epoch starts, and ask again
        (DivergingEpoch(3, 6), ((1, 0), (2, 2), (4, 5)), 8, 5, False),
        (DivergingEpoch(1, 4), ((1, 0), (2, 2)), 5, 2, True),
        # leader's epoch older than the follower's whole history
        (DivergingEpoch(0, 3), ((1, 2),), 5, 2, True),
        # never beyond the follower's own end
        (DivergingEpoch(1, 9), ((1, 0),), 4, 4, True),
        # no history at all: only the leader's end offset to go by
        (DivergingEpoch(1, 2), (), 5, 2, True),
    ],
)
def test_truncation_for_diverging_epoch(diverging, follower_history, follower_leo, offset, complete) -> None:
    truncation = truncation_for_diverging_epoch(diverging, follower_history, follower_leo)
    assert (truncation.offset, truncation.complete) == (offset, complete)
