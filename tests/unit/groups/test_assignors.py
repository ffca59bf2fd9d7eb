"""Assignors: every subscribed partition assigned exactly once to a member that subscribes to
its topic, balanced, and (uniform/sticky) moving as few partitions as balance allows."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from data_plane.groups.assignors import ASSIGNORS, range_assignor, uniform


def _all(topics):
    return {(t, p) for t, n in topics.items() for p in range(n)}


def _check_valid(result, subs, topics):
    seen = [tp for ps in result.values() for tp in ps]
    assert len(seen) == len(set(seen)), "a partition assigned twice"
    for member, ps in result.items():
        assert all(t in subs[member] for t, _ in ps), (member, ps)
    subscribed = {t for s in subs.values() for t in s}
    assert set(seen) == {tp for tp in _all(topics) if tp[0] in subscribed}


def _moved(before, after):
    return sum(len(after[m] - before.get(m, frozenset())) for m in after)


def test_uniform_balances_and_a_join_moves_only_what_the_newcomer_gets():
    topics = {"a": 60}
    subs = {f"m{i}": frozenset({"a"}) for i in range(10)}
    first = uniform(subs, topics, {})
    _check_valid(first, subs, topics)
    assert {len(ps) for ps in first.values()} == {6}
    subs["m10"] = frozenset({"a"})
    second = uniform(subs, topics, first)
    _check_valid(second, subs, topics)
    assert max(len(p) for p in second.values()) - min(len(p) for p in second.values()) <= 1
    assert _moved(first, second) == len(second["m10"]) == 5  # 60 // 11


def test_uniform_leave_moves_only_the_leavers_partitions():
    topics = {"a": 7, "b": 5}
    subs = {m: frozenset({"a", "b"}) for m in ("x", "y", "z")}
    first = uniform(subs, topics, {})
    del subs["y"]
    second = uniform(subs, topics, first)
    _check_valid(second, subs, topics)
    for m in ("x", "z"):
        assert first[m] <= second[m]


def test_uniform_respects_heterogeneous_subscriptions():
    topics = {"a": 4, "b": 4}
    subs = {"x": frozenset({"a"}), "y": frozenset({"a", "b"}), "z": frozenset({"b"})}
    result = uniform(subs, topics, {})
    _check_valid(result, subs, topics)
    assert max(len(p) for p in result.values()) - min(len(p) for p in result.values()) <= 1


def test_range_gives_contiguous_ranges_per_topic():
    result = range_assignor({"m1": frozenset({"t"}), "m2": frozenset({"t"})}, {"t": 5}, {})
    assert result == {"m1": frozenset({("t", 0), ("t", 1), ("t", 2)}), "m2": frozenset({("t", 3), ("t", 4)})}


members = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True)


@settings(max_examples=200, deadline=None)
@given(members, members, st.integers(1, 40), st.sampled_from(sorted(ASSIGNORS)))
def test_every_assignor_is_valid_and_uniform_is_balanced_and_sticky(before, after, partitions, name):
    topics = {"t": partitions}
    first = ASSIGNORS[name]({m: frozenset({"t"}) for m in before}, topics, {})
    subs = {m: frozenset({"t"}) for m in after}
    second = ASSIGNORS[name](subs, topics, first)
    _check_valid(second, subs, topics)
    counts = [len(p) for p in second.values()]
    assert max(counts) - min(counts) <= 1
    if name != "range":
        # sticky: a member that held no more than its share keeps every partition it had
        for m in after:
            if m in first and len(first[m]) <= partitions // len(after):
                assert first[m] <= second[m], (m, first[m], second[m])
