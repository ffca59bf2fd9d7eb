"""The consumer-group checks (chaos/checker/group_checks.py) on hand-written histories: each
kind caught by a history that breaks it, and a clean handover that must pass."""

from __future__ import annotations

from chaos.checker.group_checks import check_group, commits_backwards, commits_behind_reads, double_owners, undelivered
from chaos.group_history import CommittedObservation, GroupPoll, OwnershipEvent


def ev(seq, member, kind, partitions=(), epoch=1):
    return OwnershipEvent(seq, member, kind, frozenset(partitions), epoch)


CLEAN_HANDOVER = [
    ev(1, "a", "assigned", {0, 1}), ev(2, "a", "owned", {0, 1}),
    ev(3, "b", "assigned", set()),          # b joins: 1 is still a's
    ev(4, "a", "assigned", {0}),            # a told to give up 1
    ev(5, "a", "owned", {0}),               # a reports 1 gone
    ev(6, "b", "assigned", {1}),            # only now b gets it
    ev(7, "a", "removed"), ev(8, "b", "assigned", {0, 1}),
]


def kinds(found):
    return sorted({a.kind for a in found})


def test_a_clean_handover_passes():
    assert list(double_owners(CLEAN_HANDOVER)) == []


def test_a_partition_given_before_its_revocation_was_acknowledged_is_caught():
    unsafe = [ev(1, "a", "assigned", {0, 1}), ev(2, "a", "owned", {0, 1}), ev(3, "a", "assigned", {0}), ev(4, "b", "assigned", {1})]
    found = list(double_owners(unsafe))
    assert [(a.partition, a.details["holders"]) for a in found] == [(1, ["a"])]


def test_given_but_not_yet_reported_counts_as_held():
    assert kinds(double_owners([ev(1, "a", "assigned", {0}), ev(2, "b", "assigned", {0})])) == ["double-owner"]


def test_undelivered_acknowledged_records():
    acked = {0: {0: "v0", 1: "v1", 2: "v2"}}
    polls = [GroupPoll("a", 0, 1, {0: [(0, "v0"), (1, "v1")]}), GroupPoll("b", 1, 2, {0: [(1, "v1")]})]
    found = list(undelivered(acked, polls))
    assert [(a.kind, a.details["offsets"]) for a in found] == [("group-undelivered", [2])]
    assert list(undelivered(acked, [*polls, GroupPoll("b", 2, 3, {0: [(2, "v2")]})])) == []


def test_commits_going_backwards():
    obs = [CommittedObservation(1.0, {0: 10, 1: 5}), CommittedObservation(2.0, {0: 12, 1: 5}), CommittedObservation(3.0, {0: 11})]
    found = list(commits_backwards(obs))
    assert [(a.partition, a.details["from"], a.details["to"]) for a in found] == [(0, 12, 11)]
    assert list(commits_backwards(obs[:2])) == []


def test_final_commits_must_cover_reads():
    polls = [GroupPoll("a", 0, 1, {0: [(0, "v"), (1, "w")], 1: [(0, "x")]})]
    assert list(commits_behind_reads(CommittedObservation(9, {0: 2, 1: 1}), polls)) == []
    found = list(commits_behind_reads(CommittedObservation(9, {0: 1}), polls))
    assert [(a.partition, a.details["committed"]) for a in found] == [(0, 1), (1, None)]


def test_check_group_runs_every_check():
    polls = [GroupPoll("a", 0, 1, {0: [(0, "v")]})]
    clean = check_group({0: {0: "v"}}, polls, [CommittedObservation(0.5, {0: 0})], CommittedObservation(9, {0: 1}), CLEAN_HANDOVER)
    assert clean == []
    broken = check_group({0: {0: "v", 1: "w"}}, polls, [CommittedObservation(0.5, {0: 3})], CommittedObservation(9, {0: 1}),
                         [ev(1, "a", "assigned", {0}), ev(2, "b", "assigned", {0})])
    assert kinds(broken) == ["commit-backwards", "double-owner", "group-undelivered"]


def test_members_own_record_catches_a_takeover_before_the_release():
    from chaos.checker.group_checks import double_owners_seen_by_members
    from chaos.group_history import MemberOwnershipChange as C

    clean = [C(1.0, "a", gained=frozenset({0, 1})), C(2.0, "a", released=frozenset({1})), C(2.0, "b", gained=frozenset({1})),
             C(5.0, "a", released=frozenset({0})), C(9.0, "b", gained=frozenset({0}))]
    assert list(double_owners_seen_by_members(clean)) == []  # a release and a take-over at one instant: release first
    unsafe = [C(1.0, "a", gained=frozenset({0, 1})), C(2.0, "b", gained=frozenset({1})), C(2.3, "a", released=frozenset({1}))]
    found = list(double_owners_seen_by_members(unsafe))
    assert [(a.partition, a.details["holders"], a.details["source"]) for a in found] == [(1, ["a"], "members")]
