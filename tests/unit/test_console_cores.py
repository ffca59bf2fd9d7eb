"""The web console's pure parts: rates from Prometheus counters, the record filter, the
health counts, the chaos run listing and the session store's CSRF and sign-in rules."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cli.console import chaos_reports, snapshots
from cli.console.metrics_rates import Rates, totals
from cli.console.sessions import SessionStore
from server_common.client_security import ClientSecurity

SCRAPE = """# TYPE kraftlog_topic_records_in counter
kraftlog_topic_records_in_total{{topic="a"}} {a}
kraftlog_topic_records_in_total{{topic="b"}} {b}
# TYPE kraftlog_rpc_requests counter
kraftlog_rpc_requests_total{{method="/kraftlog.v1.Broker/Produce",code="OK"}} 9
kraftlog_rpc_requests_total{{method="/kraftlog.v1.Broker/Produce",code="UNAVAILABLE"}} {errors}
# TYPE kraftlog_rpc_duration_seconds histogram
kraftlog_rpc_duration_seconds_sum{{method="/kraftlog.v1.Broker/Produce"}} {lat_sum}
kraftlog_rpc_duration_seconds_count{{method="/kraftlog.v1.Broker/Produce"}} {lat_count}
"""


def scrape(a: float, b: float, errors: float = 0, lat_sum: float = 0, lat_count: float = 0) -> str:
    return SCRAPE.format(a=a, b=b, errors=errors, lat_sum=lat_sum, lat_count=lat_count)


def test_rates_between_scrapes_and_a_restarted_node_counts_from_zero() -> None:
    rates = Rates()
    assert rates.add(10.0, totals([scrape(100, 50, lat_sum=1.0, lat_count=10)])) is None
    point = rates.add(12.0, totals([scrape(140, 70, errors=4, lat_sum=1.5, lat_count=20)]))
    assert point["records_in"] == 30.0 and point["errors"] == 2.0 and point["produce_ms"] == 50.0 and point["fetch_ms"] is None
    assert rates.topic_rates == {"a": 20.0, "b": 10.0}
    point = rates.add(14.0, totals([scrape(6, 0)]))  # the counters went down: a restart
    assert point["records_in"] == 3.0


def test_totals_sum_over_nodes() -> None:
    assert totals([scrape(1, 2), scrape(3, 4)])["records_in"] == 10


def test_filter_by_key_and_value_substring() -> None:
    record = SimpleNamespace(key=b"order-7", value=b'{"total": 12}', headers=())
    assert snapshots.matches(record, "order", "total")
    assert not snapshots.matches(record, "invoice", "")
    assert not snapshots.matches(SimpleNamespace(key=None, value=b"x", headers=()), "k", "")


def test_the_header_filter_names_a_header_and_a_substring_of_its_value():
    record = SimpleNamespace(key=b"k", value=b"v", headers=(("trace-id", b"abc-123"), ("empty", None)))
    assert snapshots.matches(record, "", "", "trace-id=abc")
    assert snapshots.matches(record, "", "", "empty")  # a name alone: the header is there
    assert not snapshots.matches(record, "", "", "trace-id=xyz")
    assert not snapshots.matches(record, "", "", "other=abc")
    assert not snapshots.matches(record, "", "", "empty=x")


def row(topic: str, isr: list[int], replicas: list[int], leader: int = 1) -> dict:
    return {"topic": topic, "partition": 0, "isr": isr, "replicas": replicas, "leader": leader,
            "under_replicated": len(isr) < len(replicas), "offline": leader < 0}


def test_health_counts_use_each_topics_min_isr() -> None:
    rows = [row("a", [1, 2], [1, 2, 3]), row("b", [1], [1, 2, 3]), row("c", [], [1], leader=-1)]
    assert snapshots.partition_health(rows, {"a": 2, "b": 2}) == {"under_replicated": 3, "under_min_isr": 2, "offline": 1}


def test_topic_list_adds_up_partitions() -> None:
    rows = [row("a", [1, 2, 3], [1, 2, 3]), row("a", [1], [1, 2, 3])]
    [listed] = snapshots.topic_list(rows, {"a": 100}, {"a": 5.0})
    assert listed == {"name": "a", "partitions": 2, "replication_factor": 3, "under_replicated": 1, "offline": 0, "size_bytes": 100, "records_per_s": 5.0}


def test_chaos_runs_are_listed_and_only_their_timelines_served(tmp_path) -> None:
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "report.json").write_text(json.dumps({"verdict": {"outcome": "pass", "sentence": "no anomaly"}}))
    (run / "report.html").write_text("<html></html>")
    (tmp_path / "not-a-run").mkdir()
    assert [(r["name"], r["outcome"]) for r in chaos_reports.list_runs(tmp_path)] == [("run-1", "pass")]
    assert chaos_reports.timeline_path(tmp_path, "run-1") == run / "report.html"
    assert chaos_reports.timeline_path(tmp_path, "../etc") is None
    assert chaos_reports.timeline_path(tmp_path, "not-a-run") is None
    assert chaos_reports.list_runs(None) == []


def test_sessions_check_csrf_and_expire_when_idle() -> None:
    now = [0.0]
    store = SessionStore("127.0.0.1:1", ClientSecurity(), login_required=True, clock=lambda: now[0])
    session = store.new()
    assert session.principal is None  # must sign in
    assert session.csrf_ok(session.csrf) and not session.csrf_ok(None) and not session.csrf_ok("forged")
    assert store.get(session.sid) is session
    now[0] = 9 * 3600
    assert store.get(session.sid) is None
    with pytest.raises(ValueError, match="user name"):
        store.sign_in(store.new(), "", "x")


def test_without_sign_in_every_session_acts_as_the_console() -> None:
    store = SessionStore("127.0.0.1:1", ClientSecurity(), login_required=False)
    a, b = store.new(), store.new()
    assert a.principal == "console" and a.gateway is b.gateway and a.csrf != b.csrf
    store.close()


def test_lag_history_keeps_one_sample_a_second_for_ten_minutes_per_group():
    from cli.console.lag_history import KEEP_S, LagHistory

    history = LagHistory()
    history.add("g", 100.0, 5)
    assert history.add("g", 100.4, 7) == [(100.4, 7)]  # a second viewer in the same second: one sample
    assert history.add("g", 101.5, 9) == [(100.4, 7), (101.5, 9)]
    assert history.add("other", 101.5, 1) == [(101.5, 1)]  # each group its own
    late = 100.4 + KEEP_S + 0.5
    assert history.add("g", late, 3) == [(101.5, 9), (late, 3)]  # older than KEEP_S: gone
    assert history.add("g", late + 2 * KEEP_S, 4) == [(late + 2 * KEEP_S, 4)]
