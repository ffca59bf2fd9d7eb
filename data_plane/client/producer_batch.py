"""One partition's batch of records on its way to the leader, and the per-record futures.

A batch collects records as columns (values, keys, headers, timestamps) because that is
what the columnar codec consumes, is encoded once when first drained (so a retry resends
the very same bytes, sequence numbers included), and completes exactly once. Only an
idempotent partition's reset (idempotence.py) changes a batch's producer id and sequence;
then the stored bytes are decoded and encoded again with the new numbers. Records do
not get a `concurrent.futures.Future` each: creating one costs ~6 µs (a Condition and an
RLock), which alone would cap `send` near 150k records/s. Instead the batch owns one
Future and each record gets a `RecordFuture` view of it (slot object, ~0.2 µs).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import structlog

from data_plane import record_batch
from data_plane.client.errors import KraftlogError
from data_plane.client.metadata_cache import TopicPartition
from data_plane.client.records import RecordMetadata

log = structlog.get_logger(__name__)

DeliveryCallback = Callable[[KraftlogError | None, RecordMetadata | None], Any]

Headers = list[tuple[str, bytes | None]]

# Bytes a record adds to an encoded batch besides key, value and headers: its int32 entries
# in the timestamp, key length, value length and header count columns (record_batch.py).
# A header adds two int32 lengths. Used for batch_size and buffer_memory accounting.
RECORD_OVERHEAD_BYTES = 16
HEADER_OVERHEAD_BYTES = 8


def record_size_bytes(value: bytes | None, key: bytes | None, headers: Headers | None) -> int:
    """The estimated space a record takes in a batch and in buffer memory (a null value, a
    tombstone for compacted topics, takes none)."""
    size = RECORD_OVERHEAD_BYTES + (len(value) if value is not None else 0)
    if key is not None:
        size += len(key)
    if headers:
        size += sum(len(k) + (len(v) if v else 0) + HEADER_OVERHEAD_BYTES for k, v in headers)
    return size


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = (
        "tp",
        "created_ms",
        "values",
        "keys",
        "headers",
        "timestamps",
        "record_count",
        "size_bytes",
        "closed",
        "callbacks",
        "result",
        "attempts",
        "retry_at_ms",
        "encoded",
        "base_sequence",
        "producer_id",
        "producer_epoch",
        "transactional",
        "outcome_unknown",
        "sent_behind_unresolved",
        "last_error",
        "bulk_timestamp_ms",
        "log_append_time_ms",
        "request_sent_ns",
        "request_answered_ns",
        "leader_epoch",
        "broker_time_ns",
    )

    def __init__(self, tp: TopicPartition, created_ms: float) -> None:
        self.tp = tp
        self.created_ms = created_ms
        self.values: list[bytes] = []
        self.keys: list[bytes | None] | None = None  # None until a record has a key
        self.headers: list[Headers | None] | None = None  # None until a record has headers
        self.timestamps: list[int] | None = []  # None: encoder stamps "now" (send_batch)
        self.record_count = 0
        self.size_bytes = 0
        self.closed = False  # no more appends (a bulk batch, or drained)
        self.callbacks: list[tuple[int, DeliveryCallback]] | None = None
        self.result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.encoded: bytes | None = None
        self.base_sequence = -1  # -1: not numbered (yet)
        self.producer_id = -1  # the producer id base_sequence was numbered under
        self.producer_epoch = -1
        self.transactional = False  # part of its producer's open transaction (attribute bit 4)
        self.outcome_unknown = False  # an attempt may have been written; cleared by a definite answer
        self.sent_behind_unresolved = False  # its last attempt left while an earlier batch was unresolved
        self.last_error: KraftlogError | None = None
        self.bulk_timestamp_ms = -1  # the one timestamp of every record in a bulk batch
        self.log_append_time_ms = -1
        self.leader_epoch = -1  # the partition's leader epoch its latest attempt was sent under
        self.broker_time_ns = 0  # what the broker said it spent on the latest request (ProduceResponse.broker_time_us)
        self.request_sent_ns = 0  # CLOCK_MONOTONIC: when its latest request left, and its answer came
        self.request_answered_ns = 0

    @classmethod
    def bulk(
        cls,
        tp: TopicPartition,
        created_ms: float,
        values: list[bytes],
        keys: list[bytes | None] | None,
        size_bytes: int,
        timestamp_ms: int,
    ) -> ProducerBatch:
        """A closed batch made of a caller's whole list (`Producer.send_batch`)."""
        batch = cls(tp, created_ms)
        batch.values = values
        batch.keys = keys
        batch.timestamps = None
        batch.bulk_timestamp_ms = timestamp_ms
        batch.record_count = len(values)
        batch.size_bytes = size_bytes
        batch.closed = True
        return batch

    def append(
        self,
        value: bytes,
        key: bytes | None,
        headers: Headers | None,
        timestamp_ms: int,
        size_bytes: int,
        callback: DeliveryCallback | None,
    ) -> int:
        """Adds one record and returns its index in the batch."""
        index = self.record_count
        self.values.append(value)
        if key is not None or self.keys is not None:
            if self.keys is None:
                self.keys = [None] * index
            self.keys.append(key)
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * index
            self.headers.append(headers)
        self.timestamps.append(timestamp_ms)
        self.record_count = index + 1
        self.size_bytes += size_bytes
        if callback is not None:
            if self.callbacks is None:
                self.callbacks = []
            self.callbacks.append((index, callback))
        return index

    def encode(self, compression: str) -> bytes:
        """Encodes once, with the batch's producer id and sequence; later calls (retries)
        return the same bytes. Drops the columns."""
        if self.encoded is None:
            self.encoded = record_batch.encode_batch(
                self.values,
                self.keys,
                self.headers,
                self.timestamps,
                compression=compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                now_ms=self.bulk_timestamp_ms if self.timestamps is None else None,
                transactional=self.transactional,
            )
            self.values, self.keys, self.headers = [], None, None
        return self.encoded

    def number(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Gives the batch its producer id and sequence. A batch already encoded with other
        numbers (a reset renumbers it) is re-encoded from its stored bytes: the numbers sit
        under the CRC, and the columns were dropped at the first encode."""
        numbers = (producer_id, producer_epoch, base_sequence)
        if numbers == (self.producer_id, self.producer_epoch, self.base_sequence):
            return
        self.producer_id, self.producer_epoch, self.base_sequence = numbers
        if self.encoded is not None:
            decoded = record_batch.decode_batch(self.encoded)
            self.encoded = record_batch.encode_batch(
                decoded.values,
                decoded.keys,
                decoded.headers,
                decoded.timestamps,
                compression=decoded.header.compression,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                transactional=self.transactional,
            )

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Resolves the batch: record i sits at `base_offset + i` (-1 stays -1 for acks=0)."""
        self.log_append_time_ms = log_append_time_ms
        timestamp = log_append_time_ms
        if timestamp < 0:
            timestamp = self.timestamps[0] if self.timestamps else self.bulk_timestamp_ms
        self.result.set_result(RecordMetadata(self.tp[0], self.tp[1], base_offset, timestamp))
        if self.callbacks:
            for index, callback in self.callbacks:
                self._run_callback(callback, None, self.record_metadata(index))

    def fail(self, error: KraftlogError) -> None:
        """Resolves the batch with an error for every record in it."""
        self.result.set_exception(error)
        if self.callbacks:
            for _, callback in self.callbacks:
                self._run_callback(callback, error, None)

    def record_metadata(self, index: int) -> RecordMetadata:
        """RecordMetadata of record `index`, once the batch has completed successfully."""
        base = self.result.result()
        offset = base.offset + index if base.offset >= 0 else -1
        timestamp = base.timestamp
        if self.log_append_time_ms < 0 and self.timestamps:
            timestamp = self.timestamps[index]
        return RecordMetadata(base.topic, base.partition, offset, timestamp)

    def _run_callback(
        self, callback: DeliveryCallback, error: KraftlogError | None, metadata: RecordMetadata | None
    ) -> None:
        """Runs a user callback on the sender thread; its exceptions must not stop delivery."""
        try:
            callback(error, metadata)
        except Exception:
            log.exception("on_delivery callback raised", topic=self.tp[0], partition=self.tp[1])


class RecordFuture:
    """The `concurrent.futures.Future` interface for one record, backed by its batch's Future.

    Supports result/exception/done/add_done_callback/cancel/cancelled/running. It is not a
    `concurrent.futures.Future` instance, so `concurrent.futures.wait` does not accept it;
    call `.result()` on each, or use `Producer.flush()`.
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Waits for delivery; raises KraftlogError if the batch failed."""
        self._batch.result.result(timeout)
        return self._batch.record_metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Waits for delivery; returns the error, or None on success."""
        return self._batch.result.exception(timeout)

    def done(self) -> bool:
        """True once delivered or failed."""
        return self._batch.result.done()

    def running(self) -> bool:
        """False until done, like a Future nobody called `set_running_or_notify_cancel` on."""
        return False

    def cancelled(self) -> bool:
        """Records cannot be cancelled once handed to the producer."""
        return False

    def cancel(self) -> bool:
        """Always False: a record in the accumulator may already be on the wire."""
        return False

    def request_times_ns(self) -> tuple[int, int]:
        """When the record's latest Produce request left the sender and when its answer came
        back, on CLOCK_MONOTONIC (0 until then): with the time of `send`, this splits a
        record's latency into waiting in the producer and the request's round trip."""
        return self._batch.request_sent_ns, self._batch.request_answered_ns

    def broker_time_ns(self) -> int:
        """How long the broker said it spent on the record's latest Produce request (0 until
        answered): the request's round trip minus this is the network and gRPC."""
        return self._batch.broker_time_ns

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Calls `fn(self)` when the record's batch completes (on the sender thread)."""
        self._batch.result.add_done_callback(lambda _: fn(self))
