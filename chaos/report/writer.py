"""Writes a run's report directory: ``history.jsonl`` (to check again or replay),
``report.json``, ``summary.txt`` and ``report.html``."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.checker import KINDS, CheckResult, Verdict
from chaos.history import History
from chaos.report import html_report
from chaos.report.timeline import timeline

EXAMPLES_IN_SUMMARY = 3


def summary(title: str, result: CheckResult, verdict: Verdict) -> str:
    """A few lines for a terminal: the verdict, counts, replica comparisons, the final read
    and examples of each anomaly."""
    counts = result.counts
    lines = [
        title,
        f"  verdict: {verdict.outcome.label.upper()}, {verdict.sentence}",
        f"  sends: {counts.get('send_ok', 0)} ok, {counts.get('send_failed', 0)} failed, {counts.get('send_unknown', 0)} unknown; "
        f"polls: {counts.get('poll_ok', 0)} ok, {counts.get('poll_failed', 0) + counts.get('poll_unknown', 0)} failed; "
        f"records polled {counts.get('records_polled', 0)}, final read {counts.get('records_final_read', 0)}",
    ]
    lines.extend(f"  {line}" for line in comparison_lines(result.comparisons))
    lines.append(f"  {final_read_line(result.final_reads)}")
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


def final_read_line(final_reads: list[dict]) -> str:
    """How complete the final reads were, naming any partition short of its HW or of the
    highest HW observed."""
    complete = [f for f in final_reads if f["complete"]]
    short = [f["partition"] for f in final_reads if not f["complete"]]
    behind = [f["partition"] for f in final_reads if f["read"] and f["high_watermark"] < f["highest_hw_observed"]]
    line = f"final read: {len(complete)} of {len(final_reads)} partitions read to their HW, {sum(f['records'] for f in final_reads)} records"
    if short:
        line += f"; short of the HW: partitions {short}"
    if behind:
        line += f"; HW below the highest observed: partitions {behind}"
    return line


def write_report(directory: Path, title: str, run_info: dict, history: History, result: CheckResult, verdict: Verdict) -> Path:
    """Writes every file of the report; returns the HTML's path."""
    directory.mkdir(parents=True, exist_ok=True)
    ops = history.ops
    line = timeline(ops)
    history.save(directory / "history.jsonl")
    report = {"run": run_info, "verdict": verdict.to_json(), "check": result.to_json(), "timeline": line.to_json()}
    (directory / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (directory / "summary.txt").write_text(summary(title, result, verdict) + "\n")
    html = directory / "report.html"
    html.write_text(html_report.render(title, run_info.get("replay"), result, verdict, line))
    return html
