"""The follower core's decisions, one row per rule (data_plane/replication/follower.py).

Each row is the follower's log, one leader answer, and the decision expected. The same core
runs in the broker's fetcher and in the transcripts and interleaving tests of this folder.
"""

import dataclasses

import pytest

from data_plane.replication.divergence import DivergingEpoch
from data_plane.replication.epoch_history import as_history
from data_plane.replication.follower import (
    METADATA_SKEW_BACKOFF_MS,
    PARTITION_BACKOFF_MS,
    Append,
    BackOff,
    FollowerCore,
    FollowerLog,
    Ignore,
    LeaderAnswer,
    RestartAt,
    SetHighWatermark,
    Truncate,
    apply_stale_answers,
)
from server_common.errors import ErrorCode

# The follower: log [0, 10), epoch 0 from 0 and epoch 2 from 6, HW 4, following epoch 3.
LOG = FollowerLog(log_start_offset=0, log_end_offset=10, history=as_history([(0, 0), (2, 6)]),
                  high_watermark=4, leader_epoch=3)


def answer(**changes) -> LeaderAnswer:
    fields = dict(asked_leader_epoch=3, asked_fetch_offset=10, error=ErrorCode.NONE, message="", records=b"",
                  high_watermark=8, log_start_offset=0, log_end_offset=12, diverging=None)
    fields.update(changes)
    return LeaderAnswer(**fields)


def log(**changes) -> FollowerLog:
    fields = dict(log_start_offset=LOG.log_start_offset, log_end_offset=LOG.log_end_offset, history=LOG.history,
                  high_watermark=LOG.high_watermark, leader_epoch=LOG.leader_epoch)
    fields.update(changes)
    return FollowerLog(**fields)


CASES = {
    # records and the HW
    "records are appended with the leader's HW": (LOG, answer(records=b"xy"), Append(b"xy", 8, 4)),
    "no records: HW is the leader's, capped by our end": (LOG, answer(high_watermark=12), SetHighWatermark(10)),
    "no records: an answer never lowers the HW": (LOG, answer(high_watermark=2), SetHighWatermark(4)),
    # stale answers
    "asked in another leader epoch: stale": (LOG, answer(asked_leader_epoch=2, records=b"x"), Ignore),
    "asked from another log end: stale": (LOG, answer(asked_fetch_offset=9, records=b"x"), Ignore),
    # errors
    "metadata skew backs off briefly": (LOG, answer(error=ErrorCode.FENCED_LEADER_EPOCH), BackOff(METADATA_SKEW_BACKOFF_MS, "", False)),
    "not leader backs off briefly": (LOG, answer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER), BackOff(METADATA_SKEW_BACKOFF_MS, "", False)),
    "any other error backs off longer": (LOG, answer(error=ErrorCode.STORAGE_ERROR), BackOff(PARTITION_BACKOFF_MS, "", False)),
    # diverging epoch (KIP-279)
    "held diverging epoch: min of both ends": (LOG, answer(diverging=DivergingEpoch(2, 8)), Truncate(8, "", True)),
    "missing diverging epoch: cut where ours would end, ask again": (
        LOG, answer(diverging=DivergingEpoch(1, 7)), Truncate(6, "", False)),
    "diverging cut before our log start restarts there": (
        log(log_start_offset=7, history=as_history([(2, 7)]), high_watermark=7),
        answer(diverging=DivergingEpoch(1, 5)), RestartAt(5, "")),
    "a cut that changes nothing backs off with a warning": (
        LOG, answer(diverging=DivergingEpoch(2, 12)), BackOff(PARTITION_BACKOFF_MS, "", True)),
    "dropping an empty epoch at the log end is a change": (
        log(history=as_history([(0, 0), (2, 6), (3, 10)])), answer(diverging=DivergingEpoch(2, 12)),
        Truncate(10, "", True)),
    # OFFSET_OUT_OF_RANGE (Kafka's fetchOffsetAndTruncate)
    "behind the leader's log start: restart at it": (
        LOG, answer(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=15, log_end_offset=20), RestartAt(15, "")),
    "ahead of the leader's log end: truncate to it": (
        LOG, answer(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_end_offset=7), Truncate(7, "", True)),
    "ahead of the leader's end, below our log start: restart there": (
        log(log_start_offset=8, history=(), high_watermark=8),
        answer(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_end_offset=5), RestartAt(5, "")),
    "leader holds our offset but not our epoch: back off with a warning": (
        LOG, answer(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_end_offset=12), BackOff(PARTITION_BACKOFF_MS, "", True)),
    "the same with the plain pairs the broker's epoch cache hands": (
        log(history=((0, 0), (2, 6))), answer(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_end_offset=12),
        BackOff(PARTITION_BACKOFF_MS, "", True)),
}


@pytest.mark.parametrize("follower, leader_answer, expected", CASES.values(), ids=CASES.keys())
def test_decision(follower: FollowerLog, leader_answer: LeaderAnswer, expected) -> None:
    decided = FollowerCore().decide(follower, leader_answer)
    if isinstance(expected, type):
        assert isinstance(decided, expected), decided
        return
    assert type(decided) is type(expected), decided
    if isinstance(expected, (Truncate, RestartAt, BackOff)):
        assert decided.reason, "every cut and back-off says why"
        decided = dataclasses.replace(decided, reason="")
    assert decided == expected


def test_append_sets_the_hw_from_the_new_log_end() -> None:
    decided = FollowerCore().decide(LOG, answer(records=b"xy", high_watermark=11))
    assert isinstance(decided, Append)
    assert decided.high_watermark_after(12) == 11  # leader's HW below our new end
    assert decided.high_watermark_after(10) == 10  # capped by what we hold
    assert Append(b"x", 2, 4).high_watermark_after(10) == 4  # never lowered


def test_stale_rule_is_the_one_a_negative_control_replaces() -> None:
    stale = answer(asked_leader_epoch=2, records=b"x")
    assert isinstance(FollowerCore().decide(LOG, stale), Ignore)
    assert FollowerCore(stale_answer=apply_stale_answers).decide(LOG, stale) == Append(b"x", 8, 4)


def test_a_view_that_cannot_exist_is_refused() -> None:
    impossible = FollowerLog(log_start_offset=0, log_end_offset=5, history=(), high_watermark=6, leader_epoch=0)
    with pytest.raises(AssertionError):
        FollowerCore().decide(impossible, answer(asked_fetch_offset=5))
