"""Real faults against real clusters: a leader's namespace cut off (nodes in network
namespaces, tc rules), one node's clock shifted and jumped back, fixed delays through the
userspace link emulator, each checked clean; and ``kraftlog chaos soak``: its exit code on
an anomaly, and (under ``soak``) two real schedules with their table.

The namespace scenario needs root and the ``ip`` and ``tc`` tools; without them it is
skipped with the reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos import netns, soak
from chaos.checker import Outcome
from chaos.netns_emulated import emulator_unavailable_reason
from chaos.runner import RunOptions, run
from chaos.scenarios import SCENARIOS
from cli.main import main


def _check_clean(tmp_path: Path, name: str, seed: int, duration_s: float) -> None:
    outcome = run(RunOptions(SCENARIOS[name], duration_s, seed, tmp_path / "report", progress=lambda _line: None))
    assert outcome.verdict.outcome is Outcome.PASSED, outcome.summary
    faults = [op for op in (tmp_path / "report" / "history.jsonl").read_text().splitlines() if '"kind": "fault"' in op]
    assert faults, "the schedule applied no fault"
    assert not any("skipped" in json.loads(f).get("detail", "") for f in faults), faults


@pytest.mark.chaos
def test_leader_namespace_partition_is_clean(tmp_path: Path) -> None:
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    _check_clean(tmp_path, "netns-leader-partition", seed=7, duration_s=20.0)
    ours = [line for line in netns._run(["ip", "netns", "list"]).stdout.splitlines() if netns.owner_pid(line.split()[0]) == os.getpid()]
    assert not ours, f"namespaces left behind: {ours}"


@pytest.mark.chaos
@pytest.mark.soak
def test_clock_skew_is_clean(tmp_path: Path) -> None:
    _check_clean(tmp_path, "clock-skew", seed=3, duration_s=20.0)


@pytest.mark.soak
def test_soak_two_schedules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["chaos", "soak", "--schedules", "2", "--seed-base", "4", "--duration", "12", "--report", str(tmp_path), "--scenarios", "clock-skew,leader-kill-loop"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 schedules: passed 2" in out and "held no fault step" not in out
    runs = json.loads((tmp_path / "soak.json").read_text())
    assert [(r["seed"], r["scenario"]) for r in runs] == [(4, "clock-skew"), (5, "leader-kill-loop")]
    assert all(Path(r["report"]).exists() for r in runs)


def test_soak_exits_non_zero_on_an_anomaly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fake_run(index: int, seed: int, name: str, duration_s: float, report_root: Path) -> soak.SoakRun:
        verdict, anomalies = ("failed", {"lost-write": 3}) if index == 1 else ("passed", {})
        return soak.SoakRun(index, seed, name, verdict, 1, anomalies, 1.0, str(report_root))

    monkeypatch.setattr(soak, "run_one", fake_run)
    assert main(["chaos", "soak", "--schedules", "3", "--report", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "lost-write=3" in out and "failed 1, passed 2" in out


@pytest.mark.chaos
@pytest.mark.soak
def test_delays_through_the_link_emulator_are_clean(tmp_path: Path) -> None:
    reason = emulator_unavailable_reason()
    if reason:
        pytest.skip(reason)
    _check_clean(tmp_path, "netns-delay", seed=8, duration_s=20.0)  # a 200 ms ± 100 ms leader, then a 4 s follower
