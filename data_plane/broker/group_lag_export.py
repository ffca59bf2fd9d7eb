"""The consumer-group lag metric on a broker (metrics on only): ``export_group_lag`` hooks
the pure core (``data_plane/groups/group_lag.py``) to the group coordinator and to
``EndOffsets``, the end offsets (high watermarks) of the groups' partitions.

The group coordinator knows its groups' committed offsets, but a partition's end is known
only to its leader. ``EndOffsets.refresh`` asks each leader once for all of its partitions
(one ListOffsets "latest" per leader, all at once, each bounded by ``CALL_TIMEOUT_S``), every
``REFRESH_S``; a partition led here is read directly at the scrape. A scrape only reads what
the last refresh found: it never waits on another broker. A partition whose leader did not
answer keeps its last known end (dropped once no group has an offset on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import grpc
import structlog

from data_plane.groups.group_lag import committed_partitions, group_lag
from data_plane.groups.state import TopicPartition
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.channel_pool import AioChannelPool
from server_common.metrics import read_on_loop

log = structlog.get_logger("metrics")

CALL_TIMEOUT_S = 3.0
REFRESH_S = 5.0  # how old the end of a partition led elsewhere may be in a scrape
LATEST = -1


class EndOffsets:
    def __init__(self, replicas, broker_address: Callable[[int], str | None], credentials: grpc.ChannelCredentials | None) -> None:
        self._replicas = replicas  # partitions led here, and the metadata image's leaders
        self._broker_address = broker_address
        self._channels = AioChannelPool(broker_pb2_grpc.BrokerStub, [], credentials)
        self.known: dict[TopicPartition, int] = {}

    def read(self, wanted: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offset of each of ``wanted`` known now: led here, as of now; elsewhere, as of the last refresh."""
        ends = {}
        for tp in wanted:
            partition = self._replicas.partitions.get(tp)
            if partition is not None and partition.is_leader:
                ends[tp] = partition.high_watermark
            elif tp in self.known:
                ends[tp] = self.known[tp]
        return ends

    async def refresh(self, wanted: Iterable[TopicPartition]) -> None:
        """Ask each leader (not this broker) for its partitions among ``wanted``."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, index in sorted(set(wanted)):
            leader = self._replicas.leader_hint(topic, index).leader_id
            if leader >= 0 and leader != self._replicas.config.broker_id:
                by_leader.setdefault(leader, []).append((topic, index))
        answers = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in by_leader.items()))
        self.known = {tp: end for answer in answers for tp, end in answer.items()}

    async def _ask(self, leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        address = self._broker_address(leader)
        kept = {tp: self.known[tp] for tp in tps if tp in self.known}
        if address is None:
            return kept
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        request = broker_pb2.ListOffsetsRequest(isolation_level=broker_pb2.READ_UNCOMMITTED, topics=[
            broker_pb2.ListOffsetsTopic(topic=topic, partitions=[broker_pb2.ListOffsetsPartition(partition=i, timestamp=LATEST) for i in indexes])
            for topic, indexes in topics.items()])
        try:
            response = await self._channels.stub(address).ListOffsets(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as err:
            log.info("end offsets for the group lag metric unanswered", leader=leader, partitions=len(tps), error=err.code().name)
            return kept
        for topic in response.topics:
            for answer in topic.partitions:
                if answer.error_code == 0:
                    kept[(topic.topic, answer.partition)] = answer.offset
        return kept

    async def close(self) -> None:
        await self._channels.close()


async def export_group_lag(metrics, coordinator, ends: EndOffsets, max_series: int) -> None:
    """Export the lag of the groups ``coordinator`` holds (metrics on only), refreshing the
    end offsets of their partitions led elsewhere every ``REFRESH_S``, until cancelled."""
    loop = asyncio.get_running_loop()

    def bounded():
        groups = coordinator.loaded_groups()
        return group_lag(groups, ends.read(committed_partitions(groups)), max_series)
    metrics.watch_group_lag(lambda: read_on_loop(loop, bounded))
    try:
        while True:
            try:
                await ends.refresh(committed_partitions(coordinator.loaded_groups()))
            except Exception:  # a timer must never die silently: log and keep going
                log.exception("group lag end offsets refresh failed")
            await asyncio.sleep(REFRESH_S)
    finally:
        await ends.close()
