"""The ``kraftlog.v1.Broker`` gRPC service: translates protobuf messages to ReplicaManager calls.

Validation of the request's shape happens here (malformed → INVALID_ARGUMENT with a message);
everything about partitions is answered per partition with an ErrorCode and a hint.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterator, Sequence

import grpc

from data_plane import record_batch
from data_plane.broker.consume_stream import ConsumeStreams
from data_plane.broker.isolation import aborted_to_wire, read_committed
from data_plane.control_batch import ControlType, encode_marker
from data_plane.partition_errors import MalformedRequest, PartitionError, negative_partition, to_wire
from server_common.errors import ErrorCode
from data_plane.replication.transaction_index import AbortedTxn, in_aborted
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.broker import fetch_session
from data_plane.broker.produce_stream import ProduceObserver, serve_produce_stream
from data_plane.broker.record_deletion import delete_records
from data_plane.broker.authorization import describable, readable_stream, serve_authorized, transactional_refusal
from data_plane.requests import DeleteRecordsItem, DeleteRecordsResult, EpochEndResult, FetchItem, FetchResult, OffsetResult, PartitionAnswer, ProduceItem, ProduceResult, ReplicaFetchItem
from data_plane.storage import DamagedRangeError
from kraftlog_proto import broker_pb2, broker_pb2_grpc, common_pb2
from server_common.authorization import AccessControl
from server_common.limits import FETCH_BYTES_MAX_DEFAULT

VALID_ACKS = (-1, 0, 1)
NO_PRODUCER_ID = -1
PRODUCER_EPOCH_MAX = 2**15 - 1  # the batch header's int16
SEQUENCE_MAX = 2**31 - 1
# How long WriteTxnMarkers waits for the HW to cover a marker (below the coordinator's call deadline,
# data_plane/transactions/markers.py): past it the marker is answered REQUEST_TIMED_OUT and written again.
MARKER_REPLICATION_TIMEOUT_MS = 3_000
RECORD_FIELD_OVERHEAD_BYTES = 6  # a Record's tag and length prefix inside its partition answer, at most


def _error_fields(answer: PartitionAnswer, with_hint: bool = True) -> dict:
    """A partition answer's error (and, for clients, the leader hint) as response fields."""
    fields = to_wire(answer.error)
    if with_hint:
        fields["current_leader"] = common_pb2.LeaderHint(leader_id=answer.leader.leader_id, leader_epoch=answer.leader.leader_epoch)
    return fields


def records_to_batch(records, compression: str, now_ms: int, **producer: int) -> bytes:
    """Encode simple-path records into one batch (the only place the broker encodes records);
    ``producer`` is the idempotent producer's id, epoch and base sequence (see ``producer_fields``)."""
    if not records:
        raise MalformedRequest("a partition in the request carries neither batches nor records: send at least one record")
    try:
        return record_batch.encode_batch(
            [r.value if r.HasField("value") else None for r in records],
            keys=[r.key if r.HasField("key") else None for r in records],
            headers=[[(h.key, h.value if h.HasField("value") else None) for h in r.headers] for r in records],
            timestamps_ms=[r.timestamp_ms or now_ms for r in records],
            compression=compression,
            **producer,
        )
    except ValueError as exc:  # records the batch format cannot hold (timestamps too far apart)
        raise MalformedRequest(f"these records cannot form one batch: {exc}") from None


