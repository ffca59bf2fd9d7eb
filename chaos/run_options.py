"""What one chaos run is asked to do and what it answers, shared by the runner (runner.py) and
the runs it hands a scenario to (group_run.py, txn_run.py, quorum_run.py, coordinator_run.py), which
therefore need nothing of the runner itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos.checker import CheckResult, Verdict
from chaos.scenarios import Scenario
from chaos.schedule import FaultStep
from chaos.workload.settings import WorkloadSettings


@dataclass(frozen=True)
class RunOptions:
    scenario: Scenario
    duration_s: float
    seed: int
    report_dir: Path
    workload: WorkloadSettings = WorkloadSettings()
    bootstrap: str | None = None  # an existing cluster: workload only, no faults
    recovery_s: float = 5.0
    progress: Callable[[str], None] = field(default=print)


@dataclass
class RunResult:
    result: CheckResult
    verdict: Verdict
    report: Path
    summary: str
    steps: list[FaultStep] | list[str]  # a group or transactional run's faults are named, not scheduled
