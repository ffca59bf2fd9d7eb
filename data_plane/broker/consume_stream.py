"""Streaming consume (``Broker.Consume``): one long-lived stream over many partitions that
pushes committed data as it arrives, instead of the client asking again with every Fetch.

Each round is a consumer read through ``FetchServing.fetch`` (below the HW, with the same
leader, epoch and range checks and the same errors as Fetch), woken by the partitions' HW
wakeups (``data_plane/wakeups.py``) rather than polling. A round runs only while the client holds
credits: the client declares a window of messages when it opens the stream and grants one
credit back per message it has finished with, so however slowly it reads, the broker holds
at most ``window`` messages of at most ``max_bytes_per_message`` each for the stream (gRPC's
own HTTP/2 window would bound the socket, not the messages a server queues ahead of it).

A partition's stream ends with one final entry carrying its error (NOT_LEADER_OR_FOLLOWER
with the leader hint and endpoint after a leader change, OFFSET_OUT_OF_RANGE, ...); the
client reconnects where the hint says from that entry's ``next_offset``. The stream ends
with status OK once no partition is left, once the client half-closed and has no credit
left, or when the broker shuts down (after a final entry for every partition left).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable

import grpc
import structlog

from data_plane import record_batch
from data_plane.partition_errors import MalformedRequest, PartitionError, negative_partition, to_wire
from data_plane.broker.isolation import aborted_to_wire, read_committed
from data_plane.requests import FetchItem, FetchResult
from data_plane.wakeups import Wakeups, wait_until_woken, woken_by
from server_common.errors import ErrorCode
from kraftlog_proto import broker_pb2, common_pb2
from server_common.limits import BATCH_BYTES_PER_MESSAGE_MAX, consume_window

if TYPE_CHECKING:
    from data_plane.broker.replica_manager import ReplicaManager

log = structlog.get_logger("consume_stream")

WINDOW_MESSAGES_DEFAULT = 8
WINDOW_MESSAGES_MAX = 64
"""Messages a stream may have outstanding: what the broker holds per stream, at most."""
MESSAGE_BYTES_DEFAULT = 1 << 20
"""Batch bytes in one message when the client leaves ``max_bytes_per_message`` 0: large
enough that per-message costs vanish, small enough that a window of them is cheap to hold."""
ROUND_WAIT_S = 1.0
"""Longest wait for a wakeup before a stream re-reads anyway (wakeups make this a backstop)."""

TopicPartition = tuple[str, int]


class CreditWindow:
    """The messages a stream may still send before the client grants more.

    ``available`` starts at ``size``; every message with data (an entry with ``batches`` or
    ``records``) takes one and every credit
    from the client gives one back, and a client may never hold more than ``size`` (it
    grants only for messages it received), so outstanding messages never exceed ``size``."""

    def __init__(self, size: int) -> None:
        assert size > 0, size
        self.size = size
        self.available = size

    def take(self) -> None:
        assert self.available > 0, "a message with data was sent without a credit"
        self.available -= 1

    def grant(self, messages: int) -> None:
        """Credits from the client; more than it has received messages for breaks the protocol."""
        if messages <= 0:
            raise MalformedRequest(f"a credit must grant at least 1 message, got {messages}")
        if self.available + messages > self.size:
            raise MalformedRequest(
                f"credit of {messages} would let the broker send {self.available + messages} messages ahead, more than "
                f"the stream's window of {self.size}: grant one credit per received message with data, no more"
            )
        self.available += messages


@dataclass(frozen=True)
class StreamSpec:
    """What a client asked for when it opened the stream, with the broker's limits applied."""

    positions: dict[TopicPartition, int]
    epochs: dict[TopicPartition, int]
    records: bool
    max_bytes_per_message: int
    window_messages: int
    client_id: str
    read_committed: bool = False


