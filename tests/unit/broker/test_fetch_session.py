"""The leader's side of a fetch session, over a real replica manager and real logs: a round
serves what the request names and what changed here since, never the partitions it merely
holds; a partition a full list drops is no longer watched."""

from __future__ import annotations

import asyncio
from pathlib import Path

from data_plane.broker.fetch_session import FetchSession
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.broker.requests import ProduceItem, ReplicaFetchItem
from data_plane.broker.config import MIB
from tests.unit.broker.test_stale_metadata import apply, broker
from tests.unit.metadata.helpers import cluster, with_topic
from tests.unit.storage.conftest import batch

FOLLOWER = 2
WAIT_MS = 50  # the leader's long-poll wait in each round (a round with nothing new lasts this long)


def leader_with_partitions(tmp_path: Path) -> tuple[ReplicaManager, list[tuple[str, int]], int]:
    """Broker 1 leading some of 6 partitions (RF 2, broker 2 follows), the partitions it
    leads and broker 2's broker epoch."""
    image = with_topic(cluster((1, 2)), "s", 6, 2)
    replicas = broker(tmp_path)
    apply(replicas, image)
    led = sorted(tp for tp, p in replicas.partitions.items() if p.is_leader)
    assert len(led) >= 2, led
    return replicas, led, image.brokers[FOLLOWER].epoch


def at(replicas: ReplicaManager, tp: tuple[str, int], offset: int) -> ReplicaFetchItem:
    partition = replicas.partitions[tp]
    return ReplicaFetchItem(tp[0], tp[1], offset, partition.latest_epoch if offset else -1, partition.state.leader_epoch)


def recording(replicas: ReplicaManager) -> list[tuple[str, int]]:
    """Every partition the leader serves from now on, in order."""
    served: list[tuple[str, int]] = []
    serve = replicas.reads.serve_follower

    def spy(topic, index, *args):
        served.append((topic, index))
        return serve(topic, index, *args)

    replicas.reads.serve_follower = spy  # type: ignore[method-assign]
    return served


def test_an_idle_round_serves_nothing_and_an_append_is_served_alone(tmp_path: Path) -> None:
    replicas, led, broker_epoch = leader_with_partitions(tmp_path)
    session = FetchSession(replicas)

    async def scenario() -> None:
        first = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, tp, 0) for tp in led])
        assert sorted((r.topic, r.partition) for r in first) == led  # every named partition is answered
        served = recording(replicas)
        assert await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, []) == []
        assert served == []  # held, not served: an idle round costs nothing per partition

        [produced] = await replicas.produce(1, 1000, [ProduceItem(*led[0], batch(3))])
        assert not produced.failed, produced.error
        [answer] = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [])
        assert (answer.topic, answer.partition) == led[0] and answer.data and answer.high_watermark == 0
        assert served == [led[0]]

        served.clear()  # the follower appended and names its new position: the HW moves to it
        answers = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [at(replicas, led[0], 3)])
        assert [(a.topic, a.partition, a.high_watermark) for a in answers] == [(*led[0], 3)]
        assert set(served) == {led[0]}

    asyncio.run(scenario())


def test_a_partition_dropped_by_a_full_list_is_no_longer_served(tmp_path: Path) -> None:
    replicas, led, broker_epoch = leader_with_partitions(tmp_path)
    session = FetchSession(replicas)

    async def scenario() -> None:
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, tp, 0) for tp in led])
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, tp, 0) for tp in led[1:]])
        assert sorted(session.held) == led[1:]
        served = recording(replicas)
        await replicas.produce(1, 1000, [ProduceItem(*led[0], batch(3))])
        assert await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, []) == []
        assert served == []

    asyncio.run(scenario())
