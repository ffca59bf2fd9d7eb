"""The verdict: a negative control's expected catch and a safe scenario's failure never look
alike, in the exit code or in the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.checker import Outcome, check, judge
from chaos.runner import RunOptions, replay_command
from chaos.scenarios import SCENARIOS
from chaos.workload import WorkloadSettings
from tests.chaos.histories import clean_history, with_final_reads

LOST = frozenset({"lost-write", "unseen"})


@pytest.mark.parametrize(
    "lossy, expected, outcome, exit_code",
    [
        (False, frozenset(), Outcome.PASSED, 0),
        (True, frozenset(), Outcome.FAILED, 1),
        (True, LOST, Outcome.CAUGHT, 0),
        (False, LOST, Outcome.MISSED, 2),
        (True, frozenset({"duplicate"}), Outcome.MISSED, 2),
    ],
)
def test_verdicts_and_exit_codes(lossy: bool, expected: frozenset[str], outcome: Outcome, exit_code: int) -> None:
    ops = with_final_reads(clean_history(), []) if lossy else clean_history()
    verdict = judge(check(ops), expected)
    assert (verdict.outcome, verdict.outcome.exit_code) == (outcome, exit_code)
    assert verdict.to_json()["negative_control"] is bool(expected)


def test_a_catch_names_what_it_caught() -> None:
    verdict = judge(check(with_final_reads(clean_history(), [])), LOST)
    assert verdict.expected_found == ["lost-write"]
    assert verdict.sentence == "negative control caught, as expected: lost-write"


def test_replay_command_names_everything_that_differs_from_the_defaults() -> None:
    options = RunOptions(SCENARIOS["zombie-leader"], 30.0, 110, Path("/tmp/x"), WorkloadSettings(partitions=12, rate_per_s=50))
    assert replay_command(options) == "kraftlog chaos run --scenario zombie-leader --seed 110 --duration 30 --partitions 12 --rate 50"
