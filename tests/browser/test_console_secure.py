"""The console on a secure cluster (mutual TLS, SCRAM users, ACLs): a person signs in and
sees only what their principal may DESCRIBE; a wrong password is refused; no secret reaches
the page (docs/console.md, Security)."""

from __future__ import annotations

import pytest

from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import AclBinding
from tests.browser.conftest import console_process
from tests.cluster import TestCluster, local_cluster

expect = pytest.importorskip("playwright.sync_api", reason="pip install 'playwright>=1.40' (the test extra)").expect

pytestmark = pytest.mark.integration

SUPERS = "User:admin,User:broker-1,User:controller-1"
ARGS = ["--authentication-required", "--authorization", "--super-users", SUPERS]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("console-secure"), controllers=1, brokers=1, secure=True,
                       controller_args=ARGS, broker_args=ARGS) as running:
        running.create_topic("visible")
        running.create_topic("hidden")
        with SecurityClient(",".join(c.address for c in running.controllers), security=running.client_security) as admin:
            admin.upsert_user("alice", "alice-secret")
            admin.upsert_user("bob", "bob-secret")
            admin.create_acls([AclBinding("User:alice", "*", "topic", "visible", "literal", "describe", "allow")])
        yield running


@pytest.fixture(scope="module")
def console(cluster: TestCluster) -> str:
    with console_process(cluster.data_dir) as running:
        yield running.url


def sign_in(chromium, console: str, user: str, password: str):
    context = chromium.new_context(viewport={"width": 1300, "height": 800})
    page = context.new_page()
    page.goto(console)
    page.get_by_test_id("login-user").fill(user)
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
    return context, page


def test_a_user_sees_only_the_topics_it_may_describe(chromium, console: str, shots) -> None:
    context, page = sign_in(chromium, console, "alice", "alice-secret")
    try:
        expect(page.get_by_test_id("principal")).to_have_text("User:alice")
        page.goto(f"{console}#/topics")
        expect(page.get_by_test_id("topic-row").filter(has_text="visible")).to_have_count(1)
        expect(page.get_by_test_id("topic-row")).to_have_count(1)  # not "hidden"
        page.screenshot(path=str(shots / "topics-as-alice.png"), full_page=True)
        session = page.evaluate("fetch('/api/session').then(r => r.text())")
        assert "alice-secret" not in session
        cookie = next(c for c in context.cookies() if c["name"] == "kraftlog_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    finally:
        context.close()
    context, page = sign_in(chromium, console, "bob", "bob-secret")
    try:
        expect(page.get_by_test_id("principal")).to_have_text("User:bob")
        page.goto(f"{console}#/topics")
        expect(page.locator("main")).not_to_contain_text("loading…")
        expect(page.get_by_test_id("topic-row")).to_have_count(0)
        page.goto(f"{console}#/topics/hidden")
        expect(page.locator("main .error")).to_contain_text("may not describe")
        page.goto(f"{console}#/topics")  # a change is made as bob too, and bob may not create topics
        page.get_by_test_id("new-topic-name").fill("bobs-topic")
        page.get_by_test_id("new-topic-rf").fill("1")
        page.get_by_test_id("create-topic").click()
        page.get_by_test_id("confirm-yes").click()
        expect(page.get_by_test_id("action-error")).to_contain_text("AUTHORIZATION")
    finally:
        context.close()


def test_a_wrong_password_is_refused(chromium, console: str) -> None:
    context, page = sign_in(chromium, console, "alice", "not-her-password")
    try:
        expect(page.locator(".login .error")).to_contain_text("sign-in refused")
        answer = page.evaluate("fetch('/api/view/topics').then(r => r.status)")
        assert answer == 401
    finally:
        context.close()