def producer_fields(topic: str, part: broker_pb2.PartitionProduceData) -> dict[str, int]:
    """The idempotence fields of a records-path partition, checked, as ``encode_batch``
    keywords (empty when the producer is not idempotent), with ``transactional`` when set."""
    name = f"{topic}-{part.partition}"
    given = [f for f in ("producer_id", "producer_epoch", "base_sequence") if part.HasField(f)]
    if not given or (given == ["producer_id"] and part.producer_id == NO_PRODUCER_ID):
        if part.transactional:
            raise MalformedRequest(f"{name}: a transactional produce sets producer_id, producer_epoch and base_sequence "
                                   "(from the transaction coordinator's InitProducerId)")
        return {}
    if part.batches:
        raise MalformedRequest(f"{name}: {', '.join(given)} belong to the records path; a batch carries its producer "
                               "id, epoch and sequence in its own header")
    if len(given) != 3 or part.producer_id < 0:
        raise MalformedRequest(f"{name}: an idempotent produce sets producer_id (>= 0, from InitProducerId), "
                               f"producer_epoch and base_sequence together; got {', '.join(given)}")
    if not 0 <= part.producer_epoch <= PRODUCER_EPOCH_MAX or not 0 <= part.base_sequence <= SEQUENCE_MAX:
        raise MalformedRequest(f"{name}: producer_epoch must be in [0, {PRODUCER_EPOCH_MAX}] and base_sequence in "
                               f"[0, {SEQUENCE_MAX}], got {part.producer_epoch} and {part.base_sequence}")
    fields = {"producer_id": part.producer_id, "producer_epoch": part.producer_epoch, "base_sequence": part.base_sequence}
    return fields | {"transactional": True} if part.transactional else fields


@dataclass
class DecodedBytes:
    """What a records-path answer holds so far, against its ``max_bytes``: decoded records
    are counted by their serialized size, since an lz4 batch decodes to many times its stored
    size and the stored bytes would say nothing about the answer's."""

    max_bytes: int
    used_bytes: int = 0


def batches_to_records(
    data: bytes, from_offset: int, budget: DecodedBytes | None = None, partition_max_bytes: int = 0,
    aborted: Sequence[AbortedTxn] = (),
) -> list[common_pb2.Record]:
    """Decode whole batches for the simple path, skipping records before the requested offset.
    With a ``budget``, stop before the answer passes its ``max_bytes`` or this partition passes
    ``partition_max_bytes`` (0: no own limit), and count what is taken; the answer's first
    record comes even when it alone is larger, so a consumer is never stuck behind it.
    Control batches (transaction markers) never become records; transactional batches of the
    ``aborted`` transactions (read_committed) are left out."""
    out: list[common_pb2.Record] = []
    taken_bytes = 0
    for batch in record_batch.decode_batches(data):
        header = batch.header
        if header.is_control or (header.is_transactional and in_aborted(aborted, header.producer_id, header.base_offset)):
            continue
        ts_type, epoch = header.timestamp_type, header.leader_epoch
        for rec in batch.records():
            if rec.offset < from_offset:
                continue
            msg = common_pb2.Record(offset=rec.offset, timestamp_ms=rec.timestamp_ms, timestamp_type=ts_type, leader_epoch=epoch)
            if rec.key is not None:
                msg.key = rec.key
            if rec.value is not None:
                msg.value = rec.value
            for hk, hv in rec.headers:
                header = msg.headers.add(key=hk)
                if hv is not None:
                    header.value = hv
            if budget is not None:
                size = msg.ByteSize() + RECORD_FIELD_OVERHEAD_BYTES
                over = budget.used_bytes + size > budget.max_bytes or 0 < partition_max_bytes < taken_bytes + size
                if over and budget.used_bytes > 0:
                    return out
                budget.used_bytes += size
                taken_bytes += size
            out.append(msg)
    return out


def _requested_epoch(topic: str, partition_request) -> int:
    """The leader epoch a request names; unset (or -1) means the client does not check."""
    if not partition_request.HasField("current_leader_epoch"):
        return -1
    epoch = partition_request.current_leader_epoch
    if epoch < -1:
        raise MalformedRequest(f"{topic}-{partition_request.partition}: current_leader_epoch must be -1 (not checked) "
                               f"or a leader epoch >= 0, got {epoch}")
    return epoch


def _first_mention(seen: set[tuple[str, int]], topic: str, partition: int, what: str) -> None:
    """Refuse a partition named twice in one request (which answer would be the real one?),
    or one that no partition can have (negative)."""
    if (problem := negative_partition(topic, partition)) is not None:
        raise MalformedRequest(problem)
    if (topic, partition) in seen:
        raise MalformedRequest(f"{topic}-{partition} appears twice in one request: {what}")
    seen.add((topic, partition))


