"""Scenarios against real clusters: short runs in the default suite (marker ``chaos``),
every scenario with several seeds under ``soak``.

A safe scenario passes only when the checker finds nothing; an ``unsafe-`` scenario only
when the checker finds one of the anomalies its broken broker behaviour must cause.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chaos.checker import Outcome
from chaos.runner import RunOptions, RunResult, run
from chaos.scenarios import SCENARIOS
from chaos.soak import unrunnable_reason
from chaos.workload import WorkloadSettings

SOAK_SEEDS = (1, 2, 3)
SOAK_DURATION_S = 120.0


def _run(tmp_path: Path, name: str, seed: int, duration_s: float, workload: WorkloadSettings = WorkloadSettings()) -> RunResult:
    reason = unrunnable_reason(SCENARIOS[name])
    if reason:
        pytest.skip(reason)
    scenario = SCENARIOS[name]
    return run(RunOptions(scenario, duration_s, seed, tmp_path / "report", workload, progress=lambda _line: None))


def _assert_verdict(name: str, outcome: RunResult) -> None:
    wanted = Outcome.CAUGHT if SCENARIOS[name].expected else Outcome.PASSED
    assert outcome.verdict.outcome is wanted, outcome.summary
    assert outcome.report.exists()


@pytest.mark.chaos
@pytest.mark.parametrize(
    "name, duration_s",
    [
        ("leader-kill-loop", 20.0),
        ("unsafe-truncate-to-hw", 25.0),
        ("unsafe-ack-before-replication", 25.0),
        ("unsafe-skip-epoch-fencing", 15.0),
        ("unsafe-elect-outside-isr-elr", 15.0),
        ("disk-full", 15.0),
    ],
)
def test_short_scenario(tmp_path: Path, name: str, duration_s: float) -> None:
    _assert_verdict(name, _run(tmp_path, name, seed=3, duration_s=duration_s))


@pytest.mark.chaos
@pytest.mark.parametrize("name, duration_s", [("leader-kill-loop", 20.0), ("unsafe-ack-before-replication", 25.0)])
def test_short_scenario_through_the_kafka_door(tmp_path: Path, name: str, duration_s: float) -> None:
    """The retrying producers write with librdkafka through the brokers' Kafka listeners: the
    checker judges the Kafka door under leader kills, and still catches the broker that
    acknowledges before replicating (the negative control)."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra: pip install -e '.[test]'")
    _assert_verdict(name, _run(tmp_path, name, seed=3, duration_s=duration_s, workload=WorkloadSettings(producer_client="librdkafka")))


def _restart_comparisons(outcome: RunResult) -> list[dict]:
    return [c for c in outcome.result.comparisons if c["restart"] is not None]


@pytest.fixture(scope="module")
def restart_loop(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """One short restart-loop run (seed 3: a rolling SIGKILL restart, then whole-cluster
    restarts as long as 25 s last), shared by the mechanics and the verdict tests."""
    return _run(tmp_path_factory.mktemp("restart-loop"), "restart-loop", seed=3, duration_s=25.0)


@pytest.mark.chaos
def test_restart_loop_compares_replicas_after_every_restart(restart_loop: RunResult) -> None:
    """Every restart numbered in order and followed by a comparison of all nine replicas;
    one more after healing. Holds whatever the cluster did."""
    restarts = _restart_comparisons(restart_loop)
    assert len(restarts) >= 2, restart_loop.summary
    assert [c["restart"] for c in restarts] == list(range(1, len(restarts) + 1))
    assert all((c["partitions"], c["replicas_expected"]) == (3, 9) for c in restarts)
    [final] = [c for c in restart_loop.result.comparisons if c["restart"] is None]
    assert final["replicas_expected"] == 9


@pytest.mark.chaos
def test_restart_loop_finds_every_replica_back_after_every_restart(restart_loop: RunResult) -> None:
    """The verdict: after each restart every partition back in its full ISR within 10 s
    with identical replicas, and at the end; nothing lost or duplicated."""
    _assert_verdict("restart-loop", restart_loop)


@pytest.mark.chaos
def test_a_stalled_follower_after_a_restart_is_caught_at_that_restart(tmp_path: Path) -> None:
    """The negative control: a restarted broker's fetcher never fetches its partitions
    again; the comparison after the first restart must name that broker's replicas."""
    outcome = _run(tmp_path, "unsafe-stall-fetcher", seed=1, duration_s=12.0)
    _assert_verdict("unsafe-stall-fetcher", outcome)
    first = _restart_comparisons(outcome)[0]
    assert first["partitions_converged"] < first["partitions"], outcome.summary
    restarted = int(re.search(r"broker-(\d+)", first["label"]).group(1))
    stuck = [a for a in outcome.result.by_kind["under-replicated"] if a.details["restart"] == 1]
    assert stuck and {a.details["broker"] for a in stuck} == {restarted}, [a.message for a in stuck]


@pytest.mark.soak
@pytest.mark.parametrize("seed", SOAK_SEEDS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_soak(tmp_path: Path, name: str, seed: int) -> None:
    _assert_verdict(name, _run(tmp_path, name, seed, SOAK_DURATION_S))


NEGATIVE_CONTROL_SEEDS = (1, 2, 3, 4, 5, 110)


@pytest.mark.soak
@pytest.mark.parametrize("seed", NEGATIVE_CONTROL_SEEDS)
@pytest.mark.parametrize("name", sorted(n for n, s in SCENARIOS.items() if s.expected))
def test_negative_control_is_caught_on_every_seed(tmp_path: Path, name: str, seed: int) -> None:
    """Short runs on many seeds (110 once ran skip-epoch-fencing clean for 60 s): each
    negative control schedules the fault its bug needs at 5 s whatever the seed."""
    _assert_verdict(name, _run(tmp_path, name, seed, 25.0))


@pytest.mark.soak
@pytest.mark.parametrize("seed", SOAK_SEEDS)
def test_restart_loop_with_twelve_partitions(tmp_path: Path, seed: int) -> None:
    """The shape the restart stall was first seen in: more partitions per fetcher."""
    outcome = _run(tmp_path, "restart-loop", seed, SOAK_DURATION_S, WorkloadSettings(partitions=12))
    assert all(c["replicas_expected"] == 36 for c in outcome.result.comparisons)
    _assert_verdict("restart-loop", outcome)
