"""Eligible leader replicas (KIP-966), unclean shutdowns and disk faults on real processes.

- With min.insync.replicas=2 and RF 3: a follower killed, the other stopped cleanly (the ISR
  falls below min ISR: it enters the ELR), then the leader killed (ISR empty, ELR both).
  The killed leader restarts first: its registration says the shutdown was unclean, so it
  leaves the ELR for the last-known ELR and is NOT elected although it is the only live
  replica; the partition waits. The cleanly stopped follower comes back, stays eligible and
  is elected from the ELR: no unclean election, no acknowledged write lost.
- A full disk (a size-limited tmpfs as the leader's data directory, filled up: a real
  ENOSPC) takes the leader's replica offline; the broker reports it in its heartbeat, the
  controller moves the leadership to an in-sync replica and produce goes on. After the
  space is freed and the broker restarted, its replica catches up into the ISR again.
- An injected I/O error during a segment roll (``--storage-fault-injection``) does the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from data_plane.storage.fault_injection import TRIGGER_FILE, fill_disk
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_elections_cli import brokers, consume, produce, state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_ARGS = ["--session-timeout-ms", "3000"]
MIN_ISR_2 = {"min.insync.replicas": "2"}


def controller_log_lines(cluster: TestCluster, event: str) -> list[dict]:
    return [json.loads(line) for c in cluster.controllers for line in cluster.log_path(c).read_text().splitlines() if event in line]


def test_the_controller_elects_from_the_elr_and_not_a_replica_that_restarted_uncleanly(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3, controller_args=SESSION_ARGS, broker_args=SESSION_ARGS) as cluster:
        cluster.create_topic("elr", 1, 3, MIN_ISR_2)
        leader = state(cluster, "elr").leader
        killed_follower, stopped_follower = [r for r in state(cluster, "elr").replicas if r != leader]
        acked = produce(cluster, "elr", 100)

        cluster.kill(cluster.broker(killed_follower))
        wait_for(lambda: killed_follower not in state(cluster, "elr").isr, 15, f"broker {killed_follower} out of the ISR")
        acked += produce(cluster, "elr", 100, first=100)  # ISR {leader, stopped_follower}: still min ISR
        cluster.stop_node(cluster.broker(stopped_follower))  # controlled shutdown: clean
        below = wait_for(lambda: (s := state(cluster, "elr")).isr == [leader] and s, 15, "the ISR down to the leader")
        assert list(below.eligible_leader_replicas) == [stopped_follower], "it left below min ISR with everything up to the HW"

        cluster.kill(cluster.broker(leader))
        empty = wait_for(lambda: (s := state(cluster, "elr")).leader == -1 and s, 15, "the partition to go offline")
        assert (list(empty.isr), sorted(empty.eligible_leader_replicas)) == ([], sorted([leader, stopped_follower]))

        cluster.restart(cluster.broker(leader))  # after kill -9: an unclean shutdown
        wait_for(lambda: not brokers(cluster)[leader].endpoint.fenced, 30, f"broker {leader} unfenced")
        waiting = state(cluster, "elr")
        assert (waiting.leader, list(waiting.eligible_leader_replicas), list(waiting.last_known_elr)) == (-1, [stopped_follower], [leader]), (
            "the only live replica restarted uncleanly: out of the ELR, not elected while an eligible replica may come back"
        )
        assert [line["broker_id"] for line in controller_log_lines(cluster, "broker registers after an unclean shutdown")] == [leader]

        cluster.restart(cluster.broker(stopped_follower))  # clean: stays eligible
        elected = wait_for(lambda: (s := state(cluster, "elr")).leader == stopped_follower and s, 30, f"broker {stopped_follower} elected from the ELR")
        assert elected.unclean_leader_elections == 0
        cluster.restart(cluster.broker(killed_follower))
        settled = wait_for(lambda: len((s := state(cluster, "elr")).isr) == 3 and s, 60, "every replica back in the ISR")
        assert (list(settled.eligible_leader_replicas), list(settled.last_known_elr), settled.unclean_leader_elections) == ([], [], 0)
        assert consume(cluster, "elr", len(acked))[: len(acked)] == acked, "no acknowledged write lost"


@contextlib.contextmanager
def tmpfs_data_dirs(size_mb: int) -> Iterator[tuple[list[Path], callable]]:
    """A size-limited tmpfs mounted as each broker's data directory (root only): the
    ``configure`` hook for ``local_cluster`` and, on exit, every mount undone."""
    mounted: list[Path] = []

    def configure(cluster: TestCluster) -> None:
        for node in cluster.brokers:
            path = cluster.data_dir / node.name
            path.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=True)
            mounted.append(path)

    try:
        yield mounted, configure
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def assert_leadership_moves_and_produce_goes_on(cluster: TestCluster, topic: str, broken: int, acked: list[bytes]) -> None:
    """The next appends fail on ``broken`` (STORAGE_ERROR, retried by the producer) until the
    controller has moved the leadership; every send is acknowledged in the end."""
    acked += produce(cluster, topic, 100, first=len(acked))
    moved = state(cluster, topic)
    assert moved.leader not in (-1, broken) and broken not in moved.isr and broken not in moved.eligible_leader_replicas, moved
    assert consume(cluster, topic, len(acked))[: len(acked)] == acked, "no acknowledged write lost"
    offline = controller_log_lines(cluster, "its log for the partition is offline")
    assert offline and offline[0]["previous_leader"] == broken


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_on_the_leader_moves_leadership_and_produce_continues(tmp_path: Path) -> None:
    with tmpfs_data_dirs(64) as (mounted, configure):
        with local_cluster(tmp_path, controllers=1, brokers=3, controller_args=SESSION_ARGS, broker_args=SESSION_ARGS, configure=configure) as cluster:
            cluster.create_topic("full", 1, 3, MIN_ISR_2)
            leader = state(cluster, "full").leader
            acked = produce(cluster, "full", 100)
            filler = fill_disk(cluster.data_dir / cluster.broker(leader).name)
            assert_leadership_moves_and_produce_goes_on(cluster, "full", leader, acked)

            filler.unlink()  # the operator frees space and restarts the broker: its log is recovered and catches up
            cluster.stop_node(cluster.broker(leader))
            cluster.restart(cluster.broker(leader))
            wait_for(lambda: leader in state(cluster, "full").isr, 60, f"broker {leader} back in the ISR")
            unclean = controller_log_lines(cluster, "broker registers after an unclean shutdown")
            assert [line["broker_id"] for line in unclean] == [leader], "a stop with an offline log is not a clean shutdown"


def test_an_io_error_during_a_segment_roll_moves_leadership(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3, controller_args=SESSION_ARGS, broker_args=[*SESSION_ARGS, "--storage-fault-injection"]) as cluster:
        cluster.create_topic("eio", 1, 3, {**MIN_ISR_2, "segment.bytes": "1024"})
        leader = state(cluster, "eio").leader
        acked = produce(cluster, "eio", 20)
        (cluster.data_dir / cluster.broker(leader).name / TRIGGER_FILE).write_text("roll\n")
        assert_leadership_moves_and_produce_goes_on(cluster, "eio", leader, acked)
