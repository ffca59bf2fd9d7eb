"""The web console in a real browser (Debian's chromium through Playwright) against a real
local cluster: one controller and three brokers with metrics, short broker sessions so that a
killed broker leaves the ISR within a few seconds (docs/console.md)."""

from __future__ import annotations

import json
import time

import pytest

from data_plane.client import Consumer, Producer
from tests.browser.conftest import console_process, failed, page_evidence
from tests.cluster import TestCluster, local_cluster

expect = pytest.importorskip("playwright.sync_api", reason="pip install 'playwright>=1.40' (the test extra)").expect

pytestmark = pytest.mark.integration

SESSION = ["--session-timeout-ms", "2000"]
BROKER_ARGS = [*SESSION, "--heartbeat-interval-ms", "300", "--replica-lag-time-max-ms", "2000", "--transaction-state-partitions", "1",
               "--group-session-timeout-ms", "3000", "--group-heartbeat-interval-ms", "500"]
PAGES = {"overview": "Overview", "topics": "Topics", "groups": "Consumer groups", "transactions": "Transactions",
         "security": "Users, ACLs and quotas", "chaos": "Chaos reports"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("console"), controllers=1, brokers=3, controller_args=SESSION, broker_args=BROKER_ARGS,
                       configure=lambda c: (c.give_metrics_ports(), c.save())) as running:
        running.create_topic("orders", partitions=3, replication_factor=3)
        run = running.data_dir / "chaos" / "partition-leader-kills"  # where the console looks by default
        run.mkdir(parents=True)
        (run / "report.json").write_text(json.dumps({"verdict": {"outcome": "pass", "sentence": "no anomaly in 1,200 operations"}}))
        (run / "report.html").write_text("<html><body><h1>timeline of partition-leader-kills</h1></body></html>")
        yield running


@pytest.fixture(scope="module")
def console(cluster: TestCluster) -> str:
    with console_process(cluster.data_dir) as running:
        yield running.url


@pytest.fixture
def page(request, chromium, console: str, cluster: TestCluster, shots):
    context = chromium.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(console)
    yield page
    if failed(request):
        log = cluster.data_dir / "console-test.log"
        print(page_evidence(page, shots, request.node.name), "\nconsole log tail:\n", *log.read_text().splitlines(True)[-20:])
    context.close()
    assert not errors, f"the page raised: {errors}"


def test_every_page_opens(page, console: str, shots) -> None:
    for route, heading in PAGES.items():
        page.goto(f"{console}#/{route}")
        expect(page.locator("h1")).to_have_text(heading)
        expect(page.locator("main")).not_to_contain_text("loading…")
        expect(page.locator("main .error")).to_have_count(0)
        page.screenshot(path=str(shots / f"{route}.png"), full_page=True)
    expect(page.get_by_test_id("chaos-runs")).to_contain_text("no anomaly in 1,200 operations")
    with page.expect_popup() as popup:
        page.get_by_role("link", name="timeline").click()
    expect(popup.value.locator("h1")).to_have_text("timeline of partition-leader-kills")
    page.goto(f"{console}#/topics/orders")
    expect(page.get_by_test_id("partitions").locator("tr")).to_have_count(4)
    page.screenshot(path=str(shots / "topic.png"), full_page=True)


def test_a_page_asked_for_before_the_app_listens_is_the_one_shown(chromium, console: str) -> None:
    """The app draws first and starts listening for hash changes only after the first paint;
    a page asked for in between (a test, a bookmark script, a fast click) fired its event with
    no one listening and the app stayed on the overview. Here the hash changes at
    DOMContentLoaded: after the app's first render, before its effects ran."""
    context = chromium.new_context()
    context.add_init_script("document.addEventListener('DOMContentLoaded', () => { location.hash = '#/topics'; })")
    page = context.new_page()
    try:
        page.goto(console)
        expect(page.locator("h1")).to_have_text("Topics")
    finally:
        context.close()


