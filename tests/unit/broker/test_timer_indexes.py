"""The broker's timers visit only the replicas that need work: the ISR sweep only leaders with
an in-sync follower behind their log end (a caught-up follower cannot start lagging without a
new event), the flush check only logs with unflushed data, the damage scan only logs known
damaged unless new damage was found. Each test also shows the work still gets done: a
follower that stops fetching after an append is still removed from the ISR, a log past
flush.ms is still flushed, a batch found damaged is still handed to the repair loop."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from data_plane.broker.config import BrokerConfig
from data_plane.partition_errors import PartitionError
from data_plane.broker.partition import Partition
from data_plane.broker.replica_manager import ISR_SWEEP_INTERVAL_MS, ReplicaManager
from data_plane.broker.server import BrokerServer
from data_plane.requests import ProduceItem
from data_plane.record_batch import HEADER_SIZE
from data_plane.replication.partition_state import FollowerFetch
from data_plane.storage import LogManager
from tests.unit.broker.test_stale_metadata import apply, at_epoch
from tests.unit.metadata.helpers import cluster, with_topic
from tests.unit.storage.conftest import batch

TP = ("t", 0)
LAG_MS = 3_000


def leader(tmp_path: Path, clock: list[int]) -> ReplicaManager:
    """Broker 1 leading t-0 (epoch 1) with broker 2 in the ISR."""
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[], replica_lag_time_max_ms=LAG_MS)
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0), clock_ms=lambda: clock[0])
    apply(replicas, at_epoch(1, 1))
    return replicas


def follower_fetch(replicas: ReplicaManager, offset: int, now_ms: int) -> None:
    """Broker 2 fetches t-0 from ``offset``."""
    fetch = FollowerFetch(2, replicas.broker_status(2).broker_epoch, 1, offset, 1 if offset else -1)
    replicas.reads.serve_follower(*TP, fetch, replicas.broker_status(2), 1 << 20, now_ms)


def counting_ticks(monkeypatch) -> list[tuple[str, int]]:
    """Every partition a timer tick visits, in order."""
    visited: list[tuple[str, int]] = []
    on_tick = Partition.on_tick

    def counted(self, now_ms, lag_ms):
        visited.append((self.topic, self.partition))
        return on_tick(self, now_ms, lag_ms)

    monkeypatch.setattr(Partition, "on_tick", counted)
    return visited


def test_the_isr_sweep_skips_caught_up_leaders_and_still_shrinks_a_lagging_one(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000]
    replicas = leader(tmp_path, clock)
    proposals = []
    replicas.propose_isr = lambda partition, proposal: proposals.append(proposal)
    visited = counting_ticks(monkeypatch)

    follower_fetch(replicas, 0, clock[0])  # the follower has the (empty) log: caught up
    clock[0] += ISR_SWEEP_INTERVAL_MS
    replicas.tick()
    assert visited == []  # an idle leader with a caught-up follower costs the sweep nothing

    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(2))]))  # the follower is now behind
    clock[0] += LAG_MS + ISR_SWEEP_INTERVAL_MS
    replicas.tick()
    assert visited == [TP]
    assert [p.new_isr for p in proposals] == [{1}]  # it never fetched again: out of the ISR


def test_a_follower_catching_up_takes_the_leader_out_of_the_sweep(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000]
    replicas = leader(tmp_path, clock)
    visited = counting_ticks(monkeypatch)
    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(2))]))
    clock[0] += ISR_SWEEP_INTERVAL_MS
    replicas.tick()
    assert visited == [TP]  # the follower has not fetched the new records yet

    follower_fetch(replicas, 2, clock[0])
    clock[0] += ISR_SWEEP_INTERVAL_MS
    replicas.tick()
    assert visited == [TP]  # caught up: not visited again


def test_a_replica_of_a_deleted_and_recreated_partition_keeps_its_place(tmp_path: Path, monkeypatch) -> None:
    """An event of a removed replica object (a late controller answer) must not drop its
    successor of the same partition from the sweep."""
    clock = [1_000]
    replicas = leader(tmp_path, clock)
    old = replicas.partitions[TP]
    del replicas.partitions[TP]
    replicas.carry_out(old, old.resign())
    apply(replicas, at_epoch(1, 2))
    replicas.carry_out(old, old.on_tick(clock[0], LAG_MS))  # the old object's late event: no core, nothing to keep
    visited = counting_ticks(monkeypatch)
    clock[0] += ISR_SWEEP_INTERVAL_MS
    replicas.tick()
    assert visited == [TP] and replicas.partitions[TP] is not old


def test_the_flush_check_visits_only_written_logs_and_still_honours_flush_ms(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000]
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[], topic_defaults={"flush.ms": "500"})
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0), clock_ms=lambda: clock[0])
    apply(replicas, at_epoch(1, 1))
    flushed: list[tuple[str, int]] = []
    maybe_flush = Partition.maybe_flush
    monkeypatch.setattr(Partition, "maybe_flush", lambda self, now_ms: (flushed.append((self.topic, self.partition)), maybe_flush(self, now_ms)))
    log = replicas.partitions[TP].log

    replicas.maintenance.run_flush()  # the new, empty log is looked at once, then left alone
    replicas.maintenance.run_flush()
    assert flushed == [TP]

    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(2))]))
    replicas.maintenance.run_flush()
    assert log.recovery_point == 0  # flush.ms has not run out: visited, not flushed
    clock[0] += 500
    replicas.maintenance.run_flush()
    assert log.recovery_point == log.log_end_offset == 2
    replicas.maintenance.run_flush()
    assert flushed == [TP] * 3  # flushed to its end: out of the flush check until the next write


def test_the_damage_scan_looks_at_every_log_only_after_new_damage(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000]
    replicas = leader(tmp_path, clock)
    partition = replicas.partitions[TP]
    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(3))]))
    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(3))]))
    scanned: list[tuple[str, int]] = []
    damaged_ranges = Partition.damaged_ranges
    monkeypatch.setattr(Partition, "damaged_ranges", lambda self: (scanned.append((self.topic, self.partition)), damaged_ranges(self))[1])

    assert replicas.maintenance.damaged() == []  # the first scan looks at every log
    assert replicas.maintenance.damaged() == [] and scanned == [TP]  # nothing new since: no log looked at

    [segment] = sorted(partition.log.directory.glob("*.log"))
    raw = bytearray(segment.read_bytes())
    raw[HEADER_SIZE + 4] ^= 0xFF  # inside the first batch: its CRC fails on the next read
    segment.write_bytes(raw)
    with pytest.raises(PartitionError):
        partition.read(0, 1 << 20, partition.log_end_offset)
    [(found, damage)] = replicas.maintenance.damaged()
    assert found is partition and (damage.first_offset, damage.next_offset) == (0, 3)
    assert [p for p, _ in replicas.maintenance.damaged()] == [partition]  # still damaged: still looked at
    assert scanned == [TP] * 3


def test_the_hw_checkpoint_is_written_only_when_a_high_watermark_moved(tmp_path: Path, monkeypatch) -> None:
    """The broker's checkpoint (`BrokerServer._write_checkpoints`, the part in its worker thread,
    from the replicas and logs listed on the event loop) writes each file only when its content
    changed: the HWs when one moved, the recovery points when a flush moved one."""
    clock = [1_000]
    replicas = leader(tmp_path, clock)
    written: list[tuple[str, dict]] = []
    monkeypatch.setattr(replicas.logs, "checkpoint_high_watermarks", lambda hws: written.append(("hw", hws)))
    monkeypatch.setattr(replicas.logs, "write_recovery_points", lambda points: written.append(("recovery", points)))
    broker = SimpleNamespace(replicas=replicas, logs=replicas.logs)
    points = None

    def checkpoint() -> None:  # what the broker's timer does
        nonlocal points
        points = BrokerServer._write_checkpoints(broker, replicas.checkpoint_replicas(), replicas.logs.checkpoint_logs(), points)

    checkpoint()
    checkpoint()
    assert written == [("hw", {TP: 0}), ("recovery", {TP: 0})]  # the second would have said the same

    asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, batch(2))]))
    follower_fetch(replicas, 2, clock[0])  # the follower has both records: the HW moves to 2
    checkpoint()
    assert written[2:] == [("hw", {TP: 2})]  # no flush yet: the recovery point did not move
    replicas.partitions[TP].log.flush()
    checkpoint()
    assert written[3:] == [("recovery", {TP: 2})]


def test_the_scrub_goes_round_logs_with_records_and_leaves_empty_ones_alone(tmp_path: Path, monkeypatch) -> None:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[])
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0))
    apply(replicas, with_topic(cluster((1, 2)), "u", 4, 2))  # four empty logs
    [written, *_] = [p for p in replicas.partitions.values() if p.is_leader]
    scrubbed: list[int] = []
    scrub = Partition.scrub
    monkeypatch.setattr(Partition, "scrub", lambda self, budget: (scrubbed.append(verified := scrub(self, budget)), verified)[1])

    replicas.maintenance.run_scrub(1 << 20)
    replicas.maintenance.run_scrub(1 << 20)
    assert scrubbed == [0] * 4  # each empty log was looked at once
    scrubbed.clear()

    asyncio.run(replicas.produce(1, 1000, [ProduceItem(written.topic, written.partition, batch(3))]))
    for _ in range(4):
        replicas.maintenance.run_scrub(1 << 20)
    size = written.log.segments[0].size_bytes
    assert scrubbed == [size] * 4  # verified to its end, then again from its start, lap after lap


def test_the_scrub_says_when_a_lap_over_every_log_is_done_whatever_its_budget(tmp_path: Path) -> None:
    """The broker rests after each lap: a lap ends once every log in the round was verified
    to its end, also when no single call's budget reaches a lap's boundary (two logs of
    different sizes, a budget that divides neither)."""
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[])
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0))
    apply(replicas, with_topic(cluster((1, 2)), "u", 2, 2))
    leaders = [p for p in replicas.partitions.values() if p.is_leader]
    for index, partition in enumerate(leaders):
        for _ in range(20 * (index + 1)):
            asyncio.run(replicas.produce(1, 1000, [ProduceItem(partition.topic, partition.partition, batch(1))]))
    total = sum(p.log.segments[0].size_bytes for p in leaders)
    budget = total // 7 + 13
    laps = [replicas.maintenance.run_scrub(budget) for _ in range(40)]
    assert not laps[0] and laps.count(True) >= 4  # a lap needs at least total/budget calls
    first = laps.index(True)
    assert first + 1 >= total / budget
    assert all(p.log.scrub_laps >= 1 for p in leaders)
