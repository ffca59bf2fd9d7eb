"""The fetcher carries out the follower core's decisions, and nothing else decides.

A fake replica manager records the calls the fetcher makes for one leader answer given as
protobuf, the way it arrives on the stream: each decision of `FollowerCore` maps to exactly
one `ReplicaManager` call (or a backoff), and the negative controls are rules chosen at
construction (`fetcher_rules`).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from data_plane.broker.config import UnsafeBehaviour
from data_plane.broker.fetch_round import plan_round
from data_plane.broker.replica_fetcher import LeaderFetcher, fetcher_rules
from data_plane.replication.follower import FetchPosition, apply_stale_answers, drop_stale_answers
from kraftlog_proto import broker_pb2, common_pb2

TP = ("t", 0)
LEADER = 2


class FakeReplicas:
    """Records the follower-side calls; appends and cuts move the fake log's end."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def append_as_follower(self, partition, data: bytes) -> None:
        self.calls.append(("append", data))
        partition.log.log_end_offset += len(data)

    def truncate_follower(self, partition, offset: int, why: str) -> None:
        self.calls.append(("truncate", offset))
        partition.log.log_end_offset = offset

    def restart_follower_at(self, partition, offset: int) -> None:
        self.calls.append(("restart", offset))
        partition.log.log_start_offset = partition.log.log_end_offset = offset

    def follow_log_start(self, partition, leader_log_start: int) -> None:
        if leader_log_start > partition.log.log_start_offset:  # as Partition.follow_log_start: only forward
            self.calls.append(("log start", leader_log_start))
            partition.log.log_start_offset = leader_log_start


class FakePartition(SimpleNamespace):
    """The follower-side reads of a Partition, over a plain log."""

    log_start_offset = property(lambda self: self.log.log_start_offset)
    log_end_offset = property(lambda self: self.log.log_end_offset)
    latest_epoch = property(lambda self: self.epoch_entries[-1][0])


def _fetcher(log_end_offset: int = 10) -> tuple[LeaderFetcher, FakePartition, FakeReplicas]:
    log = SimpleNamespace(log_start_offset=0, log_end_offset=log_end_offset)
    partition = FakePartition(topic=TP[0], partition=TP[1], log=log, high_watermark=3, epoch_entries=((0, 0), (1, 6)),
                              state=SimpleNamespace(leader=LEADER, leader_epoch=1))
    replicas = FakeReplicas()
    noop = lambda *args, **kwargs: None  # noqa: E731 - a log that drops everything
    manager = SimpleNamespace(replicas=replicas, rules=fetcher_rules(None, lambda: ()),
                              follower_or_reason=lambda tp, leader: partition,
                              log=SimpleNamespace(info=noop, warning=noop, error=noop))
    fetcher = LeaderFetcher(LEADER, "127.0.0.1:1", manager)  # type: ignore[arg-type]
    fetcher.session.plan({TP: SENT}, frozenset(), set(), complete=True)  # the session asked from offset 10
    return fetcher, partition, replicas


def _answer(**fields) -> broker_pb2.ReplicaFetchResponse:
    response = broker_pb2.ReplicaFetchResponse()
    response.partitions.add(**{"topic": TP[0], "partition": TP[1], "log_start_offset": 0, "log_end_offset": 12, **fields})
    return response


SENT = FetchPosition(fetch_offset=10, last_fetched_epoch=1, leader_epoch=1)


@pytest.mark.parametrize(
    "fields, calls, high_watermark",
    [
        ({"batches": b"xy", "high_watermark": 11}, [("append", b"xy")], 11),
        ({"high_watermark": 8}, [], 8),
        ({"high_watermark": 8, "log_start_offset": 5}, [("log start", 5)], 8),
        ({"diverging_epoch": broker_pb2.DivergingEpoch(epoch=1, end_offset=7)}, [("truncate", 7)], 3),
        ({"error_code": common_pb2.OFFSET_OUT_OF_RANGE, "log_start_offset": 11, "log_end_offset": 20}, [("restart", 11)], 3),
        ({"error_code": common_pb2.OFFSET_OUT_OF_RANGE, "log_end_offset": 8}, [("truncate", 8)], 3),
    ],
    ids=["records", "hw-only", "log-start-moved", "diverging", "behind-log-start", "ahead-of-leader-end"],
)
def test_each_answer_becomes_one_replica_manager_call(fields, calls, high_watermark) -> None:
    fetcher, partition, replicas = _fetcher()
    fetcher._apply(_answer(**fields))
    assert replicas.calls == calls
    assert partition.high_watermark == high_watermark
    assert fetcher.backoff_until == {}


