"""The history checker: finds every anomaly of ``anomaly.KINDS`` in a chaos run's history."""

from chaos.checker.anomaly import KINDS, Anomaly
from chaos.checker.check import CheckResult, check
from chaos.checker.verdict import Outcome, Verdict, judge

__all__ = ["KINDS", "Anomaly", "CheckResult", "Outcome", "Verdict", "check", "judge"]
