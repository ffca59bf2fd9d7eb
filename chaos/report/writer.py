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
    lines.extend(f"  {line}" for line in comparison_lines(result.comparisons))
    if result.incomplete_final_reads:
        lines.append(f"  final read did not reach the HW of partitions {result.incomplete_final_reads}")
    if result.valid:
        lines.append("  no anomalies")
    for kind, found in result.by_kind.items():
        lines.append(f"  {kind}: {len(found)} — {KINDS[kind]}")
        lines.extend(f"    partition {a.partition}: {a.message}" for a in found[:EXAMPLES_IN_SUMMARY])
    return "\n".join(lines)


def comparison_lines(comparisons: list[dict]) -> list[str]:
    """How many replicas the comparisons compared: the one after healing, and all those
    after restarts together."""
    restarts = [c for c in comparisons if c["restart"] is not None]
    lines = [
        f"replicas compared after healing: {c['replicas_compared']} of {c['replicas_expected']}; "
        f"{c['partitions_converged']} of {c['partitions']} partitions back in their full ISR, caught up ({c['waited_s_max']:.1f}s)"
        for c in comparisons
        if c["restart"] is None
    ]
    if restarts:
        lines.append(
            f"replicas compared after {len(restarts)} restart{'' if len(restarts) == 1 else 's'}: {sum(c['replicas_compared'] for c in restarts)} of "
            f"{sum(c['replicas_expected'] for c in restarts)}; {sum(c['partitions_converged'] for c in restarts)} of "
            f"{sum(c['partitions'] for c in restarts)} partitions back in time (slowest {max(c['waited_s_max'] for c in restarts):.1f}s)"
        )
    return lines


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
