"""``kraftlog cluster up --console``: the console starts beside a local cluster, its URL is
printed and answers, and ``cluster down`` stops it with the nodes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request

import pytest

from server_common.local_cluster import LocalCluster
from server_common.waiting import wait_for

pytestmark = pytest.mark.integration


def kraftlog(*args: str, timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "KRAFTLOG_PORT_BASE": "0"})
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_cluster_up_with_console_prints_its_url_and_down_stops_it(tmp_path) -> None:
    directory = str(tmp_path / "cluster")
    out = kraftlog("cluster", "up", "--data-dir", directory, "--detach", "--controllers", "1", "--brokers", "1", "--console", "0")
    url = re.search(r"console: (http://127\.0\.0\.1:\d+/)", out).group(1)
    pid = int((tmp_path / "cluster" / "console.pid").read_text())
    try:
        with urllib.request.urlopen(url, timeout=5) as page:
            assert b'<div id="app">' in page.read()
        out = kraftlog("cluster", "down", "--data-dir", directory)
        assert "stopped the console" in out
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2], 10, "the console to exit")
    finally:  # whatever failed, nothing of this test keeps running
        LocalCluster.load(tmp_path / "cluster").kill_all()
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, 9)
