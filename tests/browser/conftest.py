"""What the browser tests share: Debian's chromium driven by Playwright (never a browser
Playwright downloads), the console as a process of its own, and where screenshots go.

Without chromium every browser test is skipped with the command that installs it. The
screenshots land in ``$KRAFTLOG_ARTIFACTS/console`` when that is set, else in pytest's tmp.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

from server_common.waiting import wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL = "apt-get install -y chromium (Debian's package; tests/browser never downloads a browser)"
URL = re.compile(r"console at (http\S+)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            if CHROMIUM is None and "chromium" in item.fixturenames:
                item.add_marker(pytest.mark.skip(reason=f"chromium is not installed: {INSTALL}"))


@pytest.fixture(scope="package")
def chromium():
    """One browser for the browser tests, closed after the last of them: Playwright's sync API
    marks an event loop as running in the main thread for as long as it is open, and every
    later test that calls ``asyncio.run`` would fail with "cannot be called from a running
    event loop"."""
    playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install 'playwright>=1.40' (the test extra)")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Keep each phase's report on the test item, so a page fixture can tell a failed test."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "report_call", None)
    return report is not None and report.failed


def page_evidence(page, shots: Path, name: str) -> str:
    """What the page showed when a test failed: its address, heading and text, with a
    screenshot saved beside the others, so a failure in CI explains itself."""
    try:
        path = shots / f"failed-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        text = page.locator("body").inner_text(timeout=2_000)
        return f"page {page.url} showed (screenshot {path}):\n{text[:2_000]}"
    except Exception as exc:  # the evidence must not hide the failure itself
        return f"page evidence unavailable: {exc}"


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    root = os.environ.get("KRAFTLOG_ARTIFACTS")
    directory = Path(root) / "console" if root else tmp_path_factory.mktemp("console-screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class Console(NamedTuple):
    url: str
    pid: int


@contextlib.contextmanager
def console_process(data_dir: Path, *args: str) -> Iterator[Console]:
    """``kraftlog console`` for the local cluster in ``data_dir`` on a free port."""
    log = data_dir / "console-test.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "cli", "console", "--data-dir", str(data_dir), "--port", "0", *args],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def url() -> str | None:
        assert process.poll() is None, f"the console exited: {log.read_text()}"
        found = URL.search(log.read_text())
        return found.group(1) if found else None

    try:
        yield Console(str(wait_for(url, 30, "the console to listen")), process.pid)
    finally:
        process.terminate()
        process.wait(10)
