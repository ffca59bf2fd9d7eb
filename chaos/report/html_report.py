"""A one-file HTML picture of a run: the verdict and the command that replays the run,
throughput and latency over time with the faults shaded, examples of each anomaly, the
replica comparisons and how complete the final read was. Inline SVG, no scripts, no
dependencies, so it opens anywhere and can be attached to a bug report."""

from __future__ import annotations

import math
from html import escape

from chaos.checker import KINDS, CheckResult, Outcome, Verdict
from chaos.report.timeline import Timeline

WIDTH, HEIGHT, MARGIN = 900, 240, 45
COLORS = {"acknowledged/s": "#2a7", "failed+unknown/s": "#d33", "polled/s": "#37c", "p50 ms": "#37c", "p99 ms": "#e80", "max ms": "#999"}


def render(title: str, replay: str | None, result: CheckResult, verdict: Verdict, line: Timeline) -> str:
    """The whole HTML page."""
    seconds = [b.second for b in line.buckets]
    writes = {
        "acknowledged/s": [b.sends_ok for b in line.buckets],
        "failed+unknown/s": [b.sends_failed + b.sends_unknown for b in line.buckets],
    }
    # Polls come in bursts (a consumer catching up reads thousands in one second): on a
    # chart of their own they cannot flatten the write lines.
    polled = {"polled/s": [b.records_polled for b in line.buckets]}
    latency = {
        "p50 ms": [b.percentile_ms(0.5) for b in line.buckets],
        "p99 ms": [b.percentile_ms(0.99) for b in line.buckets],
        "max ms": [b.percentile_ms(1.0) for b in line.buckets],
    }
    good = verdict.outcome in (Outcome.PASSED, Outcome.CAUGHT)
    return "\n".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{escape(title)}</title>",
            "<style>body{font-family:sans-serif;margin:2em}svg{background:#fafafa;border:1px solid #ddd}"
            "td,th{padding:2px 8px;text-align:left;vertical-align:top}.bad{color:#c00}.good{color:#080}code{background:#eee;padding:2px 4px}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f"<h2 class='{'good' if good else 'bad'}'>{escape(verdict.outcome.label.upper())}: {escape(verdict.sentence)}</h2>",
            f"<p>exit code {verdict.outcome.exit_code}; {len(result.anomalies)} anomalies found</p>",
            f"<p>replay: <code>{escape(replay)}</code></p>" if replay else "<p>replay: not recorded</p>",
            "<h3>Writes</h3>",
            _chart(seconds, writes, line, "records per second", log_scale=False),
            "<h3>Records polled by consumers</h3>",
            _chart(seconds, polled, line, "records per second", log_scale=False),
            "<h3>Write latency (send to acknowledgement)</h3>",
            _chart(seconds, latency, line, "milliseconds (log scale)", log_scale=True),
            _faults_table(line),
            _anomalies(result),
            _comparisons(result),
            _final_reads(result),
            _counts(result),
            "</body></html>",
        ]
    )