def parse_open(request: broker_pb2.ConsumeRequest, request_max_bytes: int) -> StreamSpec:
    """The stream a client's first message opens (MalformedRequest: what to fix)."""
    if request.WhichOneof("kind") != "open":
        raise MalformedRequest("a Consume stream must start with an `open` message naming partitions and offsets")
    opened = request.open
    if opened.max_bytes_per_message < 0 or opened.window_messages < 0:
        raise MalformedRequest("max_bytes_per_message and window_messages must be >= 0 (0: the default)")
    if opened.window_messages > WINDOW_MESSAGES_MAX:
        raise MalformedRequest(f"window_messages must be at most {WINDOW_MESSAGES_MAX}, got {opened.window_messages}")
    if opened.format not in (broker_pb2.BATCHES, broker_pb2.RECORDS):
        raise MalformedRequest(f"format must be BATCHES (0) or RECORDS (1), got {opened.format}")
    committed = read_committed(opened.isolation_level)
    positions: dict[TopicPartition, int] = {}
    epochs: dict[TopicPartition, int] = {}
    for topic in opened.topics:
        for p in topic.partitions:
            tp = (topic.topic, p.partition)
            if (problem := negative_partition(*tp)) is not None:
                raise MalformedRequest(problem)
            if tp in positions:
                raise MalformedRequest(f"{tp[0]}-{tp[1]} appears twice in one open: name it once")
            if p.offset < 0:
                raise MalformedRequest(f"{tp[0]}-{tp[1]}: offset must be >= 0 (resolve earliest/latest with ListOffsets), got {p.offset}")
            epoch = p.current_leader_epoch if p.HasField("current_leader_epoch") else -1
            if epoch < -1:
                raise MalformedRequest(f"{tp[0]}-{tp[1]}: current_leader_epoch must be -1 (not checked) or >= 0, got {epoch}")
            positions[tp] = p.offset
            epochs[tp] = epoch
    if not positions:
        raise MalformedRequest("the open message names no partition: list at least one")
    message_bytes = min(opened.max_bytes_per_message or MESSAGE_BYTES_DEFAULT, BATCH_BYTES_PER_MESSAGE_MAX, request_max_bytes // 2)
    window = consume_window(opened.window_messages or WINDOW_MESSAGES_DEFAULT, message_bytes)
    return StreamSpec(positions, epochs, opened.format == broker_pb2.RECORDS, message_bytes, window, opened.client_id,
                      committed)


class ConsumeStreams:
    """Every Consume stream of one broker: serves them and ends them on shutdown."""

    def __init__(
        self,
        replicas: ReplicaManager,
        to_records: Callable[..., list[common_pb2.Record]],  # service.batches_to_records
        add_endpoints: Callable[[broker_pb2.ConsumeResponse, list[int]], None],
    ) -> None:
        self._replicas = replicas
        self._to_records = to_records
        self._add_endpoints = add_endpoints
        self._nudges: set[Wakeups] = set()
        self._closing = False

    def close(self) -> None:
        """The broker is shutting down: every stream sends its final entries and ends."""
        self._closing = True
        for nudge in list(self._nudges):
            nudge.fire()

    async def serve(self, requests: AsyncIterator[broker_pb2.ConsumeRequest], context: grpc.aio.ServicerContext):
        """One client's stream (an async generator of ConsumeResponse)."""
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            return
        try:
            spec = parse_open(first, self._replicas.config.request_max_bytes)
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        stream = _Stream(spec)
        self._nudges.add(stream.nudge)
        credits = asyncio.create_task(self._read_credits(requests, stream))
        fields = {"broker_id": self._replicas.config.broker_id, "client_id": spec.client_id}
        log.debug("consume stream opened", **fields, partitions=len(spec.positions), window=spec.window_messages)
        try:
            while stream.positions:
                if stream.refused is not None:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, stream.refused)
                if self._closing:
                    yield self._final(stream)
                    break
                if stream.window.available == 0:
                    if stream.client_done:
                        break  # no credit can come any more
                    with woken_by([stream.nudge]) as woken:
                        await wait_until_woken(woken, ROUND_WAIT_S)
                    continue
                response = await self._round(stream)
                if response is not None:
                    yield response
        finally:
            credits.cancel()
            self._nudges.discard(stream.nudge)
            log.debug("consume stream ended", **fields, partitions_left=len(stream.positions))

    async def _read_credits(self, requests: AsyncIterator[broker_pb2.ConsumeRequest], stream: _Stream) -> None:
        """Credits arrive while the stream sends; a half-close means none will come any more."""
        try:
            async for request in requests:
                if request.WhichOneof("kind") != "credit":
                    raise MalformedRequest("after `open`, a Consume stream takes only `credit` messages")
                stream.window.grant(request.credit.messages)
                stream.nudge.fire()
        except MalformedRequest as exc:
            stream.refused = str(exc)
        except grpc.RpcError:  # the client went away: the stream's own await sees the cancellation
            pass
        stream.client_done = True
        stream.nudge.fire()

    async def _round(self, stream: _Stream) -> broker_pb2.ConsumeResponse | None:
        """Read what is committed for the stream's partitions, or wait for a wakeup."""
        partitions = self._replicas.partitions
        sources = [p.waiter() for tp in stream.positions if (p := partitions.get(tp))]
        with woken_by([*sources, stream.nudge]) as woken:  # registered before the read: no change is missed
            items = stream.items()
            results = await self._replicas.reads.fetch(0, 0, stream.spec.max_bytes_per_message, items, stream.spec.read_committed)
            response = self._response(stream, items, results)
            if response is None:
                await wait_until_woken(woken, ROUND_WAIT_S)
        return response

    def _response(self, stream: _Stream, items: list[FetchItem], results: list[FetchResult]) -> broker_pb2.ConsumeResponse | None:
        """The message for one round's results (None when there is nothing to say). It takes
        a credit only when an entry carries ``batches`` or ``records``: one that only moves
        ``next_offset`` (RECORDS past transaction markers or aborted records) costs none, as
        a client that grants per message with data never grants for it (docs/protocol.md)."""
        response = broker_pb2.ConsumeResponse()
        ended: list[int] = []
        with_data = False
        for item, result in zip(items, results):
            tp = (item.topic, item.partition)
            if result.failed:
                self._end(response, stream, tp, result.error, result.leader.leader_id, result.leader.leader_epoch)
                ended.append(result.leader.leader_id)
                continue
            if not result.data:
                continue
            entry = response.partitions.add(
                topic=item.topic, partition=item.partition, high_watermark=result.high_watermark,
                log_start_offset=result.log_start_offset, fetch_offset=item.offset, last_stable_offset=result.last_stable_offset,
            )
            try:
                entry.next_offset, entry.last_leader_epoch = self._fill(entry, result, item.offset, stream.spec)
            except record_batch.CorruptBatchError as exc:  # stored before bodies were checked on append
                response.partitions.remove(entry)
                error = PartitionError(ErrorCode.CORRUPT_MESSAGE, f"{item.topic}-{item.partition}: a stored batch does not "
                                       f"decode ({exc}): consume from a later offset")
                self._end(response, stream, tp, error, -1, -1)
                continue
            stream.positions[tp] = entry.next_offset
            with_data = with_data or bool(entry.records or entry.batches)
        if not response.partitions:
            return None
        if with_data:
            stream.window.take()
        self._add_endpoints(response, ended)
        return response

    def _fill(self, entry: broker_pb2.ConsumePartitionData, result: FetchResult, offset: int, spec: StreamSpec) -> tuple[int, int]:
        """Put the read into the entry in the stream's format (read_committed: with the aborted
        transactions, or without their records); returns where the partition continues and
        the leader epoch of the last batch (or record) before it."""
        data = result.data
        if not spec.records:
            entry.batches = data
            entry.aborted_transactions.extend(aborted_to_wire(result.aborted))
            return result.next_offset, result.last_leader_epoch
        budget = spec.max_bytes_per_message
        for record in self._to_records(data, offset, aborted=result.aborted):
            budget -= record.ByteSize()
            if budget < 0 and entry.records:
                last = entry.records[-1]
                return last.offset + 1, last.leader_epoch  # decoded records outgrow the batches: the rest next round
            entry.records.append(record)
        return result.next_offset, result.last_leader_epoch

    def _end(self, response, stream: _Stream, tp: TopicPartition, error: PartitionError, leader_id: int, leader_epoch: int) -> None:
        """The partition's final entry on this stream: the error, the hint, where to continue."""
        offset = stream.positions.pop(tp)
        response.partitions.add(
            topic=tp[0], partition=tp[1], fetch_offset=offset, next_offset=offset,
            current_leader=common_pb2.LeaderHint(leader_id=leader_id, leader_epoch=leader_epoch), **to_wire(error),
        )
        log.debug("consume stream partition ended", broker_id=self._replicas.config.broker_id, topic=tp[0], partition=tp[1],
                  leader_epoch=leader_epoch, error=error.code.name)

    def _final(self, stream: _Stream) -> broker_pb2.ConsumeResponse:
        """The broker is shutting down: one message ending every partition left on the stream."""
        response = broker_pb2.ConsumeResponse()
        leaders = []
        for tp in list(stream.positions):
            hint = self._replicas.leader_hint(*tp)
            error = PartitionError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {self._replicas.config.broker_id} is shutting "
                                   f"down: refresh metadata and reconnect to {tp[0]}-{tp[1]}'s leader from next_offset")
            self._end(response, stream, tp, error, hint.leader_id, hint.leader_epoch)
            leaders.append(hint.leader_id)
        self._add_endpoints(response, leaders)
        return response


class _Stream:
    """One open stream's state: positions of the partitions it still serves, its credits."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        self.positions = dict(spec.positions)
        self.window = CreditWindow(spec.window_messages)
        self.nudge = Wakeups()  # credits arrived, the client half-closed, or the broker is closing
        self.client_done = False
        self.refused: str | None = None
        self._rotation = 0

    def items(self) -> list[FetchItem]:
        """This round's reads, starting one partition later each round so that a partition
        with a backlog cannot keep the others out of every message."""
        tps = list(self.positions)
        self._rotation = (self._rotation + 1) % len(tps)
        order = tps[self._rotation:] + tps[:self._rotation]
        return [FetchItem(t, p, self.positions[(t, p)], 0, self.spec.epochs[(t, p)]) for t, p in order]
