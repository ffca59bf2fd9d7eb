"""FollowerSession: what each round of a fetch session names (KIP-227's incremental fetch,
follower side). A full list first; afterwards only changed positions, partitions whose last
answer was not a clean one, and partitions this follower is not in the ISR of."""

import pytest

from data_plane.replication.follower import (
    Append,
    BackOff,
    FetchPosition,
    FollowerSession,
    Ignore,
    RestartAt,
    SetHighWatermark,
    Truncate,
    asks_again,
)

A, B, C = ("t", 0), ("t", 1), ("t", 2)
AT_10 = FetchPosition(10, 1, 1)
AT_12 = FetchPosition(12, 1, 1)
NEW_EPOCH = FetchPosition(10, 1, 2)


def started(positions: dict) -> FollowerSession:
    session = FollowerSession()
    first = session.plan(positions, frozenset(), set(), complete=True)
    assert first.full and dict(first.partitions) == positions
    return session


def test_a_new_stream_names_every_partition_then_an_idle_round_names_none() -> None:
    session = started({A: AT_10, B: AT_10})
    idle = session.plan({A: AT_10, B: AT_10}, frozenset(), set(), complete=True)
    assert not idle.full and idle.partitions == ()
    assert session.held(A) == AT_10


@pytest.mark.parametrize("moved", [AT_12, NEW_EPOCH, FetchPosition(10, 0, 1)], ids=["log-end", "leader-epoch", "last-epoch"])
def test_a_moved_position_is_named_alone(moved) -> None:
    session = started({A: AT_10, B: AT_10})
    request = session.plan({A: moved, B: AT_10}, frozenset(), set(), complete=False)
    assert not request.full and request.partitions == ((A, moved),)
    assert session.held(A) == moved


def test_a_partition_leaving_the_session_makes_the_next_round_full() -> None:
    session = started({A: AT_10, B: AT_10})
    assert session.leaves(B) and not session.leaves(C)
    request = session.plan({A: AT_10}, frozenset(), set(), complete=True)
    assert request.full and request.partitions == ((A, AT_10),)
    assert session.held(B) is None


def test_a_partition_joining_is_named_without_a_full_list() -> None:
    session = started({A: AT_10})
    request = session.plan({A: AT_10, C: AT_12}, frozenset(), set(), complete=True)
    assert not request.full and request.partitions == ((C, AT_12),)


def test_a_partition_not_examined_stays_held_in_a_partial_round() -> None:
    session = started({A: AT_10, B: AT_10})
    request = session.plan({A: AT_12}, frozenset(), set(), complete=False)
    assert not request.full and request.partitions == ((A, AT_12),)
    assert session.held(B) == AT_10


def test_a_backing_off_partition_stays_held_but_unnamed_until_its_backoff_ends() -> None:
    session = started({A: AT_10})
    session.answered(A, BackOff(200, "leader refused the fetch", warn=False))
    assert A in session.to_examine()
    waiting = session.plan({A: AT_10}, frozenset({A}), set(), complete=False)
    assert waiting.partitions == () and session.held(A) == AT_10
    again = session.plan({A: AT_10}, frozenset(), set(), complete=False)
    assert again.partitions == ((A, AT_10),)
    assert session.plan({A: AT_10}, frozenset(), set(), complete=False).partitions == ()


def test_a_partition_out_of_the_isr_is_named_every_round_until_it_is_in() -> None:
    """The leader re-derives an ISR expansion only from a fetch that names the partition."""
    session = started({A: AT_10, B: AT_10})
    for _ in range(3):
        request = session.plan({A: AT_10}, frozenset(), {A}, complete=False)
        assert request.partitions == ((A, AT_10),)
        assert session.to_examine() == {A}
    assert session.plan({A: AT_10}, frozenset(), set(), complete=False).partitions == ()
    assert session.to_examine() == set()


@pytest.mark.parametrize(
    "decision, again",
    [
        (Append(b"x", 5, 3), False),
        (SetHighWatermark(5), False),
        (Ignore("stale"), True),
        (BackOff(10, "skew", warn=False), True),
        (Truncate(3, "diverged"), True),
        (RestartAt(20, "behind the log start"), True),
        (None, True),  # the fetcher could not carry the decision out
    ],
)
def test_every_answer_but_a_clean_one_is_asked_about_again(decision, again) -> None:
    session = started({A: AT_10})
    session.answered(A, decision)
    assert A in session.to_examine()
    assert (session.plan({A: AT_10}, frozenset(), set(), complete=False).partitions == ((A, AT_10),)) == again
    if decision is not None:
        assert asks_again(decision) == again


def test_a_full_list_needs_every_partition_examined() -> None:
    session = FollowerSession()
    with pytest.raises(AssertionError):
        session.plan({A: AT_10}, frozenset(), set(), complete=False)
