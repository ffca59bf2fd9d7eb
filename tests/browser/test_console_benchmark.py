"""Console benchmarks (marked benchmark, not in the default run; figures in docs/console.md):
the topic list with 10,000 partitions, a live topic page of 1,000 partitions, the first 500
records of a partition, and the console's own CPU while a page watches the overview.

Run: ``pytest -m benchmark tests/browser/test_console_benchmark.py -s``.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from data_plane.client import Producer
from tests.browser.conftest import console_process
from tests.cluster import TestCluster, local_cluster

expect = pytest.importorskip("playwright.sync_api", reason="pip install 'playwright>=1.40' (the test extra)").expect

pytestmark = [pytest.mark.benchmark, pytest.mark.integration]

RENDER_TIMER = """([button, rows, count]) => new Promise(done => {
    const t0 = performance.now();
    document.querySelector(button).click();
    const check = () => document.querySelectorAll(rows).length >= count ? done(performance.now() - t0) : requestAnimationFrame(check);
    check();
})"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("console-bench"), controllers=1, brokers=1,
                       configure=lambda c: (c.give_metrics_ports(), c.save())) as running:
        running.create_topic("wide", partitions=1000)
        running.create_topic("records", partitions=1)
        with Producer(running.bootstrap) as producer:
            for i in range(2000):
                producer.send("records", json.dumps({"n": i, "pad": "x" * 80}).encode(), key=b"k%d" % i, partition=0)
            producer.flush()
        yield running


@pytest.fixture(scope="module")
def console(cluster: TestCluster):
    with console_process(cluster.data_dir) as running:
        yield running


def test_topic_list_of_10000_partitions_renders(chromium, console) -> None:
    """10,000 one-partition topics (the most rows the list can have for 10,000 partitions),
    served to the page in place of the live answer."""
    rows = [{"name": f"topic-{i:05d}", "partitions": 1, "replication_factor": 3, "under_replicated": 0, "offline": 0,
             "size_bytes": 1024 * i, "records_per_s": None} for i in range(10_000)]
    event = f"data: {json.dumps({'data': rows})}\n\n"
    page = chromium.new_page()
    page.route("**/api/stream/topics", lambda route: route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=event))
    page.goto(console.url + "#/overview")
    took = page.evaluate("""() => new Promise(done => {
        const t0 = performance.now();
        location.hash = '#/topics';
        const check = () => document.querySelectorAll('[data-testid=topic-row]').length >= 500 ? done(performance.now() - t0) : requestAnimationFrame(check);
        check();
    })""") / 1000
    expect(page.get_by_test_id("topics-count")).to_have_text("showing 500 of 10000 topics: search to narrow")
    started = time.perf_counter()
    page.get_by_test_id("topic-search").fill("topic-09")
    expect(page.get_by_test_id("topics-count")).to_have_text("showing 500 of 1000 topics: search to narrow")
    searched = time.perf_counter() - started
    print(f"\ntopic list, 10,000 topics: first render {took * 1000:.0f} ms, a search {searched * 1000:.0f} ms")
    page.close()


def test_topic_page_of_1000_partitions_updates_live(chromium, console) -> None:
    page = chromium.new_page()
    page.goto(console.url + "#/topics/wide")
    expect(page.get_by_test_id("partitions").locator("tr")).to_have_count(1001, timeout=30_000)
    # long tasks (> 50 ms, frames dropped) while the live view updates for 10 s
    long_tasks = page.evaluate("""() => new Promise(done => {
        const seen = [];
        new PerformanceObserver(list => seen.push(...list.getEntries().map(e => e.duration))).observe({type: 'longtask'});
        setTimeout(() => done(seen), 10000);
    })""")
    print(f"\ntopic page, 1,000 partitions, 10 s live: {len(long_tasks)} long tasks, longest {max(long_tasks, default=0):.0f} ms")
    page.close()


def test_first_500_records_of_a_partition(chromium, console) -> None:
    page = chromium.new_page()
    timings = []
    for _ in range(5):
        page.goto(console.url + "#/messages/records")
        page.reload()
        page.get_by_test_id("partition").select_option("0")
        # timed in the page: from the click to the frame after the 500th row is in the DOM
        timings.append(page.evaluate(RENDER_TIMER, ["[data-testid=read]", "[data-testid=record]", 500]))
        server_ms = float(page.get_by_test_id("records-summary").inner_text().split(" in ")[1].split(" ms")[0])
    print(f"\nfirst 500 records: click to rendered {sorted(timings)[2]:.0f} ms (median of 5), server {server_ms:.0f} ms")
    page.close()


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_console_cpu_while_watching_the_overview(chromium, console) -> None:
    page = chromium.new_page()
    page.goto(console.url + "#/overview")
    expect(page.get_by_test_id("under-replicated")).to_have_text("0")
    before, started = _cpu_s(console.pid), time.monotonic()
    page.wait_for_timeout(30_000)
    share = (_cpu_s(console.pid) - before) / (time.monotonic() - started)
    print(f"\nconsole CPU while one page watches the overview: {100 * share:.1f}% of a core")
    page.close()
