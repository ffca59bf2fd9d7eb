"""The follower fetcher's round planning and wake-up rules, deterministically.

The failure these guard against: a replica whose fetcher has partitions but sends nothing
and then waits until its partition set changes (an hour, before), so an RF=3 topic runs as
RF=2 with nothing in any log.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from data_plane.broker.fetch_round import IDLE_RECHECK_S, RoundPlan, plan_round, skip_changes
from data_plane.broker.replica_fetcher import ReplicaFetcherManager

A, B, C = ("t", 0), ("t", 1), ("t", 2)


def test_fetchable_partitions_are_sent_in_order_and_backoffs_wait() -> None:
    plan = plan_round({C: None, A: None, B: None}, {B: 10.5}, now=10.0)
    assert plan.send == (A, C) and plan.skipped == {}


def test_a_round_with_nothing_to_send_waits_a_bounded_time() -> None:
    plan = plan_round({A: "its leader is now broker 2", B: "no local replica"}, {}, now=10.0)
    assert plan.send == () and plan.idle_s == IDLE_RECHECK_S
    assert plan.skipped == {A: "its leader is now broker 2", B: "no local replica"}


def test_the_earliest_backoff_ends_the_wait_and_expired_or_foreign_backoffs_are_ignored() -> None:
    plan = plan_round({A: None, B: None}, {A: 10.3, B: 10.2, C: 10.01}, now=10.0)
    assert plan.send == () and abs(plan.idle_s - 0.2) < 1e-9
    plan = plan_round({A: None, B: None}, {A: 9.0, B: 10.0 + 2 * IDLE_RECHECK_S}, now=10.0)
    assert plan.send == (A,)
    assert plan_round({B: None}, {B: 10.0 + 2 * IDLE_RECHECK_S}, now=10.0).idle_s == IDLE_RECHECK_S


def test_skips_are_reported_once_per_reason_and_resumption_once() -> None:
    first = RoundPlan((B,), {A: "local log offline: disk"}, IDLE_RECHECK_S)
    assert skip_changes({}, first) == ({A: "local log offline: disk"}, ())
    assert skip_changes(first.skipped, first) == ({}, ())
    moved = RoundPlan((B,), {A: "its leader is now broker 3"}, IDLE_RECHECK_S)
    assert skip_changes(first.skipped, moved) == ({A: "its leader is now broker 3"}, ())
    back = RoundPlan((A, B), {}, IDLE_RECHECK_S)
    assert skip_changes(moved.skipped, back) == ({}, (A,))


def _replica(leader: int, leader_epoch: int, log_epoch: int = 0) -> SimpleNamespace:
    state = SimpleNamespace(leader=leader, leader_epoch=leader_epoch)
    return SimpleNamespace(state=state, offline_reason=None, is_leader=False, latest_epoch=log_epoch)


def test_every_metadata_change_wakes_the_fetcher_even_when_its_partitions_stay_the_same() -> None:
    """A new leader epoch for a partition the fetcher already has changes what its next round
    sends; the fetcher must look again at once, not when its partition set next changes."""

    async def scenario() -> None:
        config = SimpleNamespace(broker_id=1, peer_addresses={2: ("127.0.0.1", 1)}, unsafe=None)
        replicas = SimpleNamespace(partitions={A: _replica(2, 5)}, image=None)
        manager = ReplicaFetcherManager(config, replicas, lambda: 7)  # type: ignore[arg-type]
        manager._running = True
        manager.sync()
        fetcher = manager.fetchers[2]
        fetcher.task.cancel()
        assert fetcher.partitions == {A} and fetcher.wake.is_set()
        assert manager.follower_or_reason(A, 2) is replicas.partitions[A]
        fetcher.wake.clear()
        replicas.partitions[A] = _replica(2, 6)
        manager.sync()
        assert fetcher.partitions == {A} and fetcher.wake.is_set()
        replicas.partitions[A] = _replica(2, 6, log_epoch=7)
        assert "metadata older than the log" in manager.follower_or_reason(A, 2)
        replicas.partitions[A].offline_reason = "disk gone"
        assert manager.follower_or_reason(A, 2) == "local log offline: disk gone"
        await manager.stop()

    asyncio.run(scenario())
