"""The waiting room of acks=all produces is bounded: at the limit, a new acks=all produce is
refused before anything is appended, with a retriable REQUEST_TIMED_OUT that says so; once
the waiting produce is answered (here: it times out, its follower never fetched) the room
takes produces again. acks=1 never waits, so the limit does not apply to it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from data_plane.broker.config import BrokerConfig
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.requests import ProduceItem
from server_common.errors import ErrorCode
from data_plane.storage import LogManager
from tests.unit.broker.test_stale_metadata import apply, at_epoch
from tests.unit.storage.conftest import batch

TP = ("t", 0)


def test_acks_all_beyond_the_waiting_limit_is_refused_with_nothing_written(tmp_path: Path) -> None:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=tmp_path, controllers=[])
    clock = [1_000]
    replicas = ReplicaManager(config, LogManager(tmp_path, now_ms=0), clock_ms=lambda: clock[0], max_delayed_produces=1)

    apply(replicas, at_epoch(1, 1))  # broker 1 leads, broker 2 in the ISR never fetches

    async def scenario() -> None:
        waiting = asyncio.ensure_future(replicas.produce(-1, 300, [ProduceItem(*TP, batch(2))]))
        await asyncio.sleep(0)  # the first produce appends and parks (a yield, not a wait for time)
        end = replicas.partitions[TP].log_end_offset
        [refused] = await replicas.produce(-1, 300, [ProduceItem(*TP, batch(3))])
        assert refused.error.code == ErrorCode.REQUEST_TIMED_OUT
        assert "1 acks=all produces already wait" in refused.error.message and "nothing was written" in refused.error.message
        assert replicas.partitions[TP].log_end_offset == end == 2
        [leader_only] = await replicas.produce(1, 300, [ProduceItem(*TP, batch(1))])
        assert not leader_only.failed
        [timed_out] = await waiting
        assert timed_out.error.code == ErrorCode.REQUEST_TIMED_OUT and "did not reach the batch" in timed_out.error.message
        clock[0] += 300
        replicas.tick()  # the core expires the waiting produce at its deadline: the room is free again
        again = asyncio.ensure_future(replicas.produce(-1, 100, [ProduceItem(*TP, batch(1))]))
        [answer] = await again
        assert "did not reach the batch" in answer.error.message  # it was appended and waited, not refused

    asyncio.run(scenario())
