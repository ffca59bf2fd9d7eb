"""The controller-quorum scenarios of ``kraftlog chaos`` (chaos/quorum_run.py) against real
clusters: controllers added and removed while a client creates topics, brokers serve a
producer and every controller is read must pass with nothing lost, reordered or stale; the
negative control, controllers that serve reads and vote before catching up, must be caught;
longer runs under ``soak``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.checker import Outcome
from tests.chaos.test_scenarios import _assert_verdict, _run

pytestmark = pytest.mark.timeout(300)


@pytest.mark.chaos
def test_controllers_added_and_removed_under_load_lose_and_reorder_nothing(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "quorum-changes", seed=1, duration_s=12.0)
    _assert_verdict("quorum-changes", outcome)
    report = json.loads(outcome.report.read_text())
    assert report["creations_acked"] > 0 and report["reads"] > 0 and report["records_acked"] > 0, report
    assert any(step.startswith("add-controller: controller-4 a voter") for step in outcome.steps), outcome.steps


@pytest.mark.chaos
def test_controllers_that_serve_before_catching_up_are_caught(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "unsafe-quorum-join-before-caught-up", seed=1, duration_s=12.0)
    assert outcome.verdict.outcome is Outcome.CAUGHT, outcome.summary
    assert "stale-read" in outcome.result.by_kind


@pytest.mark.soak
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_quorum_soak(tmp_path: Path, seed: int) -> None:
    _assert_verdict("quorum-changes", _run(tmp_path, "quorum-changes", seed=seed, duration_s=60.0))
