"""KIP-101 and KIP-279 failure scenarios, and the out-of-range paths, as event transcripts.

Each scenario is a function that replays one sequence of events against the in-memory
cluster (`replica_model.Cluster`), whose leaders decide through `LeaderPartitionState` and
whose followers decide through the shipping follower core (`FollowerCore`).
With the leader-epoch rules, every scenario ends with identical logs and no committed record
lost. Replayed with the rule each KIP replaced, the same events must end in loss or
divergence, and the test asserts the checker reports it: a checker that never fails proves
nothing (docs/chaos.md).
"""

import pytest

from tests.unit.replication.replica_model import LAG_TIME_MAX_MS, Cluster, TruncationRule

A, B, C = 1, 2, 3


def kip101_scenario_1(truncation: TruncationRule) -> Cluster:
    """KIP-101 scenario 1, "high watermark truncation followed by immediate leader election".

    B holds m1 but its HW lags (the response that would raise it is lost); B restarts, A
    dies before B fetches again, B becomes leader. Truncating to the HW on restart loses m1,
    which A had already committed.
    """
    cluster = Cluster([A, B], truncation)
    cluster.produce("m0")
    cluster.fetch(B)
    cluster.fetch(B)
    cluster.produce("m1")
    cluster.fetch(B)
    cluster.fetch(B, deliver_response=False)
    assert (cluster.replicas[A].high_watermark, cluster.replicas[B].high_watermark) == (2, 1)
    assert cluster.committed == {0: (0, "m0"), 1: (0, "m1")}
    cluster.crash(B)
    cluster.restart(B)
    cluster.crash(A)
    cluster.elect(B)
    cluster.restart(A)
    cluster.produce("m2")
    cluster.catch_up()
    return cluster


def kip101_scenario_2(truncation: TruncationRule) -> Cluster:
    """KIP-101 scenario 2, "replica divergence on restart after multiple hard failures".

    Both brokers lose power; B had not flushed m1. B comes back first, leads epoch 1 and
    commits m2 at offset 1 once A is shrunk out of the ISR. A comes back with m1 at offset 1
    and an HW of 2: keeping everything below its HW leaves the logs diverged for good.
    """
    cluster = Cluster([A, B], truncation)
    cluster.produce("m0")
    cluster.fetch(B)
    cluster.fetch(B)
    cluster.produce("m1")
    cluster.fetch(B)
    cluster.fetch(B)
    assert (cluster.replicas[A].high_watermark, cluster.replicas[B].high_watermark) == (2, 2)
    cluster.crash(A)
    cluster.crash(B)
    cluster.restart(B, flushed_to=1)
    cluster.forget_committed_from(1)  # lost to the power failure, not to replication
    cluster.elect(B)
    cluster.produce("m2")
    cluster.tick(LAG_TIME_MAX_MS + 1)
    cluster.commit_alter_partition()
    assert cluster.isr == {B} and cluster.committed[1] == (1, "m2")
    cluster.restart(A)
    cluster.catch_up()
    return cluster


def kip279_scenario(truncation: TruncationRule) -> Cluster:
    """KIP-279: the leader changes twice, and the follower holds an epoch the leader never had.

    A (epoch 0) commits a0, a1 with B and appends a2..a4 alone. A fails; B leads epoch 1 and
    appends b2, b3 alone. B fails; A leads epoch 2 and appends a5. B returns with its epoch-1
    records at offsets 2-3. Asked for the end of epoch 1, a pre-KIP-279 leader answers with
    the start of its next epoch (5), which is past B's log end: B keeps b2, b3 forever.
    """
    cluster = Cluster([A, B], truncation)
    cluster.produce("a0")
    cluster.produce("a1")
    cluster.fetch(B)
    cluster.fetch(B)
    for value in ("a2", "a3", "a4"):
        cluster.produce(value)
    cluster.crash(A)
    cluster.elect(B)
    cluster.produce("b2")
    cluster.produce("b3")
    cluster.crash(B)
    cluster.restart(A)
    cluster.elect(A)
    cluster.produce("a5")
    cluster.restart(B)
    cluster.catch_up()
    return cluster


def kip279_two_round_scenario(truncation: TruncationRule) -> Cluster:
    """Four leader changes among three replicas: the follower lacks the diverging epoch.

    Final leader A holds epochs 0, 2, 4; follower C holds 0, 1, 3. C's first fetch (last
    epoch 3) is told epoch 2 ends at 4; C has no epoch 2, so it cuts its epoch-3 record and
    asks again with epoch 1, is told epoch 0 ends at 2, and cuts its epoch-1 record too.
    """
    cluster = Cluster([A, B, C], truncation)
    cluster.produce("a0")
    cluster.produce("a1")
    for _ in range(2):
        cluster.fetch(B)
        cluster.fetch(C)
    cluster.crash(A)
    cluster.elect(B)
    cluster.produce("b2")
    cluster.fetch(C)
    cluster.crash(B)
    cluster.crash(C)
    cluster.restart(A)
    cluster.elect(A)
    cluster.produce("a2")
    cluster.produce("a3")
    cluster.crash(A)
    cluster.restart(C)
    cluster.elect(C)
    cluster.produce("c3")
    cluster.crash(C)
    cluster.restart(A)
    cluster.elect(A)
    cluster.restart(C)
    cluster.catch_up()
    return cluster


