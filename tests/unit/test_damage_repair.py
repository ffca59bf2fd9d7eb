"""When the broker gives up on repairing a damaged range (the rule; the loop runs in the
integration tests, tests/integration/test_corruption.py)."""

from __future__ import annotations

import pytest

from data_plane.broker.damage_repair import unrepairable


@pytest.mark.parametrize(
    "answers, is_leader, lost",
    [
        ([], False, "no other replica"),
        ([], True, "no other replica"),
        ([b"", b""], True, "no other replica holds it"),
        ([b"", b""], False, None),  # a follower keeps asking: its leader may come back with a copy
        ([b"", None], True, None),  # a replica that did not answer may hold it
        ([b"", b"\x00copy that did not fit"], True, None),
    ],
)
def test_a_range_is_lost_only_when_no_replica_can_ever_give_it_back(answers, is_leader, lost) -> None:
    assert unrepairable(answers, is_leader) == lost
