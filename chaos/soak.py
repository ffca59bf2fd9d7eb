"""``kraftlog chaos soak``: many seeded schedules one after another, each a fresh cluster
running one scenario from the registry, a summary table at the end, and a non-zero exit
when any run found an anomaly (or, for a negative control, missed its bug).

Schedule ``i`` runs with seed ``seed_base + i``; the scenarios are taken in turn (sorted
names, starting where the seed base points), so 100 schedules cover every scenario several
times and the same command replays the same runs. By default only the scenarios a correct
cluster passes take part; negative controls join with ``--with-negative-controls`` (judged by
their verdict: caught is a pass). A scenario this machine cannot run (namespaces without
root, broker flags missing) is listed as skipped with the reason, and does not fail the soak.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from chaos.scenarios import SCENARIOS, Scenario


@dataclass(frozen=True)
class SoakRun:
    """One line of the summary."""

    index: int
    seed: int
    scenario: str
    verdict: str  # an Outcome label, "skipped" or "error"
    faults: int  # fault steps the schedule held (0: the duration was too short for any)
    anomalies: dict[str, int]
    seconds: float
    report: str
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in ("failed", "missed", "error")


def scenario_names(with_negative_controls: bool, only: list[str] | None = None) -> list[str]:
    """The scenarios a soak draws from, sorted."""
    names = only or [name for name, s in SCENARIOS.items() if with_negative_controls or not s.expected]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"no scenario {', '.join(unknown)}: see kraftlog chaos list")
    return sorted(names)


def plan(schedules: int, seed_base: int, names: list[str]) -> list[tuple[int, str]]:
    """(seed, scenario) of each schedule: seeds ``seed_base`` on, scenarios in turn."""
    if schedules < 1:
        raise ValueError(f"--schedules must be at least 1, not {schedules}")
    return [(seed_base + i, names[(seed_base + i) % len(names)]) for i in range(schedules)]


def unrunnable_reason(scenario: Scenario) -> str | None:
    """Why this machine cannot run ``scenario`` (None: it can)."""
    from chaos.chaos_cluster import ChaosCluster
    from chaos.netns_emulated import fabric_unavailable_reason

    if scenario.cluster.namespaces:
        return fabric_unavailable_reason(scenario.cluster.link_emulator)
    if scenario.cluster.broker_disk_mb and os.geteuid() != 0:
        return "the tmpfs data directories of disk-full need root"
    missing = ChaosCluster.missing_flags(scenario.cluster, scenario.needs_proxied_clients)
    return f"the broker lacks {', '.join(missing)}" if missing else None


def run_one(index: int, seed: int, name: str, duration_s: float, report_root: Path) -> SoakRun:
    """One schedule; a harness error is an ``error`` line (with the traceback in the report
    directory), not the end of the soak."""
    from chaos.runner import RunOptions, run

    scenario = SCENARIOS[name]
    report_dir = report_root / f"{index:03d}-{name}-seed{seed}"
    reason = unrunnable_reason(scenario)
    if reason:
        return SoakRun(index, seed, name, "skipped", 0, {}, 0.0, "", reason)
    started = time.monotonic()
    try:
        outcome = run(RunOptions(scenario, duration_s, seed, report_dir, progress=lambda _line: None))
    except Exception as error:  # one broken run must not hide the other 99
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "error.txt").write_text(traceback.format_exc())
        return SoakRun(index, seed, name, "error", 0, {}, time.monotonic() - started, str(report_dir), f"{type(error).__name__}: {error}")
    anomalies = {kind: len(found) for kind, found in outcome.result.by_kind.items()}
    return SoakRun(index, seed, name, outcome.verdict.outcome.label, len(outcome.steps), anomalies, time.monotonic() - started, str(outcome.report))


def table(runs: list[SoakRun]) -> str:
    """The summary: one line per schedule, then the totals."""
    width = max([len(r.scenario) for r in runs] + [8])
    lines = [f"{'#':>3}  {'seed':>6}  {'scenario':<{width}}  {'verdict':<8}  {'faults':>6}  {'secs':>5}  anomalies"]
    for r in runs:
        found = ", ".join(f"{k}={v}" for k, v in r.anomalies.items()) or "-"
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"{r.index:>3}  {r.seed:>6}  {r.scenario:<{width}}  {r.verdict:<8}  {r.faults:>6}  {r.seconds:>5.0f}  {found}{note}")
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    empty = sum(1 for r in runs if r.verdict not in ("skipped", "error") and r.faults == 0)
    lines.append(f"{len(runs)} schedules: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) + f"; {sum(r.faults for r in runs)} fault steps")
    if empty:
        lines.append(f"{empty} runs held no fault step (the first starts at 5 s and must end within --duration): give a longer --duration")
    return "\n".join(lines)


def soak(schedules: int, seed_base: int, duration_s: float, report_root: Path, names: list[str], progress: Callable[[str], None]) -> list[SoakRun]:
    """Runs the plan, printing a line per schedule, and writes ``soak.json`` and
    ``soak.txt`` in ``report_root`` after each (a soak stopped part-way keeps its table)."""
    report_root.mkdir(parents=True, exist_ok=True)
    runs: list[SoakRun] = []
    for index, (seed, name) in enumerate(plan(schedules, seed_base, names)):
        progress(f"[{index + 1}/{schedules}] {name} seed {seed} ...")
        result = run_one(index, seed, name, duration_s, report_root)
        runs.append(result)
        found = ", ".join(result.anomalies) or "no anomalies"
        progress(f"[{index + 1}/{schedules}] {name} seed {seed}: {result.verdict} ({found}) {result.note}".rstrip())
        (report_root / "soak.json").write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")
        (report_root / "soak.txt").write_text(table(runs) + "\n")
    return runs
