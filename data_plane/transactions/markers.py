"""Writing a transaction's markers to every partition's leader, through the internal
`WriteTxnMarkers` RPC, until each partition has a committed one.

`marker_requests` (pure) groups the partitions still missing a marker by their leader in the
broker's metadata image; `MarkerWriter.write_round` sends one request per leader, all at once,
and returns the partitions whose marker is committed. The request and its answer are the same
whichever the leader; only the transport differs: gRPC to another broker, an in-process call
(`BrokerService.write_markers`) for the partitions this broker leads. A leader answers a marker only
once its HW covers it at the leader epoch it was written under (acks=all), so an answered
marker survives any leader change; a leader change first answers NOT_LEADER_OR_FOLLOWER and
the marker is written again (a second marker for the same transaction closes an empty one,
harmlessly). A partition whose leader is unknown, moved, unreachable or failing is left for
the next round: the caller retries with backoff, reading leaders afresh each time. A partition
whose topic no longer exists needs no marker (Kafka drops it too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import grpc
import structlog

from data_plane.transactions.state_machine import MarkerPlan, TopicPartition
from server_common.errors import ErrorCode
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.channel_pool import AioChannelPool

log = structlog.get_logger("transactions")

# Above the leader's wait for a marker to be committed (MARKER_REPLICATION_TIMEOUT_MS, data_plane/broker/service.py).
MARKER_CALL_TIMEOUT_S = 5.0
# This broker writing markers to the partitions it leads, answering as the RPC does.
OwnLeader = Callable[[broker_pb2.WriteTxnMarkersRequest], Awaitable[broker_pb2.WriteTxnMarkersResponse]]


def marker_requests(plan: MarkerPlan, missing: Iterable[TopicPartition], coordinator_epoch: int,
                    leader_of: Callable[[TopicPartition], int]) -> tuple[dict[int, broker_pb2.WriteTxnMarkersRequest], set[TopicPartition]]:
    """One WriteTxnMarkers request per leader for the ``missing`` partitions, and the
    partitions with no leader right now (left for the next round)."""
    by_leader: dict[int, dict[str, list[int]]] = {}
    leaderless: set[TopicPartition] = set()
    for tp in sorted(missing):
        leader = leader_of(tp)
        if leader < 0:
            leaderless.add(tp)
        else:
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
    requests = {
        leader: broker_pb2.WriteTxnMarkersRequest(markers=[
            broker_pb2.TxnMarker(producer_id=plan.producer_id, producer_epoch=plan.producer_epoch, commit=plan.commit,
                                 coordinator_epoch=coordinator_epoch, topic=topic, partitions=partitions)
            for topic, partitions in topics.items()])
        for leader, topics in by_leader.items()
    }
    return requests, leaderless


def written(response: broker_pb2.WriteTxnMarkersResponse) -> tuple[set[TopicPartition], dict[TopicPartition, str]]:
    """The partitions a WriteTxnMarkers answer says have a committed marker, and why the others do not."""
    done: set[TopicPartition] = set()
    failed: dict[TopicPartition, str] = {}
    for result in response.results:
        tp = TopicPartition(result.topic, result.partition)
        if result.error_code == ErrorCode.NONE:
            done.add(tp)
        else:
            failed[tp] = f"{ErrorCode(result.error_code).name}: {result.error_message}"
    return done, failed


class MarkerWriter:
    """Sends marker requests to partition leaders (one channel per broker)."""

    def __init__(self, broker_id: int, replicas, broker_address: Callable[[int], str | None],
                 credentials: grpc.ChannelCredentials | None, own_leader: OwnLeader) -> None:
        self.broker_id = broker_id
        self._own_leader = own_leader
        self.replicas = replicas  # the metadata image: topics, leaders
        self._broker_address = broker_address
        self._channels = AioChannelPool(broker_pb2_grpc.BrokerStub, [], credentials)
        self._log = log.bind(broker_id=broker_id)

    def _leader_of(self, tp: TopicPartition) -> int:
        return self.replicas.leader_hint(tp.topic, tp.partition).leader_id

    def _stub(self, leader: int) -> broker_pb2_grpc.BrokerStub | None:
        address = self._broker_address(leader)
        return self._channels.stub(address) if address is not None else None

    def _gone(self, tp: TopicPartition) -> bool:
        image = self.replicas.image
        topic = image.topics.get(tp.topic) if image is not None else None
        return image is not None and (topic is None or tp.partition not in topic.partitions)

    async def write_round(self, plan: MarkerPlan, missing: set[TopicPartition], coordinator_epoch: int,
                          transactional_id: str) -> set[TopicPartition]:
        """One attempt at every ``missing`` partition, every leader at once: the partitions that
        have a committed marker now, or need none (their topic no longer exists)."""
        fields = {"transactional_id": transactional_id, "producer_id": plan.producer_id,
                  "producer_epoch": plan.producer_epoch, "commit": plan.commit}
        gone = {tp for tp in missing if self._gone(tp)}
        if gone:
            self._log.warning("no marker needed: the partitions no longer exist", **fields, partitions=_names(gone))
        requests, leaderless = marker_requests(plan, missing - gone, coordinator_epoch, self._leader_of)
        if leaderless:
            self._log.info("partitions without a leader; markers wait", **fields, partitions=_names(leaderless))
        rounds = await asyncio.gather(*(self._write(leader, request, fields) for leader, request in requests.items()))
        return gone.union(*rounds)

    async def _write(self, leader: int, request: broker_pb2.WriteTxnMarkersRequest, fields: dict[str, object]) -> set[TopicPartition]:
        if leader == self.broker_id:
            response = await self._own_leader(request)
        else:
            stub = self._stub(leader)
            if stub is None:
                return set()
            try:
                response = await stub.WriteTxnMarkers(request, timeout=MARKER_CALL_TIMEOUT_S)
            except grpc.RpcError as err:
                self._log.info("marker write failed; will retry", **fields, leader=leader, error=f"{err.code().name}: {err.details()}")
                return set()
        ok, failed = written(response)
        if ok:
            self._log.info("markers written", **fields, leader=leader, partitions=_names(ok))
        if failed:
            self._log.info("marker write refused; will retry", **fields, leader=leader,
                           errors={f"{tp.topic}-{tp.partition}": why for tp, why in sorted(failed.items())})
        return ok

    async def close(self) -> None:
        await self._channels.close()


def _names(partitions: Iterable[TopicPartition]) -> list[str]:
    return [f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)]