def test_refusals_and_unusable_answers_back_the_partition_off() -> None:
    fetcher, _, replicas = _fetcher()
    fetcher._apply(_answer(error_code=common_pb2.FENCED_LEADER_EPOCH))
    assert replicas.calls == [] and set(fetcher.backoff_until) == {TP}
    fetcher, _, replicas = _fetcher()
    fetcher._apply(_answer(error_code=common_pb2.OFFSET_OUT_OF_RANGE, log_end_offset=12))
    assert replicas.calls == [] and set(fetcher.backoff_until) == {TP}


def test_a_served_answer_ends_the_backoff_of_an_earlier_refusal() -> None:
    # A new leader whose metadata lags this broker's refuses the first fetch, then (once it
    # has caught up) serves the partition from the session: the next request must name it, or
    # the leader holds that request for replica.fetch.wait.max.ms while the partition waits.
    fetcher, _, replicas = _fetcher()
    fetcher._apply(_answer(error_code=common_pb2.UNKNOWN_LEADER_EPOCH))
    assert set(fetcher.backoff_until) == {TP}
    fetcher._apply(_answer(batches=b"xy", high_watermark=11))
    assert replicas.calls == [("append", b"xy")] and fetcher.backoff_until == {}
    assert plan_round({TP: None}, fetcher.backoff_until, time.monotonic()).send == (TP,)  # named in the next round


def test_a_stale_answer_changes_nothing() -> None:
    fetcher, partition, replicas = _fetcher(log_end_offset=9)  # the log moved since the request
    fetcher._apply(_answer(batches=b"xy", high_watermark=9))
    assert replicas.calls == [] and partition.high_watermark == 3


def test_negative_controls_are_rules_chosen_at_construction() -> None:
    restored = lambda: [TP]  # noqa: E731
    safe = fetcher_rules(None, restored)
    assert safe.core.stale_answer is drop_stale_answers and safe.held_back == {}
    assert fetcher_rules(UnsafeBehaviour.SKIP_EPOCH_FENCING, restored).core.stale_answer is apply_stale_answers
    stall = fetcher_rules(UnsafeBehaviour.STALL_FETCHER, restored)
    assert stall.core.stale_answer is drop_stale_answers and set(stall.held_back) == {TP}
    assert fetcher_rules(UnsafeBehaviour.TRUNCATE_TO_HW, restored) == safe


def test_stop_ends_a_fetcher_whose_stream_swallows_the_cancel() -> None:
    """A fetch loop that swallows a cancel (as ``asyncio.wait_for`` can in Python 3.11 when
    the cancel races the wait's end) still ends: every loop checks the stop flag, and
    ``ReplicaFetcherManager.stop`` returns having waited for it."""
    import asyncio

    from data_plane.broker.replica_fetcher import ReplicaFetcherManager

    async def scenario() -> tuple[int, bool]:
        manager = ReplicaFetcherManager.__new__(ReplicaFetcherManager)
        manager.log = SimpleNamespace(**{say: (lambda *a, **k: None) for say in ("info", "warning", "error", "exception")})
        manager._running = True
        fetcher = LeaderFetcher(LEADER, "localhost:1", manager)
        streams = 0

        async def swallowing_stream() -> None:
            nonlocal streams
            streams += 1
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # swallowed: the stream ends as if the leader had closed it
            raise ConnectionError("stream ended")

        fetcher._stream = swallowing_stream
        fetcher.task = asyncio.get_running_loop().create_task(fetcher.run())
        manager.fetchers = {LEADER: fetcher}
        await asyncio.sleep(0)  # the fetcher is inside its stream
        await asyncio.wait_for(manager.stop(), 10)
        return streams, fetcher.task.done()

    streams, done = asyncio.run(scenario())
    assert done
    assert streams == 1, "a stopped fetcher must not open another stream"


def test_an_isr_change_wakes_only_the_fetcher_holding_the_partition_to_look_at_it() -> None:
    from data_plane.broker.replica_fetcher import ReplicaFetcherManager

    manager = ReplicaFetcherManager.__new__(ReplicaFetcherManager)
    holding, other = LeaderFetcher(LEADER, "localhost:1", manager), LeaderFetcher(3, "localhost:2", manager)
    holding.partitions, other.partitions = {TP, ("t", 1)}, {("u", 0)}
    manager.fetchers = {LEADER: holding, 3: other}
    holding.rescan = other.rescan = False
    manager.recheck({TP})
    assert holding.recheck == {TP} and holding.wake.is_set() and not holding.rescan
    assert not other.recheck and not other.wake.is_set()


