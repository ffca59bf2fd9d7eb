"""The consumer-group chaos run (chaos/group_run.py) against real clusters: a short safe run
must pass, and the coordinator's negative control (assign-before-revoke) must be caught as
``double-owner``; several seeds under ``soak``."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.group_run import run

pytestmark = pytest.mark.timeout(600)


def _run(tmp_path: Path, seed: int, duration_s: float, unsafe: str = ""):
    return run(duration_s, seed, tmp_path / "report", unsafe, progress=lambda _line: None)


@pytest.mark.chaos
def test_a_group_through_broker_coordinator_and_member_kills_passes(tmp_path: Path) -> None:
    result = _run(tmp_path, seed=2, duration_s=20.0)
    assert result.verdict == "passed", [a.message for a in result.anomalies[:5]]
    assert result.acked > 0 and result.faults and result.ownership_events > 0 and result.report.exists()


@pytest.mark.chaos
def test_handing_a_partition_over_before_its_revocation_is_caught(tmp_path: Path) -> None:
    result = _run(tmp_path, seed=1, duration_s=20.0, unsafe="assign-before-revoke")
    assert result.verdict == "caught", result.faults
    assert "double-owner" in {a.kind for a in result.anomalies}  # often with commit-backwards: two owners commit


@pytest.mark.soak
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_group_soak(tmp_path: Path, seed: int) -> None:
    result = _run(tmp_path, seed=seed, duration_s=120.0)
    assert result.verdict == "passed", [a.message for a in result.anomalies[:5]]
