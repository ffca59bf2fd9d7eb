"""Planning a group's offset reset (data_plane/client/group_admin.py ``plan_reset``): each
kind of reset, clamped to the log, and the refusal to shift what was never committed."""

from __future__ import annotations

import pytest

from data_plane.client.group_admin import plan_reset

TP0, TP1 = ("t", 0), ("t", 1)
CURRENT = {TP0: 50, TP1: None}
START = {TP0: 10, TP1: 0}
END = {TP0: 100, TP1: 30}


def targets(kind, value=None, current=CURRENT, by_time=None):
    return {(s.topic, s.partition): (s.current, s.target) for s in plan_reset(kind, value, current, START, END, by_time)}


def test_earliest_latest_and_offset_clamped_to_the_log():
    assert targets("to-earliest") == {TP0: (50, 10), TP1: (None, 0)}
    assert targets("to-latest") == {TP0: (50, 100), TP1: (None, 30)}
    assert targets("to-offset", 20) == {TP0: (50, 20), TP1: (None, 20)}
    assert targets("to-offset", 5) == {TP0: (50, 10), TP1: (None, 5)}
    assert targets("to-offset", 1000) == {TP0: (50, 100), TP1: (None, 30)}


def test_datetime_without_a_later_record_goes_to_the_end():
    assert targets("to-datetime", 123, by_time={TP0: 70, TP1: -1}) == {TP0: (50, 70), TP1: (None, 30)}


def test_shift_by_moves_from_the_committed_offset():
    assert targets("shift-by", -45, current={TP0: 50}) == {TP0: (50, 10)}
    assert targets("shift-by", 7, current={TP0: 50}) == {TP0: (50, 57)}
    with pytest.raises(ValueError, match="no committed offset"):
        targets("shift-by", 1)