def leader_alone_deletes_records(cluster: Cluster, down: list[int], delete_before: int) -> None:
    """A commits m0, m1 with B; ``down`` fail; A, shrunk to ISR {A}, commits m2, m3 alone and
    its retention deletes the records below ``delete_before``."""
    cluster.produce("m0")
    cluster.produce("m1")
    cluster.fetch(B)
    cluster.fetch(B)
    for replica_id in down:
        cluster.crash(replica_id)
    cluster.produce("m2")
    cluster.produce("m3")
    cluster.tick(LAG_TIME_MAX_MS + 1)
    cluster.commit_alter_partition()
    assert cluster.isr == {A}
    cluster.delete_records(delete_before)


def behind_retention_scenario(truncation: TruncationRule) -> Cluster:
    """OFFSET_OUT_OF_RANGE below the leader's log start: the follower starts over there.

    B holds m0, m1 and goes down; A, alone in the ISR, commits m2, m3 and its retention
    deletes the records below 3. B returns with log end 2, before A's log start: A answers
    OFFSET_OUT_OF_RANGE, B empties its log, starts it at 3 and fetches m3 from there.
    """
    cluster = Cluster([A, B], truncation)
    leader_alone_deletes_records(cluster, [B], 3)
    assert (cluster.leader.log_start_offset, cluster.leader.high_watermark) == (3, 4)
    cluster.restart(B)
    cluster.catch_up()
    return cluster


def ahead_of_unclean_leader_scenario(truncation: TruncationRule) -> Cluster:
    """OFFSET_OUT_OF_RANGE past the leader's log end with no epoch to compare.

    C starts over at A's log start 4 (retention) and so holds no epoch. A fails and B, far
    behind (log end 2), is elected uncleanly. C fetches from 4 with no last epoch: B cannot
    place it and answers OFFSET_OUT_OF_RANGE with its log end 2. As Kafka does, C cuts back to
    the leader's end; 2 is before C's own log start, so C starts over at 2. A, back, holds
    epoch 0 up to 4: B answers diverging (epoch 0 ends at 2 here) and A starts over at 2 too.
    The unclean election loses m2, m3 by design; everything after it converges.
    """
    cluster = Cluster([A, B, C], truncation)
    leader_alone_deletes_records(cluster, [B, C], 4)
    cluster.restart(C)
    cluster.fetch(C)
    assert (cluster.replicas[C].log_start_offset, cluster.replicas[C].history) == (4, ())
    cluster.crash(A)
    cluster.restart(B)
    cluster.elect(B, unclean=True)
    cluster.forget_committed_from(2)  # an unclean election loses them: not the follower's doing
    cluster.fetch(C)
    assert (cluster.replicas[C].log_start_offset, cluster.replicas[C].log_end_offset) == (2, 2)
    cluster.produce("b2")
    cluster.catch_up()
    return cluster


# scenario -> (log start offset, records from there) every replica ends with
EXPECTED_LOGS = {
    kip101_scenario_1: (0, [(0, "m0"), (0, "m1"), (1, "m2")]),
    kip101_scenario_2: (0, [(0, "m0"), (1, "m2")]),
    kip279_scenario: (0, [(0, "a0"), (0, "a1"), (0, "a2"), (0, "a3"), (0, "a4"), (2, "a5")]),
    kip279_two_round_scenario: (0, [(0, "a0"), (0, "a1"), (2, "a2"), (2, "a3")]),
    behind_retention_scenario: (3, [(0, "m3")]),
    ahead_of_unclean_leader_scenario: (2, [(1, "b2")]),
}

SCENARIOS = list(EXPECTED_LOGS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_leader_epoch_rules_keep_replicas_identical_and_commits_intact(scenario) -> None:
    cluster = scenario("leader_epoch")
    assert cluster.problems() == []
    assert cluster.stuck == []
    log_start_offset, records = EXPECTED_LOGS[scenario]
    for replica in cluster.replicas.values():
        assert replica.records_from(log_start_offset) == records, replica.replica_id
    assert cluster.state is not None
    assert cluster.state.high_watermark == log_start_offset + len(records)
    assert cluster.isr == set(cluster.replicas)


@pytest.mark.parametrize(
    "scenario, wrong_rule, expected_problem",
    [
        (kip101_scenario_1, "high_watermark", "committed as (0, 'm1') and again as (1, 'm2')"),
        (kip101_scenario_2, "high_watermark", "differs from"),
        (kip279_scenario, "pre_kip279", "differs from"),
        (kip279_two_round_scenario, "pre_kip279", "differs from"),
        (behind_retention_scenario, "no_restart", "differs from"),
    ],
    ids=["kip101-1-hw-truncation", "kip101-2-hw-truncation", "kip279-pre", "kip279-two-round-pre",
         "out-of-range-no-restart"],
)
def test_negative_control_the_replaced_rule_is_caught(scenario, wrong_rule, expected_problem) -> None:
    cluster = scenario(wrong_rule)
    problems = cluster.problems()
    assert any(expected_problem in p for p in problems), problems


def test_two_round_scenario_really_needs_two_rounds() -> None:
    """Guard the scenario itself: C's first truncation must be the incomplete kind."""
    from data_plane.replication.divergence import DivergingEpoch, truncation_for_diverging_epoch

    cluster = kip279_two_round_scenario("leader_epoch")
    assert cluster.replicas[A].history == ((0, 0), (2, 2), (4, 4))
    first = truncation_for_diverging_epoch(DivergingEpoch(2, 4), ((0, 0), (1, 2), (3, 3)), 4)
    assert (first.offset, first.complete) == (3, False)
