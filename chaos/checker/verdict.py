"""The verdict of a run: what the anomalies found mean for the scenario that ran.

A safe scenario passes only with no anomaly; a negative control (an ``unsafe-`` scenario)
is meant to be caught, so finding one of its expected anomalies is the success it was run
for, and finding none means the checker has a blind spot. The exit code and every form of
the report say which of the four it was, so an expected catch is never read as a failure,
nor a failure as an expected catch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from chaos.checker.check import CheckResult


class Outcome(Enum):
    """The four verdicts, each with the exit code ``kraftlog chaos run`` ends with."""

    PASSED = ("passed", 0, "no anomalies")
    CAUGHT = ("caught", 0, "negative control caught, as expected")
    FAILED = ("failed", 1, "anomalies in a scenario a correct cluster passes")
    MISSED = ("missed", 2, "negative control missed: the checker found none of the anomalies its bug must cause")

    def __init__(self, label: str, exit_code: int, meaning: str) -> None:
        self.label = label
        self.exit_code = exit_code
        self.meaning = meaning


@dataclass(frozen=True)
class Verdict:
    """An outcome, with the expected anomaly kinds found (for a negative control) and
    every kind found."""

    outcome: Outcome
    expected: frozenset[str]
    found: tuple[str, ...]

    @property
    def expected_found(self) -> list[str]:
        return sorted(set(self.found) & self.expected)

    @property
    def sentence(self) -> str:
        """One line for the summary and the report's heading."""
        if self.outcome is Outcome.CAUGHT:
            return f"{self.outcome.meaning}: {', '.join(self.expected_found)}"
        if self.outcome is Outcome.MISSED:
            return f"{self.outcome.meaning} (one of {', '.join(sorted(self.expected))})"
        if self.outcome is Outcome.FAILED:
            return f"{self.outcome.meaning}: {', '.join(self.found)}"
        return self.outcome.meaning

    def to_json(self) -> dict:
        return {
            "outcome": self.outcome.label,
            "exit_code": self.outcome.exit_code,
            "negative_control": bool(self.expected),
            "expected_anomalies": sorted(self.expected),
            "expected_found": self.expected_found,
            "sentence": self.sentence,
        }


def judge(result: CheckResult, expected: frozenset[str]) -> Verdict:
    """The verdict of ``result`` for a scenario expecting ``expected`` (empty: a safe one)."""
    found = tuple(result.by_kind)
    if expected:
        outcome = Outcome.CAUGHT if set(found) & expected else Outcome.MISSED
    else:
        outcome = Outcome.PASSED if result.valid else Outcome.FAILED
    return Verdict(outcome, expected, found)
