"""Live rates from the nodes' Prometheus counters: records in/out per second (per topic and
in all), produce and fetch latency (the mean of the interval) and request errors per second.

Pure: ``totals`` reads one scrape's text into counter totals; ``Rates`` keeps the previous
totals and a bounded history, and is given the time of each scrape. A counter that went
down (a node restarted) counts from zero again rather than giving a negative rate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

HISTORY_POINTS = 120
PRODUCE_METHODS = ("Produce", "ProduceStream")
FETCH_METHODS = ("Fetch", "Consume")


def _method(name: str) -> str:
    """``/kraftlog.v1.Broker/Produce`` or ``Produce`` → ``Produce``."""
    return name.rsplit("/", 1)[-1]


def totals(texts: Iterable[str]) -> dict[str, float]:
    """The counters the charts need, summed over every node's scrape text."""
    out: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        out[key] = out.get(key, 0.0) + value

    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "kraftlog_topic_records_in_total":
                    add("records_in", s.value)
                    add(f"topic_in:{s.labels.get('topic', '')}", s.value)
                elif s.name == "kraftlog_topic_records_out_total":
                    add("records_out", s.value)
                elif s.name == "kraftlog_rpc_requests_total" and s.labels.get("code", "OK") != "OK":
                    add("errors", s.value)
                elif s.name in ("kraftlog_rpc_duration_seconds_sum", "kraftlog_rpc_duration_seconds_count"):
                    method = _method(s.labels.get("method", ""))
                    kind = "produce" if method in PRODUCE_METHODS else "fetch" if method in FETCH_METHODS else None
                    if kind:
                        add(f"{kind}_latency_{s.name.rsplit('_', 1)[-1]}", s.value)
    return out


@dataclass
class Rates:
    """Per-second rates between consecutive scrapes, and the last HISTORY_POINTS of them."""

    previous: tuple[float, dict[str, float]] | None = None
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    topic_rates: dict[str, float] = field(default_factory=dict)

    def add(self, now_s: float, current: dict[str, float]) -> dict | None:
        """Record one scrape; the new point (None for the first scrape)."""
        before, self.previous = self.previous, (now_s, current)
        if before is None or now_s <= before[0]:
            return None
        then, old = before
        elapsed = now_s - then

        def delta(key: str) -> float:
            new, prior = current.get(key, 0.0), old.get(key, 0.0)
            return new if new < prior else new - prior

        def mean_ms(kind: str) -> float | None:
            count = delta(f"{kind}_latency_count")
            return round(1000 * delta(f"{kind}_latency_sum") / count, 3) if count else None

        point = {
            "t": round(now_s, 3),
            "records_in": round(delta("records_in") / elapsed, 1),
            "records_out": round(delta("records_out") / elapsed, 1),
            "produce_ms": mean_ms("produce"), "fetch_ms": mean_ms("fetch"),
            "errors": round(delta("errors") / elapsed, 2),
        }
        self.topic_rates = {k.split(":", 1)[1]: round(delta(k) / elapsed, 1) for k in current if k.startswith("topic_in:")}
        self.history.append(point)
        return point
