"""The consumer-group scenarios of ``kraftlog chaos`` (chaos/group_run.py) against real
clusters: a short ``group-kills`` run must pass, and its negative control
(``unsafe-group-assign-before-revoke``) must be caught as ``double-owner``; several seeds under
``soak``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.checker import Outcome
from chaos.group_run import FAULTS
from tests.chaos.test_scenarios import _assert_verdict, _run

pytestmark = pytest.mark.timeout(600)


@pytest.mark.chaos
def test_a_group_through_kills_and_link_cuts_passes(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "group-kills", seed=2, duration_s=20.0)
    _assert_verdict("group-kills", outcome)
    report = json.loads(outcome.report.read_text())
    assert report["acked"] > 0 and report["ownership_events"] > 0 and outcome.steps, report
    assert all(step.split(":")[0] in FAULTS for step in outcome.steps), outcome.steps


@pytest.mark.chaos
def test_handing_a_partition_over_before_its_revocation_is_caught(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "unsafe-group-assign-before-revoke", seed=1, duration_s=20.0)
    assert outcome.verdict.outcome is Outcome.CAUGHT, outcome.summary
    assert "double-owner" in outcome.result.by_kind  # often with commit-backwards: two owners commit


@pytest.mark.soak
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_group_soak(tmp_path: Path, seed: int) -> None:
    _assert_verdict("group-kills", _run(tmp_path, "group-kills", seed=seed, duration_s=120.0))