def test_an_idle_round_looks_only_at_what_changed_however_long_the_fetcher_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    """No periodic look at every partition (with 50,000 replicas it was most of an idle
    broker's time): an idle round looks at nothing, minutes later too; a replica rechecked
    (its log went offline) is looked at and leaves the session; a metadata change looks at
    every partition."""
    from data_plane.broker import replica_fetcher
    from data_plane.broker.config import Durability

    tps = [("t", i) for i in range(4)]
    parts = {tp: FakePartition(topic=tp[0], partition=tp[1], log=SimpleNamespace(log_start_offset=0, log_end_offset=10),
                               high_watermark=10, epoch_entries=((0, 0), (1, 6)),
                               state=SimpleNamespace(leader=LEADER, leader_epoch=1, isr=(1, LEADER)))
             for tp in tps}
    offline: set = set()
    looked: list = []

    def follower_or_reason(tp, leader_id):
        looked.append(tp)
        return "local log offline: a test" if tp in offline else parts[tp]

    config = SimpleNamespace(broker_id=1, durability=Durability.PAGE_CACHE, replica_fetch_wait_max_ms=500,
                             replica_fetch_max_bytes=1 << 20)
    manager = SimpleNamespace(config=config, broker_epoch=lambda: 7, follower_or_reason=follower_or_reason,
                              rules=fetcher_rules(None, lambda: ()), log=SimpleNamespace(info=lambda *a, **k: None))
    fetcher = LeaderFetcher(LEADER, "127.0.0.1:1", manager)  # type: ignore[arg-type]
    fetcher.partitions = set(tps)
    now = [1000.0]
    monkeypatch.setattr(replica_fetcher.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(replica_fetcher, "Partition", FakePartition)  # what the fetcher tells replicas by

    def round_() -> tuple[broker_pb2.ReplicaFetchRequest, list]:
        looked.clear()
        request, _ = fetcher._request()
        return request, sorted(looked)

    request, seen = round_()
    assert not request.incremental and len(request.partitions) == 4 and seen == tps
    for minutes in (0, 1, 10):
        now[0] += minutes * 60
        request, seen = round_()
        assert request.incremental and not request.partitions and seen == []

    offline.add(tps[0])
    fetcher.recheck = {tps[0]}
    request, seen = round_()
    assert tps[0] in seen and not request.incremental
    assert sorted((p.topic, p.partition) for p in request.partitions) == tps[1:]

    fetcher.rescan = True  # a metadata change
    _, seen = round_()
    assert seen == tps


def _manager_with(partitions: dict, fetchers: dict):
    """A fetcher manager over fake replicas (tp -> leader id), this broker being 1."""
    from data_plane.broker.replica_fetcher import ReplicaFetcherManager

    manager = ReplicaFetcherManager.__new__(ReplicaFetcherManager)
    manager.config = SimpleNamespace(broker_id=1, peer_addresses={})
    manager.replicas = SimpleNamespace(partitions={tp: SimpleNamespace(offline_reason=None, state=SimpleNamespace(leader=leader))
                                                   for tp, leader in partitions.items()}, image=None)
    manager._running = True
    manager.log = SimpleNamespace(info=lambda *a, **k: None)
    manager.fetchers = {}
    for leader_id, tps in fetchers.items():
        fetcher = manager.fetchers[leader_id] = LeaderFetcher(leader_id, f"localhost:{leader_id}", manager)
        fetcher.partitions, fetcher.rescan = set(tps), False
    return manager


def test_a_leader_change_moves_one_partition_and_wakes_only_the_two_fetchers() -> None:
    """A metadata change names the partitions it moved: the fetcher that gains one looks at just
    it, the one that loses one does a complete round (its session must let it go), and a third
    fetcher is left alone; before, every change made every fetcher look at every partition."""
    manager = _manager_with({TP: 3, ("t", 1): 2, ("u", 0): 4}, {2: {TP, ("t", 1)}, 4: {("u", 0)}})
    manager.fetchers[3] = LeaderFetcher(3, "localhost:3", manager)
    manager.fetchers[3].rescan = False
    manager.sync({TP})
    gaining, losing, untouched = manager.fetchers[3], manager.fetchers[2], manager.fetchers[4]
    assert gaining.partitions == {TP} and gaining.recheck == {TP} and not gaining.rescan and gaining.wake.is_set()
    assert losing.partitions == {("t", 1)} and losing.rescan and losing.wake.is_set()
    assert not untouched.rescan and not untouched.recheck and not untouched.wake.is_set()