def test_create_topic_through_the_page(page, console: str, cluster: TestCluster) -> None:
    page.goto(f"{console}#/topics")
    page.get_by_test_id("new-topic-name").fill("made-in-browser")
    page.get_by_test_id("new-topic-partitions").fill("2")
    page.get_by_test_id("new-topic-rf").fill("2")
    page.get_by_test_id("create-topic").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text('Create topic "made-in-browser" with 2 partitions, replication factor 2')
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-ok")).to_contain_text("created made-in-browser")
    expect(page.get_by_test_id("topic-row").filter(has_text="made-in-browser")).to_have_count(1)
    page.get_by_test_id("topic-search").fill("made-in")
    expect(page.get_by_test_id("topic-row")).to_have_count(1)
    cluster.wait_topic_ready("made-in-browser", 2)


def test_records_found_by_offset_and_by_timestamp(page, console: str, cluster: TestCluster, shots) -> None:
    base_ms = int(time.time() * 1000) - 60_000
    with Producer(cluster.bootstrap) as producer:
        for i in range(20):
            producer.send("orders", f'{{"n": {i}}}'.encode(), key=f"k{i}".encode(), partition=1, timestamp_ms=base_ms + 1000 * i,
                          headers=[("trace-id", f"t{i}".encode())] if i % 5 == 0 else None)
        producer.flush()
    page.goto(f"{console}#/messages/orders")
    page.get_by_test_id("partition").select_option("1")
    page.get_by_test_id("start").select_option("offset")
    page.get_by_test_id("start-value").fill("5")
    page.get_by_test_id("read").click()
    expect(page.get_by_test_id("record-offset").first).to_have_text("5")
    expect(page.get_by_test_id("record")).to_have_count(15)
    page.get_by_test_id("format").select_option("json")
    expect(page.get_by_test_id("record-value").first).to_have_text('{\n  "n": 5\n}')
    page.screenshot(path=str(shots / "messages.png"), full_page=True)
    page.get_by_test_id("header-filter").fill("trace-id=t1")  # records 10 and 15 carry t10 and t15
    page.get_by_test_id("read").click()
    expect(page.get_by_test_id("record-offset")).to_have_text(["10", "15"])
    page.get_by_test_id("header-filter").fill("")
    page.get_by_test_id("start").select_option("timestamp")
    page.get_by_test_id("start-value").fill(str(base_ms + 12_000))
    page.get_by_test_id("read").click()
    expect(page.get_by_test_id("record-offset").first).to_have_text("12")
    page.get_by_test_id("start-value").fill(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base_ms + 15_000) / 1000)) + "Z")
    page.get_by_test_id("read").click()
    expect(page.get_by_test_id("record-offset").first).to_have_text("15")
    page.get_by_test_id("tail").check()  # the live tail shows what is produced from now on
    with Producer(cluster.bootstrap) as producer:
        producer.send("orders", b'{"n": "tailed"}', partition=1)
        producer.flush()
    expect(page.get_by_test_id("record-value").last).to_contain_text("tailed")
    page.reload()  # the chosen format is remembered
    expect(page.get_by_test_id("format")).to_have_value("json")


