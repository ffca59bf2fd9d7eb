"""Reports from synthetic histories: files written, timeline buckets, faults in the picture."""

from __future__ import annotations

import json
from dataclasses import replace

from chaos.checker import check, judge
from chaos.history import ConvergenceOp, FaultOp, History, ReplicaOp, SendOp
from chaos.report import summary, write_report
from chaos.report.timeline import timeline
from tests.chaos.histories import clean_history, convergence, with_final_reads


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
    html = write_report(tmp_path, "unit run", {"seed": 1}, History(ops), result, judge(result, frozenset()))
    page = html.read_text()
    assert "<svg" in page and "pause" in page and "lost-write" in page
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"] == {"seed": 1} and report["check"]["anomaly_counts"]["lost-write"] == 6
    assert report["verdict"]["outcome"] == "failed" and report["verdict"]["exit_code"] == 1
    assert History.load(tmp_path / "history.jsonl").ops == ops
    assert "lost-write: 6" in (tmp_path / "summary.txt").read_text()


def test_summary_of_a_clean_run() -> None:
    result = check(clean_history())
    text = summary("clean", result, judge(result, frozenset()))
    assert "verdict: PASSED, no anomalies" in text and "final read: 1 of 1 partitions read to their HW, 6 records" in text


def test_reports_say_how_many_replicas_were_compared(tmp_path) -> None:
    """A broker that did not answer shows as a smaller count in every form of the report."""
    ops = [op for op in clean_history() if not (isinstance(op, ReplicaOp) and op.broker == 3)]
    ops = [replace(op, unanswered={3: "DescribeLogs failed"}) if isinstance(op, ConvergenceOp) else op for op in ops]
    ops += [convergence(label="restart 1 (SIGKILL broker-2)")] + [ReplicaOp(b, 0, 5.0, 0, 6, 6, checksum=1, upto_offset=6, label="restart 1 (SIGKILL broker-2)") for b in (1, 2, 3)]
    result = check(ops)
    html = write_report(tmp_path, "unit run", {}, History(ops), result, judge(result, frozenset())).read_text()
    assert "<td>final</td><td>2 of 3</td><td>0 of 1</td>" in html and "<td>1 of 1</td>" in html
    report = json.loads((tmp_path / "report.json").read_text())
    assert [(c["label"], c["replicas_compared"], c["replicas_expected"]) for c in report["check"]["replica_comparisons"]] == [
        ("final", 2, 3),
        ("restart 1 (SIGKILL broker-2)", 3, 3),
    ]
    text = (tmp_path / "summary.txt").read_text()
    assert "replicas compared after healing: 2 of 3; 0 of 1 partitions" in text
    assert "replicas compared after 1 restart: 3 of 3; 1 of 1 partitions back in time" in text
    assert "replica-unanswered: 1" in text


def test_html_report_states_replay_verdict_final_read_and_axes(tmp_path) -> None:
    ops = with_final_reads(clean_history(), []) + [SendOp("p", 0, "burst", 1.0, 1.2, "ok", offset=9)]
    result = check(ops)
    page = write_report(tmp_path, "unit run", {"replay": "kraftlog chaos run --scenario x --seed 7 --duration 9"}, History(ops), result,
                        judge(result, frozenset({"lost-write"}))).read_text()
    assert "CAUGHT: negative control caught, as expected: lost-write" in page and "exit code 0" in page
    assert "<code>kraftlog chaos run --scenario x --seed 7 --duration 9</code>" in page
    assert "<h3>Final read</h3>" in page and "<td>0</td><td>0</td><td>6</td><td>6</td><td>0</td><td>yes</td>" in page
    assert page.count("seconds since the run started") == 3 and "records per second" in page and "milliseconds (log scale)" in page
    writes, polled = page.split("<h3>Writes</h3>")[1].split("<h3>Records polled by consumers</h3>")
    assert "polled/s" not in writes and "polled/s" in polled.split("<h3>Write latency")[0]


def test_summary_names_a_final_read_short_of_the_highest_hw_observed() -> None:
    ops = with_final_reads(clean_history(), [(0, "v0"), (1, "v1"), (2, "v2"), (3, "v3")], high_watermark=4)
    result = check(ops)
    text = summary("short", result, judge(result, frozenset()))
    assert "verdict: FAILED" in text and "HW below the highest observed: partitions [0]" in text
    assert result.final_reads == [{"partition": 0, "read": True, "log_start": 0, "high_watermark": 4, "records": 4, "complete": True, "highest_hw_observed": 6}]