def _partitions_once(topics, what: str) -> Iterator[tuple[str, object]]:
    """(topic name, partition entry) of a Fetch, ListOffsets or DeleteRecords request, each
    partition at most once (``what`` says what the client should do instead)."""
    seen: set[tuple[str, int]] = set()
    for t in topics:
        for p in t.partitions:
            _first_mention(seen, t.topic, p.partition, what)
            yield t.topic, p


def _refused(answer_type: type) -> Callable[[str, int, PartitionError], PartitionAnswer]:
    """Builds the answer of a partition the call may not touch."""
    return lambda topic, partition, error: answer_type(topic, partition, error)


def _topic_entry(response, by_topic: dict, name: str):
    """The response's entry for topic ``name``, added on first use (answers group partitions by topic)."""
    entry = by_topic.get(name)
    if entry is None:
        entry = by_topic[name] = response.topics.add(topic=name)
    return entry


class BrokerService(broker_pb2_grpc.BrokerServicer):
    """gRPC front of one broker."""

    def __init__(
        self,
        replicas: ReplicaManager,
        metadata_response: Callable[[list[str] | None], broker_pb2.MetadataResponse],
        init_producer_id: Callable[[], "object"],
        access: AccessControl | None = None,
    ) -> None:
        self.replicas = replicas
        self.access = access or AccessControl(dict, (), enabled=False)
        self._metadata_response = metadata_response
        self._init_producer_id = init_producer_id
        self.consume_streams = ConsumeStreams(replicas, batches_to_records, self._add_endpoints)
        # Told of every request answered on a ProduceStream (request, answer, seconds), so
        # that metrics count it as the unary Produce it stands for; set by the server.
        self.produce_observer: ProduceObserver | None = None
        # Waits (partition -> leader epoch, timeout s) until this broker's metadata shows a newer
        # leader for one of them: the Metadata long poll of a client in a failover; set by the server.
        self.newer_leader: Callable[[dict[tuple[str, int], int], float], Awaitable[bool]] | None = None

    async def Consume(self, request_iterator, context):
        """Streaming consume (data_plane/broker/consume_stream.py)."""
        async for response in self.consume_streams.serve(readable_stream(self.access, request_iterator, context), context):
            yield response

    async def Produce(self, request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext) -> broker_pb2.ProduceResponse:
        try:
            return await self._produce(request)
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    async def ProduceStream(self, request_iterator, context: grpc.aio.ServicerContext):
        """Produce requests on one open stream, each answered as it completes
        (data_plane/broker/produce_stream.py)."""
        try:
            async for response in serve_produce_stream(request_iterator, self._produce, self.produce_observer):
                yield response
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    async def _produce(self, request: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        """One Produce request's answer; raises MalformedRequest for a request of the wrong shape."""
        started_ns = time.perf_counter_ns()
        items = self._produce_items(request)
        refusal = transactional_refusal(self.access, request.transactional_id, items)
        if refusal is not None:
            results = [ProduceResult(i.topic, i.partition, refusal) for i in items]
        else:
            results = await serve_authorized(self.access, "write", items, lambda i: (i.topic, i.partition),
                                             lambda allowed: self.replicas.produce(
                                                 request.acks, request.timeout_ms, allowed, request.transactional_id, request.add_to_transaction),
                                             _refused(ProduceResult))
        response = broker_pb2.ProduceResponse()
        by_topic: dict[str, broker_pb2.TopicProduceResponse] = {}
        for r in results:
            _topic_entry(response, by_topic, r.topic).partitions.add(
                partition=r.partition,
                base_offset=r.base_offset,
                log_append_time_ms=r.log_append_time_ms,
                log_start_offset=r.log_start_offset,
                **_error_fields(r),
            )
        self._add_endpoints(response, [r.leader.leader_id for r in results if r.failed])
        response.broker_time_us = (time.perf_counter_ns() - started_ns) // 1000
        return response

    def _produce_items(self, request: broker_pb2.ProduceRequest) -> list[ProduceItem]:
        if request.acks not in VALID_ACKS:
            raise MalformedRequest(f"acks must be -1 (all), 0 or 1, got {request.acks}")
        if request.timeout_ms < 0:
            raise MalformedRequest(f"timeout_ms must be >= 0, got {request.timeout_ms}")
        items: list[ProduceItem] = []
        seen: set[tuple[str, int]] = set()
        now = self.replicas.clock_ms()
        for topic in request.topics:
            if not topic.topic:
                raise MalformedRequest("a topic entry has an empty name")
            for part in topic.partitions:
                _first_mention(seen, topic.topic, part.partition, "merge its batches")
                if part.batches and len(part.records):
                    raise MalformedRequest(f"{topic.topic}-{part.partition} carries both batches and records: use one path")
                data = part.batches or records_to_batch(part.records, self._compression(topic.topic), now,
                                                        **producer_fields(topic.topic, part))
                items.append(ProduceItem(topic.topic, part.partition, data, _requested_epoch(topic.topic, part)))
        return items

    def _compression(self, topic: str) -> str:
        image = self.replicas.image
        configured = image.configs.get(topic, {}).get("compression.type", "producer") if image else "producer"
        return configured if configured in ("lz4", "zstd") else "none"

    async def Fetch(self, request: broker_pb2.FetchRequest, context: grpc.aio.ServicerContext) -> broker_pb2.FetchResponse:
        if request.max_bytes < 0 or request.min_bytes < 0 or request.max_wait_ms < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_bytes, min_bytes and max_wait_ms must be >= 0")
        max_bytes = request.max_bytes or FETCH_BYTES_MAX_DEFAULT
        try:
            items = self._fetch_items(request)
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if request.repair_read:
            await self.access.abort_if_refused(context, "cluster_action", "cluster")
            results = self.replicas.reads.repair_read(items)
        else:
            committed = read_committed(request.isolation_level)
            results = await serve_authorized(self.access, "read", items, lambda i: (i.topic, i.partition),
                                             lambda allowed: self.replicas.reads.fetch(request.max_wait_ms, request.min_bytes, max_bytes, allowed, committed),
                                             _refused(FetchResult))
        response = broker_pb2.FetchResponse()
        by_topic: dict[str, broker_pb2.FetchTopicResponse] = {}
        budget = DecodedBytes(max_bytes)  # the records path's answer, bounded as the stored batches are
        for item, r in zip(items, results):
            out = _topic_entry(response, by_topic, r.topic).partitions.add(
                partition=r.partition,
                high_watermark=r.high_watermark,
                log_start_offset=r.log_start_offset,
                last_stable_offset=r.last_stable_offset,
                **_error_fields(r),
            )
            out.next_offset = r.next_offset if r.next_offset >= 0 else item.offset
            out.last_leader_epoch = r.last_leader_epoch
            if request.format == broker_pb2.RECORDS and not request.repair_read:
                try:
                    out.records.extend(batches_to_records(r.data, item.offset, budget, item.max_bytes, r.aborted))
                    if out.records and out.records[-1].offset + 1 < out.next_offset:  # cut by max_bytes: the rest next time
                        out.next_offset, out.last_leader_epoch = out.records[-1].offset + 1, out.records[-1].leader_epoch
                except record_batch.CorruptBatchError as exc:  # stored before bodies were checked on append
                    undecodable = PartitionError(ErrorCode.CORRUPT_MESSAGE, f"{r.topic}-{r.partition}: a stored batch does not "
                                                 f"decode ({exc}): fetch from a later offset")
                    out.MergeFrom(broker_pb2.FetchPartitionResponse(**to_wire(undecodable)))
            else:
                out.batches = r.data
                out.aborted_transactions.extend(aborted_to_wire(r.aborted))
        self._add_endpoints(response, [r.leader.leader_id for r in results if r.failed])
        return response

    @staticmethod
    def _fetch_items(request: broker_pb2.FetchRequest) -> list[FetchItem]:
        items: list[FetchItem] = []
        read_committed(request.isolation_level)
        for topic, p in _partitions_once(request.topics, "ask for it once"):
            if p.partition_max_bytes < 0:
                raise MalformedRequest(f"{topic}-{p.partition}: partition_max_bytes must be >= 0 (0: the request's "
                                       f"max_bytes), got {p.partition_max_bytes}")
            items.append(FetchItem(topic, p.partition, p.fetch_offset, p.partition_max_bytes, _requested_epoch(topic, p)))
        return items

    @staticmethod
    def _list_offsets_items(request: broker_pb2.ListOffsetsRequest) -> list[tuple[str, int, int, int]]:
        items: list[tuple[str, int, int, int]] = []
        read_committed(request.isolation_level)
        for topic, p in _partitions_once(request.topics, "ask for it once"):
            if p.timestamp < -2:
                raise MalformedRequest(f"{topic}-{p.partition}: timestamp must be -2 (earliest), -1 (latest) or a "
                                       f"time in ms >= 0, got {p.timestamp}")
            items.append((topic, p.partition, p.timestamp, _requested_epoch(topic, p)))
        return items

    async def WriteTxnMarkers(self, request, context):
        """Internal (docs/transactions.md): one marker per partition named, each answered alone,
        once committed (acks=all: the HW covers it at the leader epoch it was written under), so
        the coordinator counts a marker only when a leader change can no longer lose it. Only
        brokers (CLUSTER_ACTION) may write markers."""
        await self.access.abort_if_refused(context, "cluster_action", "cluster")
        try:
            return await self.write_markers(request)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{exc}; nothing was written")

    async def write_markers(self, request: broker_pb2.WriteTxnMarkersRequest) -> broker_pb2.WriteTxnMarkersResponse:
        """WriteTxnMarkers without the caller's authorization: the RPC's, and this broker's own
        transaction coordinator's for the partitions it leads (in process, `MarkerWriter`).
        Raises ValueError, with nothing written, if a marker cannot be encoded."""
        response = broker_pb2.WriteTxnMarkersResponse()
        now = self.replicas.clock_ms()
        # every marker encoded before any is written: a bad one refuses the call, nothing written
        encoded = [(m, encode_marker(ControlType.COMMIT if m.commit else ControlType.ABORT, m.producer_id,
                                     m.producer_epoch, m.coordinator_epoch, now)) for m in request.markers]
        waits: list[tuple[broker_pb2.TxnMarkerResult, Awaitable[None]]] = []
        for m, marker in encoded:
            for index in m.partitions:
                out = response.results.add(topic=m.topic, partition=index, producer_id=m.producer_id)
                try:  # appended and parked with no await between: the wait is at the append's leader epoch
                    out.offset = self.replicas.write_marker(m.topic, index, marker)
                    waits.append((out, self.replicas.wait_replicated(m.topic, index, out.offset + 1, MARKER_REPLICATION_TIMEOUT_MS)))
                except PartitionError as exc:
                    self._fail_marker(out, exc)
        outcomes = await asyncio.gather(*(wait for _, wait in waits), return_exceptions=True)
        for (out, _), outcome in zip(waits, outcomes):
            if isinstance(outcome, PartitionError):
                self._fail_marker(out, outcome)
            elif outcome is not None:
                raise outcome
        return response

    def _fail_marker(self, out: broker_pb2.TxnMarkerResult, exc: PartitionError) -> None:
        result = PartitionAnswer(out.topic, out.partition)
        self.replicas.fail(result, exc)
        out.MergeFrom(broker_pb2.TxnMarkerResult(**_error_fields(result)))

    async def ListOffsets(self, request, context):
        try:
            items = self._list_offsets_items(request)
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        response = broker_pb2.ListOffsetsResponse()
        by_topic: dict[str, broker_pb2.ListOffsetsTopicResponse] = {}
        committed = read_committed(request.isolation_level)
        for r in await serve_authorized(self.access, "describe", items, lambda i: (i[0], i[1]),
                                        lambda allowed: self.replicas.reads.list_offsets(allowed, committed), _refused(OffsetResult)):
            _topic_entry(response, by_topic, r.topic).partitions.add(
                partition=r.partition,
                offset=r.offset,
                timestamp=r.timestamp,
                leader_epoch=r.leader_epoch,
                **_error_fields(r),
            )
        return response

    async def OffsetForLeaderEpoch(self, request, context):
        """KIP-320: where each named epoch ends in this leader's log (DESCRIBE on the topic)."""
        try:
            items = []
            for topic, p in _partitions_once(request.topics, "ask for it once"):
                if p.leader_epoch < 0:
                    raise MalformedRequest(f"{topic}-{p.partition}: leader_epoch must be the epoch of the last record "
                                           f"consumed (>= 0), got {p.leader_epoch}")
                items.append((topic, p.partition, p.leader_epoch, _requested_epoch(topic, p)))
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        results = await serve_authorized(self.access, "describe", items, lambda i: (i[0], i[1]),
                                         lambda allowed: self.replicas.reads.epoch_end_offsets(allowed), _refused(EpochEndResult))
        response = broker_pb2.OffsetForLeaderEpochResponse()
        by_topic: dict[str, broker_pb2.OffsetForLeaderEpochTopicResponse] = {}
        for r in results:
            _topic_entry(response, by_topic, r.topic).partitions.add(
                partition=r.partition, leader_epoch=r.leader_epoch, end_offset=r.end_offset, **_error_fields(r))
        self._add_endpoints(response, [r.leader.leader_id for r in results if r.failed])
        return response

    @staticmethod
    def _delete_records_items(request: broker_pb2.DeleteRecordsRequest) -> list[DeleteRecordsItem]:
        items: list[DeleteRecordsItem] = []
        for topic, p in _partitions_once(request.topics, "name it once"):
            if p.offset < -1:
                raise MalformedRequest(f"{topic}-{p.partition}: offset must be -1 (the high watermark) or an "
                                       f"offset >= 0, got {p.offset}")
            items.append(DeleteRecordsItem(topic, p.partition, p.offset, _requested_epoch(topic, p)))
        return items

    async def DeleteRecords(self, request: broker_pb2.DeleteRecordsRequest, context: grpc.aio.ServicerContext) -> broker_pb2.DeleteRecordsResponse:
        try:
            items = self._delete_records_items(request)
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        results = await serve_authorized(self.access, "delete", items, lambda i: (i.topic, i.partition),
                                         lambda allowed: delete_records(self.replicas, allowed), _refused(DeleteRecordsResult))
        response = broker_pb2.DeleteRecordsResponse()
        by_topic: dict[str, broker_pb2.DeleteRecordsTopicResponse] = {}
        for r in results:
            _topic_entry(response, by_topic, r.topic).partitions.add(partition=r.partition, low_watermark=r.low_watermark, **_error_fields(r))
        self._add_endpoints(response, [r.leader.leader_id for r in results if r.failed])
        return response

    async def Metadata(self, request, context):
        if request.newer_leader_than and request.max_wait_ms > 0 and self.newer_leader is not None:
            awaited = {(p.topic, p.partition): p.leader_epoch for p in request.newer_leader_than}
            await self.newer_leader(awaited, min(request.max_wait_ms, self.replicas.config.fetch_max_wait_ms_cap) / 1000)
        topics = [] if request.brokers_only else list(request.topics) or None
        response = describable(self.access, self._metadata_response(topics), named=bool(topics))
        if not response.brokers:  # no cluster metadata yet: an empty answer would read as "no brokers exist"
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker {response.answering_broker_id} has no cluster metadata "
                                "yet (starting or cut off from the controllers): ask another broker, or retry shortly")
        return response

    async def InitProducerId(self, request, context):
        """An idempotent producer's id: IDEMPOTENT_WRITE on the cluster, or (KIP-679, as Kafka 3.0
        on) WRITE on any topic, since such a producer may write those topics anyway."""
        if not self.access.allows_any("write", "topic"):
            if (refused := self.access.refused_response(broker_pb2.InitProducerIdResponse, "idempotent_write", "cluster")) is not None:
                refused.error_message += " (or WRITE on any topic)"
                return refused
        return await self._init_producer_id()

    async def ReplicaFetch(self, request_iterator, context):
        """One follower broker's stream: a fetch session (`fetch_session.py`). A request no
        correct follower sends ends the stream with INVALID_ARGUMENT (the follower reopens it)."""
        await self.access.abort_if_refused(context, "cluster_action", "cluster")
        try:
            async for response in fetch_session.serve_stream(self.replicas, request_iterator, self._replica_fetch_items):
                yield response
        except MalformedRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    @staticmethod
    def _replica_fetch_items(request: broker_pb2.ReplicaFetchRequest) -> list[ReplicaFetchItem]:
        """A follower's request, refused when no correct follower sends it (the stream ends
        with INVALID_ARGUMENT; the follower reopens it)."""
        if request.max_bytes < 0 or request.min_bytes < 0 or request.max_wait_ms < 0:
            raise MalformedRequest(f"replica fetch: max_bytes, min_bytes and max_wait_ms must be >= 0, got {request.max_bytes}, "
                                   f"{request.min_bytes}, {request.max_wait_ms}")
        seen: set[tuple[str, int]] = set()
        for p in request.partitions:
            _first_mention(seen, p.topic, p.partition, "ask for it once")
        return [ReplicaFetchItem(p.topic, p.partition, p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch,
                                 p.durable_offset if p.HasField("durable_offset") else -1) for p in request.partitions]

    async def DescribeLogs(self, request, context):
        await self.access.abort_if_refused(context, "describe", "cluster")
        wanted = set(request.topics)
        response = broker_pb2.DescribeLogsResponse(broker_id=self.replicas.config.broker_id)
        for (topic, index), p in sorted(self.replicas.partitions.items()):
            if wanted and topic not in wanted:
                continue
            state = response.partitions.add(
                topic=topic,
                partition=index,
                is_leader=p.is_leader,
                leader_epoch=p.state.leader_epoch,
                log_start_offset=p.log_start_offset,
                log_end_offset=p.log_end_offset,
                high_watermark=p.high_watermark,
                last_stable_offset=p.last_stable_offset if p.is_leader else p.high_watermark,
                size_bytes=p.size_bytes,
                latest_epoch=p.latest_epoch,
                error_code=ErrorCode.STORAGE_ERROR if p.offline_reason else ErrorCode.NONE,
                damaged_ranges=[damage.describe() for damage in p.damaged_ranges()],
            )
            if request.include_checksums and p.offline_reason is None:
                upto = request.checksum_upto_offset if request.HasField("checksum_upto_offset") else p.high_watermark
                try:
                    state.checksum_below_hw = p.checksum(upto)
                except DamagedRangeError:
                    state.damaged_ranges[:] = [damage.describe() for damage in p.damaged_ranges()]  # found by this read
            if p.is_leader:
                leos = p.replica_log_end_offsets()
                in_sync = p.in_sync()
                for replica in p.state.replicas:
                    state.replicas.add(broker_id=replica, log_end_offset=leos.get(replica, -1), in_sync=replica in in_sync)
        for topic, index in sorted(self.replicas.logs.offline_partitions()):  # logs that could not be loaded or created
            if (topic, index) not in self.replicas.partitions and (not wanted or topic in wanted):
                response.partitions.add(topic=topic, partition=index, error_code=ErrorCode.STORAGE_ERROR)
        return response

    def _add_endpoints(self, response, leader_ids: list[int]) -> None:
        image = self.replicas.image
        if image is None:
            return
        for broker_id in sorted(set(leader_ids)):
            broker = image.brokers.get(broker_id)
            if broker is not None:
                response.node_endpoints.add(broker_id=broker_id, host=broker.host, port=broker.port, rack=broker.rack, fenced=broker.fenced)