def test_group_lag_rises_while_stopped_and_falls_when_running(page, console: str, cluster: TestCluster, shots) -> None:
    cluster.create_topic("lagging", partitions=1, replication_factor=1)

    def produce(count: int) -> None:
        with Producer(cluster.bootstrap) as producer:
            for i in range(count):
                producer.send("lagging", b"x%d" % i)
            producer.flush()

    def consume_all() -> None:
        with Consumer(cluster.bootstrap, group_id="watchers", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
            consumer.subscribe(["lagging"])
            end = 0
            while end < total:
                for r in consumer.poll(timeout_ms=200):
                    end = r.offset + 1
            consumer.commit()

    total = 10
    produce(total)
    consume_all()
    page.goto(f"{console}#/groups/watchers")
    expect(page.get_by_test_id("group-lag")).to_have_text("0", timeout=15_000)
    produce(25)  # the consumer is stopped: lag rises
    total += 25
    expect(page.get_by_test_id("group-lag")).to_have_text("25", timeout=15_000)
    page.screenshot(path=str(shots / "group.png"), full_page=True)
    consume_all()  # and falls once it runs again
    expect(page.get_by_test_id("group-lag")).to_have_text("0", timeout=15_000)
    page.get_by_test_id("reset-topic").fill("lagging")  # back to the earliest offset: a dry run first
    page.get_by_test_id("reset-dry-run").click()
    expect(page.get_by_test_id("reset-plan")).to_contain_text("35")
    expect(page.get_by_test_id("group-lag")).to_have_text("0")  # nothing changed yet
    page.get_by_test_id("reset-apply").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Commit the new offsets of 1 partition for group watchers")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("group-lag")).to_have_text("35", timeout=15_000)
    # the console kept the lag it saw: a page opened now starts with the rise and the fall
    history = page.evaluate("async () => (await (await fetch('/api/view/group/watchers')).json()).lag_history.map(s => s[1])")
    assert {0, 25, 35} <= set(history), history


def test_a_hanging_transaction_is_listed_and_aborted(page, console: str, cluster: TestCluster, shots) -> None:
    producer = Producer(cluster.bootstrap, transactional_id="stuck-writer", transaction_timeout_ms=600_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("orders", b"never committed", partition=0)
        producer.flush()
        page.goto(f"{console}#/transactions")
        row = page.get_by_test_id("transactions").locator("tr").filter(has_text="stuck-writer")
        expect(row).to_contain_text("Ongoing", timeout=15_000)
        page.screenshot(path=str(shots / "transactions-ongoing.png"), full_page=True)
        row.get_by_role("button", name="Abort…").click()
        expect(page.get_by_test_id("confirm-text")).to_contain_text("Abort the open transaction of stuck-writer")
        page.get_by_test_id("confirm-yes").click()
        expect(page.get_by_test_id("action-ok")).to_have_text("aborted", timeout=30_000)
        expect(row).not_to_contain_text("Ongoing", timeout=15_000)
    finally:
        producer.close(timeout=1)


def test_change_without_csrf_token_is_refused(page, console: str, cluster: TestCluster) -> None:
    page.goto(f"{console}#/topics")
    expect(page.locator("h1")).to_have_text("Topics")
    answer = page.evaluate("""async () => {
        const r = await fetch('/api/topics', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                              body: JSON.stringify({name: 'forged', partitions: 1, replication_factor: 1})});
        return {status: r.status, body: await r.json()};
    }""")
    assert answer["status"] == 403 and "CSRF" in answer["body"]["error"], answer
    with cluster.controller_client() as client:
        assert "forged" not in {t.name for t in client.describe_cluster().topics}


def test_partitions_added_and_a_config_altered_through_the_topic_page(page, console: str, cluster: TestCluster) -> None:
    """Each change asks first and takes effect in the controller; a value the controller
    refuses shows its error line and changes nothing."""
    cluster.create_topic("grown", partitions=1, replication_factor=2)
    page.goto(f"{console}#/topics/grown")
    expect(page.get_by_test_id("partitions").locator("tr")).to_have_count(2)
    page.get_by_test_id("total-partitions").fill("3")
    page.get_by_test_id("add-partitions").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Grow grown from 1 to 3 partitions?")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-ok")).to_have_text("grown now has 3 partitions")
    expect(page.get_by_test_id("partitions").locator("tr")).to_have_count(4)

    page.get_by_test_id("config-key").fill("retention.ms")
    page.get_by_test_id("config-value").fill("3600000")
    page.get_by_test_id("alter-config").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Set retention.ms=3600000 on grown?")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-ok")).to_have_text("altered retention.ms")
    page.get_by_test_id("config-key").fill("min.insync.replicas")
    page.get_by_test_id("config-value").fill("5")  # above the replication factor: refused
    page.get_by_test_id("alter-config").click()
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-error")).to_contain_text("min.insync.replicas")
    with cluster.controller_client() as client:
        configs = {e.key: e.value for e in client.describe_configs(["grown"])["grown"]}
    assert configs["retention.ms"] == "3600000" and configs["min.insync.replicas"] != "5", configs


