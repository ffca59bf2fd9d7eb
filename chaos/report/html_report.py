"""A one-file HTML picture of a run: throughput and latency over time with the faults
shaded, then the verdict and examples of each anomaly. Inline SVG, no scripts, no
dependencies, so it opens anywhere and can be attached to a bug report."""

from __future__ import annotations

import math
from html import escape

from chaos.checker import KINDS, CheckResult
from chaos.report.timeline import Timeline

WIDTH, HEIGHT, MARGIN = 900, 220, 45
COLORS = {"acknowledged/s": "#2a7", "failed+unknown/s": "#d33", "polled/s": "#37c", "p50 ms": "#37c", "p99 ms": "#e80", "max ms": "#999"}


def render(title: str, result: CheckResult, line: Timeline) -> str:
    """The whole HTML page."""
    seconds = [b.second for b in line.buckets]
    throughput = {
        "acknowledged/s": [b.sends_ok for b in line.buckets],
        "failed+unknown/s": [b.sends_failed + b.sends_unknown for b in line.buckets],
        "polled/s": [b.records_polled for b in line.buckets],
    }
    latency = {
        "p50 ms": [b.percentile_ms(0.5) for b in line.buckets],
        "p99 ms": [b.percentile_ms(0.99) for b in line.buckets],
        "max ms": [b.percentile_ms(1.0) for b in line.buckets],
    }
    verdict = "no anomalies" if result.valid else f"{len(result.anomalies)} anomalies"
    return "\n".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{escape(title)}</title>",
            "<style>body{font-family:sans-serif;margin:2em}svg{background:#fafafa;border:1px solid #ddd}"
            "td,th{padding:2px 8px;text-align:left;vertical-align:top}.bad{color:#c00}.good{color:#080}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f"<h2 class='{'good' if result.valid else 'bad'}'>{verdict}</h2>",
            "<h3>Throughput</h3>",
            _chart(seconds, throughput, line, log_scale=False),
            "<h3>Write latency (send to acknowledgement)</h3>",
            _chart(seconds, latency, line, log_scale=True),
            _faults_table(line),
            _anomalies(result),
            _comparisons(result),
            _counts(result),
            "</body></html>",
        ]
    )


def _chart(seconds: list[int], series: dict[str, list[float | None]], line: Timeline, log_scale: bool) -> str:
    """A line chart of ``series`` over ``seconds`` with the fault windows shaded behind it."""
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
    parts.append(f"<text x='{MARGIN}' y='{HEIGHT - MARGIN + 14}' font-size='10'>0 s</text><text x='{WIDTH - MARGIN - 20}' y='{HEIGHT - MARGIN + 14}' font-size='10'>{span} s</text>")
    parts.append(f"<text x='2' y='{MARGIN / 2 + 4}' font-size='10'>{top:.0f}</text>")
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


def _counts(result: CheckResult) -> str:
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in result.counts.items())
    return f"<h3>Operations</h3><table>{rows}</table>"
