"""Property: random interleavings never lose a committed record and end with identical logs.

Hypothesis drives the in-memory cluster (`replica_model.Cluster`, three replicas) through
appends, fetches (some whose responses are lost), timer ticks, AlterPartition commits,
crashes, restarts, retention on the leader (which sends followers behind it down the
OFFSET_OUT_OF_RANGE path) and clean leader elections with epoch bumps. Leaders decide HW,
ISR and divergence through `LeaderPartitionState`; followers decide every answer through the
shipping follower core (`FollowerCore`). After a final healing round every replica must hold
the same log (from the highest log start), every record that was ever below a leader's HW
must still be at its offset on every replica whose log starts at or before it, no follower
may have cut its log below its own HW (truncation follows epochs, and with clean elections
epochs never cut committed data), and no follower may have been left backing off for good.

The same search run with the rules KIP-101 and KIP-279 replaced must find a counterexample,
which proves the property can fail.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.replication.replica_model import Cluster, TruncationRule

REPLICAS = [1, 2, 3]
# Kinds repeated to weight them: commits need many fetches, divergence needs appends that
# do not replicate before the next election.
KINDS = (
    ["produce"] * 3 + ["fetch"] * 4 + ["fetch_lost", "crash"]
    + ["tick", "elect", "restart", "alter_partition"] * 2 + ["retain"]
)
operation = st.tuples(
    st.sampled_from(KINDS), st.sampled_from(REPLICAS), st.sampled_from([10, 60, 150])
)
operations = st.lists(operation, min_size=20, max_size=80)


def run(ops: list[tuple], truncation: TruncationRule) -> Cluster:
    cluster = Cluster(REPLICAS, truncation)
    for step, op in enumerate(ops):
        match op:
            case ("produce", _, _):
                cluster.produce(f"v{step}")
            case ("fetch", r, _):
                cluster.fetch(r)
            case ("fetch_lost", r, _):
                cluster.fetch(r, deliver_response=False)
            case ("tick", _, elapsed_ms):
                cluster.tick(elapsed_ms)
            case ("alter_partition", _, _):
                cluster.commit_alter_partition()
            case ("retain", _, elapsed_ms) if cluster.state is not None:
                cluster.delete_records(cluster.leader.log_start_offset + elapsed_ms // 10)
            case ("elect", r, _) if cluster.replicas[r].alive and r in cluster.isr:
                cluster.elect(r)
            case ("crash", r, _) if cluster.replicas[r].alive:
                cluster.crash(r)
            case ("restart", r, _) if not cluster.replicas[r].alive:
                cluster.restart(r)
        if cluster.state is not None:
            leader = cluster.leader
            assert cluster.state.high_watermark <= leader.log_end_offset
            assert cluster.state.high_watermark == leader.high_watermark
    heal(cluster)
    return cluster


def heal(cluster: Cluster, rounds_max: int = 60) -> None:
    """Restart everyone and fetch until every log equals the leader's, the ISR is full and
    the HW has reached the log end."""
    for _ in range(rounds_max):
        cluster.catch_up(rounds=1)
        settled = cluster.state is not None and (
            cluster.state.high_watermark == cluster.leader.log_end_offset)
        if settled and cluster.logs_agree() and cluster.isr == set(REPLICAS) and cluster.inflight is None:
            return


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_no_committed_record_lost_and_logs_converge(ops: list[tuple]) -> None:
    cluster = run(ops, "leader_epoch")
    assert cluster.problems() == []
    assert cluster.truncations_below_hw == []
    assert cluster.stuck == []
    assert cluster.isr == set(REPLICAS)
    assert cluster.state is not None
    assert cluster.state.high_watermark == cluster.leader.log_end_offset


def seeded_operations(seed: int) -> list[tuple[str, int, int]]:
    """Draw an operation list like `operations` does, from a plain seeded RNG (no shrinking,
    so a search over many of them stays fast)."""
    rng = random.Random(seed)
    return [
        (rng.choice(KINDS), rng.choice(REPLICAS), rng.choice([10, 60, 150]))
        for _ in range(rng.randint(20, 80))
    ]


@pytest.mark.parametrize("wrong_rule", ["high_watermark", "pre_kip279"])
def test_negative_control_the_same_harness_catches_the_replaced_rules(wrong_rule: TruncationRule) -> None:
    """Interleavings of the same kinds, checked the same way, fail under each rule that
    KIP-101 and KIP-279 replaced, and pass under the leader-epoch rules."""
    failing = [
        ops for ops in map(seeded_operations, range(300)) if run(ops, wrong_rule).problems()
    ]
    assert failing, f"no interleaving caught {wrong_rule}"
    assert all(run(ops, "leader_epoch").problems() == [] for ops in failing)
