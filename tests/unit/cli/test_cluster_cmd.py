"""``kraftlog cluster down|start|restart`` on a local cluster whose processes are not all
running, checked on a recorded layout with no process behind it (nothing is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from server_common.local_cluster import LocalCluster


@pytest.fixture
def stopped_cluster(tmp_path: Path) -> Path:
    """A cluster.json of 3 controllers and 1 broker, every process down (pid 0)."""
    LocalCluster.create(tmp_path / "cluster", controllers=3, brokers=1)
    return tmp_path / "cluster"


def test_down_on_a_stopped_cluster_says_there_is_nothing_to_stop(capsys, stopped_cluster: Path) -> None:
    assert main(["cluster", "down", "--data-dir", str(stopped_cluster)]) == 0
    out = capsys.readouterr().out
    assert out == f"the cluster in {stopped_cluster} is not running; nothing to stop\n"


@pytest.mark.parametrize("action", ["start", "restart"])
def test_a_broker_is_not_started_without_a_controller_majority(capsys, stopped_cluster: Path, action: str) -> None:
    assert main(["cluster", action, "broker-1", "--data-dir", str(stopped_cluster)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing started, nothing stopped
    assert captured.err == (
        "kraftlog cluster: broker-1 needs a majority of the controllers to register, and controller-1, controller-2, controller-3 "
        f"are down: start them first ('kraftlog cluster up --data-dir {stopped_cluster}' starts every node that is down)\n"
    )
    assert LocalCluster.load(stopped_cluster).node_named("broker-1").pid == 0


def test_a_client_command_against_a_stopped_local_cluster_says_how_to_start_it(capsys, monkeypatch, stopped_cluster: Path) -> None:
    monkeypatch.delenv("KRAFTLOG_BOOTSTRAP", raising=False)
    assert main(["topics", "list", "--data-dir", str(stopped_cluster)]) == 1
    bootstrap = LocalCluster.load(stopped_cluster).bootstrap
    assert capsys.readouterr().err == (
        f"kraftlog topics: the local cluster in {stopped_cluster} is stopped (no broker answers at {bootstrap}): "
        f"start it with 'kraftlog cluster up --data-dir {stopped_cluster}' (it keeps its data)\n"
    )
    assert main(["topics", "list", "--bootstrap", bootstrap]) == 1  # addresses given: the connection errors themselves
    assert "NO_BROKER_REACHABLE: no broker answered at" in capsys.readouterr().err


@pytest.mark.parametrize("under", ["", "sub"])
def test_up_with_a_file_for_its_data_dir_says_so_in_one_line(capsys, tmp_path: Path, under: str) -> None:
    """It printed a NotADirectoryError (afile/sub) or FileExistsError (afile) traceback."""
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    assert main(["cluster", "up", "--detach", "--data-dir", str(afile / under)]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"kraftlog cluster: --data-dir {afile / under}") and "is a file, not a directory: give a directory" in line
    assert afile.read_text() == "not a directory"  # nothing created, nothing lost


def test_status_into_a_pipe_whose_reader_is_gone_exits_quietly(stopped_cluster: Path) -> None:
    """``kraftlog cluster status --json | head``: the reader is gone before everything is written."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "cli", "cluster", "status", "--json", "--data-dir", str(stopped_cluster)],
                              stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr.decode()) == (0, "")