def test_a_user_and_an_acl_created_and_deleted_through_the_page(page, console: str, cluster: TestCluster) -> None:
    from metadata_quorum.security_client import SecurityClient

    def controller_view() -> tuple[set[str], list]:
        with SecurityClient(",".join(c.address for c in cluster.controllers), timeout_s=10.0) as client:
            return {u.name for u in client.list_users()}, [a for a in client.list_acls() if a.principal == "User:carol"]

    page.goto(f"{console}#/security")
    page.get_by_test_id("user-name").fill("carol")
    page.get_by_test_id("user-password").fill("carol-secret")
    page.get_by_test_id("create-user").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Create user carol")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("users")).to_contain_text("carol")
    page.get_by_test_id("acl-principal").fill("User:carol")
    page.get_by_test_id("acl-resource_name").fill("orders")
    page.get_by_test_id("acl-operation").fill("READ")  # Kafka's spelling is taken too
    page.get_by_test_id("create-acl").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("allow User:carol READ on topic orders (literal)?")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("acls")).to_contain_text("User:carol")
    users, acls = controller_view()
    assert "carol" in users and [(a.resource_name, a.operation) for a in acls] == [("orders", "read")], acls

    page.get_by_test_id("acls").locator("tr", has_text="User:carol").get_by_role("button", name="delete…").click()
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("acls")).not_to_contain_text("User:carol")
    page.get_by_test_id("users").locator("tr", has_text="carol").get_by_role("button", name="delete…").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Delete user carol?")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("users")).not_to_contain_text("carol")
    users, acls = controller_view()
    assert "carol" not in users and acls == [], (users, acls)


def test_a_quota_set_and_removed_through_the_page(page, console: str, cluster: TestCluster) -> None:
    """The quota form asks first, then the controller holds the value; removing it from its
    row takes it away again; a value the controller refuses shows its error line."""
    page.goto(f"{console}#/security")
    page.get_by_test_id("quota-user").fill("alice")
    page.get_by_test_id("quota-value").fill("1048576")
    page.get_by_test_id("quota-set").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Set producer_byte_rate=1048576 for user alice")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-ok")).to_have_text("quota set")
    expect(page.get_by_test_id("quotas")).to_contain_text("1048576")
    with cluster.controller_client() as client:
        [entry] = client.describe_client_quotas(user="alice").entries
        assert dict(entry.values) == {"producer_byte_rate": 1048576.0}

    page.get_by_test_id("quotas").get_by_role("button", name="remove…").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text("Remove producer_byte_rate from user alice")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-ok")).to_have_text("quota removed")
    with cluster.controller_client() as client:
        assert not client.describe_client_quotas(user="alice").entries

    page.get_by_test_id("quota-user").fill("")
    page.get_by_test_id("quota-client").fill("")
    page.get_by_test_id("quota-value").fill("5")
    page.get_by_test_id("quota-set").click()
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("action-error")).to_contain_text("name a user, a client id or both")


def test_killed_broker_shows_under_replicated_then_recovers(page, console: str, cluster: TestCluster, shots) -> None:
    page.goto(f"{console}#/overview")
    expect(page.get_by_test_id("under-replicated")).to_have_text("0", timeout=15_000)
    victim = cluster.broker(3)
    cluster.kill(victim)  # SIGKILL
    try:
        expect(page.get_by_test_id("under-replicated")).not_to_have_text("0", timeout=5_000)
        expect(page.get_by_test_id("broker-3-state")).not_to_have_text("running", timeout=5_000)
        page.screenshot(path=str(shots / "overview-broker-down.png"), full_page=True)
    finally:
        cluster.start_node(victim)
    expect(page.get_by_test_id("under-replicated")).to_have_text("0", timeout=60_000)
    expect(page.get_by_test_id("broker-3-state")).to_have_text("running")
