"""The leader's side of a fetch session, over a real replica manager and real logs: a round
serves what the request names and what changed here since, never the partitions it merely
holds; a partition a full list drops is no longer watched."""

from __future__ import annotations

import asyncio
from pathlib import Path

from data_plane.broker.fetch_session import FetchSession
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.requests import ProduceItem, ReplicaFetchItem
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


def test_a_new_leadership_answers_the_held_poll_of_its_followers_at_once(tmp_path: Path) -> None:
    """A follower inside a long poll cannot name a partition whose leader this broker just
    became; the leader answers the poll and keeps polls short until the follower names it.
    Without that, the new leader's first acks=all writes wait out the follower's poll."""
    replicas, led, broker_epoch = leader_with_partitions(tmp_path)
    session = FetchSession(replicas)
    replicas.fetch_sessions.add(FOLLOWER, session)
    long_ms, bound_s = 30_000, 10.0  # a poll nobody cuts short outlasts the bound

    async def scenario() -> None:
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, led[0], 0)])
        held = asyncio.ensure_future(session.round(FOLLOWER, broker_epoch, long_ms, MIB, False, []))
        replicas.fetch_sessions.leading(led[1], [FOLLOWER])
        await asyncio.wait_for(held, bound_s)
        # the follower has not learned of it yet: its next poll is short, not the long wait
        await asyncio.wait_for(session.round(FOLLOWER, broker_epoch, long_ms, MIB, False, []), bound_s)
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [at(replicas, led[1], 0)])
        started = asyncio.get_running_loop().time()
        await session.round(FOLLOWER, broker_epoch, 300, MIB, False, [])  # named: polls are long again
        assert asyncio.get_running_loop().time() - started >= 0.25

    asyncio.run(scenario())
    replicas.fetch_sessions.remove(FOLLOWER, session)


def test_an_append_pushes_into_a_caught_up_followers_held_round(tmp_path: Path) -> None:
    """A held round whose follower asks at the log end gets an append's records from the
    append itself (no serve, no read through the fetch path); appends before the round runs
    join the same answer; the follower's next request is the acknowledgement that moves the
    HW. A follower not at the log end is served by fetching."""
    replicas, led, broker_epoch = leader_with_partitions(tmp_path)
    session = FetchSession(replicas)
    tp = led[0]

    async def scenario() -> None:
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, p, 0) for p in led])
        served = recording(replicas)
        held = asyncio.ensure_future(session.round(FOLLOWER, broker_epoch, 10_000, MIB, False, []))
        await wait_holding(session)
        for _ in range(2):
            [produced] = await replicas.produce(1, 1000, [ProduceItem(*tp, batch(3))])
            assert not produced.failed, produced.error
        [answer] = await held
        assert (answer.topic, answer.partition) == tp and answer.log_end_offset == 6
        assert replicas.partitions[tp].read(0, MIB, 6) == answer.data  # both batches, in one answer
        assert served == []  # pushed: the fetch path served nothing
        answers = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [at(replicas, tp, 6)])
        assert [(a.topic, a.partition, a.high_watermark) for a in answers] == [(*tp, 6)]

        # behind: asks at 3 of 6 (it dropped part of what it got); an append is fetched, from 3
        served.clear()
        first = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [at(replicas, tp, 3)])
        assert [a.data for a in first] == [replicas.partitions[tp].read(3, MIB, 6)]
        held = asyncio.ensure_future(session.round(FOLLOWER, broker_epoch, 10_000, MIB, False, []))
        await wait_holding(session)
        served.clear()
        await replicas.produce(1, 1000, [ProduceItem(*tp, batch(3))])
        [answer] = await held
        assert served == [tp] and answer.data == replicas.partitions[tp].read(3, MIB, 9)

    asyncio.run(scenario())


async def wait_holding(session: FetchSession) -> None:
    """Until the session's round waits (an event, not a time: the round sets it before its wait)."""
    while not session._holding:
        await asyncio.sleep(0)


def test_a_high_watermark_move_alone_is_not_served_again(tmp_path: Path) -> None:
    """The acknowledgement that moves the HW is served once: the HW move it causes changes
    nothing a follower with every record needs served (no second pass through the leader
    core, no wake-up of the held round); the round answering next carries the new HW."""
    replicas, led, broker_epoch = leader_with_partitions(tmp_path)
    session = FetchSession(replicas)
    tp = led[0]

    async def scenario() -> None:
        await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, True, [at(replicas, p, 0) for p in led])
        held = asyncio.ensure_future(session.round(FOLLOWER, broker_epoch, 10_000, MIB, False, []))
        await wait_holding(session)
        [produced] = await replicas.produce(1, 1000, [ProduceItem(*tp, batch(3))])
        assert not produced.failed, produced.error
        await held  # the push of offsets 0-2
        served = recording(replicas)
        answers = await session.round(FOLLOWER, broker_epoch, WAIT_MS, MIB, False, [at(replicas, tp, 3)])
        assert served == [tp]  # the acknowledgement, once
        assert [(a.topic, a.partition, a.high_watermark) for a in answers] == [(*tp, 3)]

    asyncio.run(scenario())


def test_the_high_watermark_reaches_a_held_follower_with_its_next_answer_without_waking_it(tmp_path: Path) -> None:
    """RF 3: an acks=all write is pushed to both followers; the first acknowledges and its
    round holds; the second's acknowledgement moves the HW and completes the write. The
    first follower's held round is not woken to serve the partition again for the HW: it
    answers when its wait ends (or with the next push), carrying the HW of that moment."""
    image = with_topic(cluster((1, 2, 3)), "s", 3, 3)
    replicas = broker(tmp_path)
    apply(replicas, image)
    tp = next(tp for tp, p in sorted(replicas.partitions.items()) if p.is_leader)
    first, second = (FetchSession(replicas), 2), (FetchSession(replicas), 3)
    epochs = {b: image.brokers[b].epoch for b in (2, 3)}

    async def round_of(follower: tuple[FetchSession, int], wait_ms: int, items: list[ReplicaFetchItem], full: bool = False):
        session, broker_id = follower
        return await session.round(broker_id, epochs[broker_id], wait_ms, MIB, full, items)

    async def scenario() -> None:
        for follower in (first, second):
            await round_of(follower, WAIT_MS, [at(replicas, tp, 0)], full=True)
        held = [asyncio.ensure_future(round_of(f, 10_000, [])) for f in (first, second)]
        for session, _ in (first, second):
            await wait_holding(session)
        write = asyncio.ensure_future(replicas.produce(-1, 10_000, [ProduceItem(*tp, batch(3))]))
        for pushed in held:
            [answer] = await pushed
            assert answer.data and answer.log_end_offset == 3 and answer.high_watermark == 0
        served = recording(replicas)
        acknowledged = asyncio.ensure_future(round_of(first, 2_000, [at(replicas, tp, 3)]))
        await wait_holding(first[0])
        assert served == [tp] and replicas.partitions[tp].high_watermark == 0  # one of two: no HW yet
        await round_of(second, WAIT_MS, [at(replicas, tp, 3)])
        [produced] = await write
        assert not produced.failed and replicas.partitions[tp].high_watermark == 3
        assert served == [tp, tp] and not acknowledged.done()  # each acknowledgement once; the held round sleeps on
        [answer] = await acknowledged
        assert (answer.topic, answer.partition, answer.high_watermark) == (*tp, 3)
        assert served == [tp, tp]

    asyncio.run(scenario())
