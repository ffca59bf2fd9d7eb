"""Writes a run's report directory: ``history.jsonl`` (to check again or replay),
``report.json``, ``summary.txt`` and ``report.html``."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.checker import KINDS, CheckResult
from chaos.history import History
from chaos.report import html_report
from chaos.report.timeline import timeline

EXAMPLES_IN_SUMMARY = 3


def summary(title: str, result: CheckResult) -> str:
    """A few lines for a terminal: counts, the verdict and examples of each anomaly."""
    counts = result.counts
    lines = [
        title,
        f"  sends: {counts.get('send_ok', 0)} ok, {counts.get('send_failed', 0)} failed, {counts.get('send_unknown', 0)} unknown; "
        f"polls: {counts.get('poll_ok', 0)} ok, {counts.get('poll_failed', 0) + counts.get('poll_unknown', 0)} failed; "
        f"records polled {counts.get('records_polled', 0)}, final read {counts.get('records_final_read', 0)}",
    ]
    if result.incomplete_final_reads:
        lines.append(f"  final read did not reach the HW of partitions {result.incomplete_final_reads}")
    if result.valid:
        lines.append("  no anomalies")
    for kind, found in result.by_kind.items():
        lines.append(f"  {kind}: {len(found)} — {KINDS[kind]}")
        lines.extend(f"    partition {a.partition}: {a.message}" for a in found[:EXAMPLES_IN_SUMMARY])
    return "\n".join(lines)


def write_report(directory: Path, title: str, run_info: dict, history: History, result: CheckResult) -> Path:
    """Writes every file of the report; returns the HTML's path."""
    directory.mkdir(parents=True, exist_ok=True)
    ops = history.ops
    line = timeline(ops)
    history.save(directory / "history.jsonl")
    report = {"run": run_info, "check": result.to_json(), "timeline": line.to_json()}
    (directory / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (directory / "summary.txt").write_text(summary(title, result) + "\n")
    html = directory / "report.html"
    html.write_text(html_report.render(title, result, line))
    return html