def _chart(seconds: list[int], series: dict[str, list[float | None]], line: Timeline, y_label: str, log_scale: bool) -> str:
    """A line chart of ``series`` over ``seconds`` with the fault windows shaded behind it,
    both axes labelled."""
    span = max(seconds[-1] if seconds else 1, 1)
    values = [v for vs in series.values() for v in vs if v is not None and v > 0]
    top = max(values, default=1.0)
    bottom = min(values, default=1.0) if log_scale else 0.0

    def x(second: float) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * second / span

    def y(value: float) -> float:
        if log_scale:
            low, high = math.log10(max(bottom, 0.1)), math.log10(max(top, bottom * 10, 1))
            fraction = (math.log10(max(value, 0.1)) - low) / (high - low)
        else:
            fraction = value / top if top else 0
        return HEIGHT - MARGIN + (2 * MARGIN - HEIGHT) * fraction

    parts = [f"<svg width='{WIDTH}' height='{HEIGHT}' xmlns='http://www.w3.org/2000/svg'>"]
    for i, fault in enumerate(line.faults):
        left, right = x(fault.start_s), max(x(fault.end_s), x(fault.start_s) + 2)
        parts.append(f"<rect x='{left:.1f}' y='{MARGIN / 2}' width='{right - left:.1f}' height='{HEIGHT - 1.5 * MARGIN}' fill='#f3c' opacity='0.12'><title>{escape(fault.name)} {escape(fault.target)}</title></rect>")
        parts.append(f"<text x='{left + 2:.1f}' y='{MARGIN / 2 + 10 + 10 * (i % 3)}' font-size='9' fill='#a08'>{escape(fault.name)}</text>")
    parts.append(f"<line x1='{MARGIN}' y1='{HEIGHT - MARGIN}' x2='{WIDTH - MARGIN}' y2='{HEIGHT - MARGIN}' stroke='#666'/>")
    parts.append(f"<line x1='{MARGIN}' y1='{MARGIN / 2}' x2='{MARGIN}' y2='{HEIGHT - MARGIN}' stroke='#666'/>")
    parts.append(f"<text x='{MARGIN}' y='{HEIGHT - MARGIN + 14}' font-size='10'>0</text><text x='{WIDTH - MARGIN - 10}' y='{HEIGHT - MARGIN + 14}' font-size='10'>{span}</text>")
    parts.append(f"<text x='{WIDTH / 2 - 80:.0f}' y='{HEIGHT - MARGIN + 28}' font-size='11'>seconds since the run started</text>")
    parts.append(f"<text x='2' y='{y(top) + 4:.1f}' font-size='10'>{top:.0f}</text><text x='2' y='{y(bottom if log_scale else 0) + 4:.1f}' font-size='10'>{bottom:.0f}</text>")
    parts.append(f"<text x='12' y='{HEIGHT / 2 + 40:.0f}' font-size='11' transform='rotate(-90 12 {HEIGHT / 2 + 40:.0f})'>{escape(y_label)}</text>")
    for n, (name, points) in enumerate(series.items()):
        path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(seconds, points) if v is not None)
        color = COLORS[name]
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.5' points='{path}'/>")
        parts.append(f"<text x='{WIDTH - MARGIN - 120}' y='{MARGIN / 2 + 12 * n + 4}' font-size='10' fill='{color}'>{escape(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _faults_table(line: Timeline) -> str:
    rows = "".join(
        f"<tr><td>{f.start_s:.1f}–{f.end_s:.1f} s</td><td>{escape(f.name)}</td><td>{escape(f.target)}</td><td>{escape(f.detail)}</td></tr>"
        for f in line.faults
    )
    return f"<h3>Faults</h3><table><tr><th>when</th><th>fault</th><th>target</th><th>detail</th></tr>{rows}</table>"


def _anomalies(result: CheckResult) -> str:
    if result.valid:
        return "<h3>Anomalies</h3><p>none</p>"
    sections = []
    for kind, found in result.by_kind.items():
        examples = "".join(f"<li>partition {a.partition}: {escape(a.message)}</li>" for a in found[:10])
        sections.append(f"<h4 class='bad'>{escape(kind)} ({len(found)})</h4><p>{escape(KINDS[kind])}</p><ul>{examples}</ul>")
    return "<h3>Anomalies</h3>" + "".join(sections)


def _comparisons(result: CheckResult) -> str:
    """One row per replica comparison: how many replicas answered and were compared."""
    rows = "".join(
        f"<tr class='{'good' if c['replicas_compared'] == c['replicas_expected'] and c['partitions_converged'] == c['partitions'] else 'bad'}'>"
        f"<td>{escape(c['label'])}</td><td>{c['replicas_compared']} of {c['replicas_expected']}</td>"
        f"<td>{c['partitions_converged']} of {c['partitions']}</td><td>{c['waited_s_max']:.1f} s</td></tr>"
        for c in result.comparisons
    )
    header = "<tr><th>comparison</th><th>replicas compared</th><th>partitions back in full ISR, caught up</th><th>waited</th></tr>"
    return f"<h3>Replica comparisons</h3><table>{header}{rows}</table>" if rows else "<h3>Replica comparisons</h3><p>none recorded</p>"


def _final_reads(result: CheckResult) -> str:
    """One row per partition: how far the final read got against its HW and the highest HW
    anyone observed during the run."""
    rows = "".join(
        f"<tr class='{'good' if f['complete'] and f['high_watermark'] >= f['highest_hw_observed'] else 'bad'}'>"
        f"<td>{f['partition']}</td><td>{f['log_start'] if f['read'] else '–'}</td><td>{f['high_watermark'] if f['read'] else '–'}</td>"
        f"<td>{f['highest_hw_observed']}</td><td>{f['records']}</td><td>{'yes' if f['complete'] else 'no'}</td></tr>"
        for f in result.final_reads
    )
    header = "<tr><th>partition</th><th>log start</th><th>HW</th><th>highest HW observed before</th><th>records read</th><th>reached its HW</th></tr>"
    return f"<h3>Final read</h3><table>{header}{rows}</table>" if rows else "<h3>Final read</h3><p>none recorded</p>"


def _counts(result: CheckResult) -> str:
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in result.counts.items())
    return f"<h3>Operations</h3><table>{rows}</table>"
