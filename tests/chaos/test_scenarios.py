"""Scenarios against real clusters: short runs in the default suite (marker ``chaos``),
every scenario with several seeds under ``soak``.

A safe scenario passes only when the checker finds nothing; an ``unsafe-`` scenario only
when the checker finds one of the anomalies its broken broker behaviour must cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.chaos_cluster import ChaosCluster
from chaos.runner import RunOptions, RunResult, run
from chaos.scenarios import SCENARIOS

SOAK_SEEDS = (1, 2, 3)
SOAK_DURATION_S = 120.0


def _run(tmp_path: Path, name: str, seed: int, duration_s: float) -> RunResult:
    scenario = SCENARIOS[name]
    missing = ChaosCluster.missing_flags(scenario.cluster, scenario.needs_proxied_clients)
    if missing:
        pytest.skip(f"broker lacks {missing}")
    return run(RunOptions(scenario, duration_s, seed, tmp_path / "report", progress=lambda _line: None))


def _assert_verdict(name: str, outcome: RunResult) -> None:
    if SCENARIOS[name].expected:
        assert outcome.expected_found, f"negative control not caught:\n{outcome.summary}"
    else:
        assert outcome.result.valid, outcome.summary
    assert outcome.report.exists()


@pytest.mark.chaos
@pytest.mark.parametrize(
    "name, duration_s",
    [("leader-kill-loop", 20.0), ("controller-isolation", 20.0), ("unsafe-truncate-to-hw", 25.0), ("unsafe-ack-before-replication", 25.0)],
)
def test_short_scenario(tmp_path: Path, name: str, duration_s: float) -> None:
    _assert_verdict(name, _run(tmp_path, name, seed=3, duration_s=duration_s))


@pytest.mark.soak
@pytest.mark.parametrize("seed", SOAK_SEEDS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_soak(tmp_path: Path, name: str, seed: int) -> None:
    _assert_verdict(name, _run(tmp_path, name, seed, SOAK_DURATION_S))
