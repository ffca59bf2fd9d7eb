"""Writing a transaction's markers to every partition's leader, through the internal
`WriteTxnMarkers` RPC, until each partition has one below its high watermark.

`marker_requests` (pure) groups the partitions still missing a marker by their leader in the
broker's metadata image; `MarkerWriter.write_round` sends one request per leader (the local
broker is called through gRPC too: one path, authorized like any other broker's call) and
returns where each marker landed (offset, and the leader epoch it was written under). A
partition whose leader is unknown, moved (NOT_LEADER_OR_FOLLOWER), unreachable or failing is
left for the next round: the caller retries with backoff, reading leaders afresh each time.

The leader appends a marker with its own acks only, so a marker is *confirmed* only once
the leader, still at the epoch it was written under, reports a high watermark past it
(`confirm_round`, ListOffsets latest with that epoch): then every in-sync replica has it and a
leader change cannot lose it. A marker whose leader moved first may have been truncated: it is
written again (a second marker for the same transaction closes an empty one, harmlessly).
A partition whose topic no longer exists needs no marker (Kafka drops it too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

import grpc
import structlog

from data_plane.transactions.state_machine import MarkerPlan, TopicPartition
from data_plane.replication.errors import ErrorCode
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.channel_pool import AioChannelPool

log = structlog.get_logger("transactions")

MARKER_CALL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Written:
    """A marker the leader appended: its offset, and the leader epoch it was written under."""

    leader_epoch: int
    offset: int


class Confirmation(Enum):
    CONFIRMED = "confirmed"  # below the HW at the epoch it was written under: it stays
    LOST = "lost"            # the leader moved first: it may have been truncated, write it again
    WAITING = "waiting"      # not yet below the HW (or the answer says nothing): ask again


def confirmation(answer: broker_pb2.ListOffsetsPartitionResponse, written: Written) -> Confirmation:
    """What a ListOffsets (latest, READ_UNCOMMITTED, ``current_leader_epoch`` = the marker's
    epoch) answer says about the marker."""
    if answer.error_code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return Confirmation.LOST
    if answer.error_code == ErrorCode.NONE and answer.offset > written.offset:
        return Confirmation.CONFIRMED
    return Confirmation.WAITING


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


def written(response: broker_pb2.WriteTxnMarkersResponse) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """Where a WriteTxnMarkers answer says each marker landed, and why the others were refused."""
    done: dict[TopicPartition, int] = {}
    failed: dict[TopicPartition, str] = {}
    for result in response.results:
        tp = TopicPartition(result.topic, result.partition)
        if result.error_code == ErrorCode.NONE:
            done[tp] = result.offset
        else:
            failed[tp] = f"{ErrorCode(result.error_code).name}: {result.error_message}"
    return done, failed


class MarkerWriter:
    """Sends marker requests to partition leaders (one channel per broker)."""

    def __init__(self, broker_id: int, replicas, broker_address: Callable[[int], str | None],
                 credentials: grpc.ChannelCredentials | None) -> None:
        self.broker_id = broker_id
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
                          transactional_id: str) -> dict[TopicPartition, Written | None]:
        """One attempt at every ``missing`` partition: where each marker written now landed
        (None: the partition no longer exists and needs none)."""
        fields = {"transactional_id": transactional_id, "producer_id": plan.producer_id,
                  "producer_epoch": plan.producer_epoch, "commit": plan.commit}
        gone = {tp for tp in missing if self._gone(tp)}
        if gone:
            self._log.warning("no marker needed: the partitions no longer exist", **fields, partitions=_names(gone))
        epochs = {tp: self.replicas.leader_hint(tp.topic, tp.partition).leader_epoch for tp in missing - gone}
        requests, leaderless = marker_requests(plan, epochs, coordinator_epoch, self._leader_of)
        done: dict[TopicPartition, Written | None] = dict.fromkeys(gone)
        for leader, request in requests.items():
            stub = self._stub(leader)
            if stub is None:
                continue
            try:
                response = await stub.WriteTxnMarkers(request, timeout=MARKER_CALL_TIMEOUT_S)
            except grpc.RpcError as err:
                self._log.info("marker write failed; will retry", **fields, leader=leader, error=f"{err.code().name}: {err.details()}")
                continue
            ok, failed = written(response)
            done.update({tp: Written(epochs[tp], offset) for tp, offset in ok.items() if tp in epochs})
            if ok:
                self._log.info("markers written", **fields, leader=leader, partitions=_names(ok))
            if failed:
                self._log.info("marker write refused; will retry", **fields, leader=leader,
                               errors={f"{tp.topic}-{tp.partition}": why for tp, why in sorted(failed.items())})
        if leaderless:
            self._log.info("partitions without a leader; markers wait", **fields, partitions=_names(leaderless))
        return done

    async def confirm_round(self, unconfirmed: dict[TopicPartition, Written],
                            transactional_id: str) -> dict[TopicPartition, Confirmation]:
        """Ask each partition's leader whether its marker is below the HW (see `confirmation`)."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(unconfirmed):
            by_leader.setdefault(self._leader_of(tp), []).append(tp)
        answers: dict[TopicPartition, Confirmation] = {}
        for leader, tps in by_leader.items():
            stub = self._stub(leader) if leader >= 0 else None
            if stub is None:
                continue
            topics: dict[str, list[broker_pb2.ListOffsetsPartition]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(broker_pb2.ListOffsetsPartition(
                    partition=tp.partition, timestamp=-1, current_leader_epoch=unconfirmed[tp].leader_epoch))
            request = broker_pb2.ListOffsetsRequest(topics=[broker_pb2.ListOffsetsTopic(topic=t, partitions=ps) for t, ps in topics.items()])
            try:
                response = await stub.ListOffsets(request, timeout=MARKER_CALL_TIMEOUT_S)
            except grpc.RpcError:
                continue
            for topic in response.topics:
                for answer in topic.partitions:
                    tp = TopicPartition(topic.topic, answer.partition)
                    if tp in unconfirmed:
                        answers[tp] = confirmation(answer, unconfirmed[tp])
        lost = sorted(tp for tp, c in answers.items() if c is Confirmation.LOST)
        if lost:
            self._log.info("markers whose leader moved before its HW passed them; writing them again",
                           transactional_id=transactional_id, partitions=_names(lost))
        return answers

    async def close(self) -> None:
        await self._channels.close()


def _names(partitions: Iterable[TopicPartition]) -> list[str]:
    return [f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)]
