"""Reports from synthetic histories: files written, timeline buckets, faults in the picture."""

from __future__ import annotations

import json

from chaos.checker import check
from chaos.history import FaultOp, History, SendOp
from chaos.report import summary, write_report
from chaos.report.timeline import timeline
from tests.chaos.histories import clean_history, with_final_reads


def test_timeline_buckets_by_completion_second() -> None:
    ops = clean_history() + [SendOp("p", 0, "late", 2.0, 2.2, "unknown"), FaultOp("kill", "broker-1", 1.0, 3.5)]
    line = timeline(ops)
    assert [b.sends_ok for b in line.buckets[:3]] == [1, 1, 1]
    assert line.buckets[2].sends_unknown == 1
    assert line.buckets[0].percentile_ms(0.99) == 500
    assert line.buckets[3].records_polled == 3
    assert len(line.buckets) == 8  # up to the last poll (7.1 s); final read and replicas are not timed
    assert line.faults[0].name == "kill"


def test_report_files_name_the_anomalies(tmp_path) -> None:
    ops = with_final_reads(clean_history(), []) + [FaultOp("pause", "broker-2", 1.0, 4.0, "SIGSTOP")]
    result = check(ops)
    html = write_report(tmp_path, "unit run", {"seed": 1}, History(ops), result)
    page = html.read_text()
    assert "<svg" in page and "pause" in page and "lost-write" in page
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"] == {"seed": 1} and report["check"]["anomaly_counts"]["lost-write"] == 6
    assert History.load(tmp_path / "history.jsonl").ops == ops
    assert "lost-write: 6" in (tmp_path / "summary.txt").read_text()


def test_summary_of_a_clean_run() -> None:
    assert "no anomalies" in summary("clean", check(clean_history()))
