"""KIP-320's position check (data_plane/client/truncation.py): a position stands only while the
leader's log holds the epoch of the last record read up to at least that position."""

from __future__ import annotations

import pytest

from data_plane.client.offset_lookup import EpochEnd
from data_plane.client.truncation import Diverged, LogTruncationError, Position, check_position


@pytest.mark.parametrize("position, answer, expected", [
    (Position(30, 0), EpochEnd(0, 30), None),  # the epoch ends exactly at the position: nothing lost
    (Position(30, 0), EpochEnd(2, 45), None),  # the current epoch: the log end is past the position
    (Position(30, 0), EpochEnd(0, 10), Diverged(10, 0)),  # unclean election: records 10..29 gone
    (Position(30, 3), EpochEnd(1, 12), Diverged(12, 1)),  # the leader never had epoch 3: diverged where epoch 1 ends
    (Position(30, 3), EpochEnd(-1, -1), Diverged(None, -1)),  # no epoch at or below 3: the divergence point is unknown
])
def test_check_position(position: Position, answer: EpochEnd, expected: Diverged | None) -> None:
    assert check_position(position, answer) == expected


def test_the_error_names_the_partition_the_loss_and_what_to_do() -> None:
    error = LogTruncationError(("orders", 2), Position(30, 0), Diverged(10, 0))
    assert (error.code, error.retriable, error.divergent_offset) == ("LOG_TRUNCATION", False, 10)
    text = str(error)
    assert "orders-2" in text and "position 30" in text and "seek(('orders', 2), 10)" in text and "auto_offset_reset" in text
    unknown = str(LogTruncationError(("orders", 2), Position(30, 3), Diverged(None, -1)))
    assert "no record of its epoch" in unknown and "seek to an offset of your choice" in unknown
