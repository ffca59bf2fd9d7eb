"""The producer: `send` batches records in memory, a background sender delivers them.

`send` does only cheap work on the caller's thread (pick a partition, reserve buffer
memory, append to the partition's open batch) and returns a future; encoding, requests,
retries and leader changes happen on the sender thread (sender.py). `send_batch` is the
bulk path for callers that already hold a list of values for one partition: one batch,
one future, no per-record bookkeeping.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable
from typing import Any

import structlog

from data_plane.client.buffer_memory import BufferMemory
from data_plane.client.errors import KraftlogError
from data_plane.client.metadata_cache import MetadataCache, now_ms
from data_plane.client.prepared_transactions import PreparedTransaction
from data_plane.client.partitioner import StickyPartitioner, make_partitioner
from data_plane.client.producer_options import ProducerOptions
from data_plane.client.producer_batch import (
    RECORD_OVERHEAD_BYTES,
    DeliveryCallback,
    Headers,
    ProducerBatch,
    RecordFuture,
    record_size_bytes,
)
from data_plane.client.record_accumulator import RecordAccumulator
from data_plane.client.records import RecordMetadata
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from data_plane.client.sender import Sender
from data_plane.client.transactions import GroupMetadata, TransactionManager
from server_common.internal_topics import OFFSETS_TOPIC
from server_common.errors import ErrorCode

log = structlog.get_logger(__name__)

# How often a `send` waiting for a topic's metadata asks again.
WAIT_SLICE_S = 0.1


class Producer:
    """Sends records to kraftlog partitions, batching per partition and per broker.

    Args:
        bootstrap: "host:port,host:port" of any brokers; the rest are learned from metadata.
        security: TLS files and credentials (``ClientSecurity``); None: the config named by
            ``KRAFTLOG_CLIENT_CONFIG``, else plaintext.
        settings: any ``ProducerOptions`` field by name (acks, linger_ms, batch_size,
            compression, retries, delivery_timeout_ms, retry_backoff_ms, ...,
            transactional_id): producer_options.py says what each does; a value that cannot
            work is a ValueError saying which can.
    """

    def __init__(self, bootstrap: str | Iterable[str], *, security: ClientSecurity | None = None, **settings: Any) -> None:
        options = self.options = ProducerOptions(**settings)
        self._max_block_s = options.max_block_ms / 1000.0
        self._max_request_size = options.max_request_size
        self._metadata = MetadataCache(bootstrap, resolve_security(security))
        self._partitioner = make_partitioner(options.partitioner, options.batch_size, self._partition_loads)
        # Only the sticky partitioner counts what it sent where (it moves on by bytes, KIP-794).
        self._sticky = self._partitioner if isinstance(self._partitioner, StickyPartitioner) else None
        self._memory = BufferMemory(options.buffer_memory)
        self._accumulator = RecordAccumulator(options)
        self._sender = Sender(options, self._accumulator, self._memory, self._metadata)
        self._transactions = None if options.transactional_id is None else TransactionManager(
            options.transactional_id, options.transaction_timeout_ms, self._metadata, self._metadata.security, options.client_id,
            self._accumulator, self.flush, options.request_timeout_ms / 1000.0, options.retry_backoff_ms / 1000.0, self._max_block_s)
        self._closed = False
        self._sender.start()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queues one record; returns a future of its RecordMetadata. A None `value` is a
        tombstone: on a compacted topic the cleaner removes the key after delete.retention.ms.

        Blocks only to learn a new topic's partitions or for buffer memory (each up to
        max_block_ms). `on_delivery(error, metadata)` runs on the sender thread once the
        record is delivered or failed: keep it short.
        """
        self._check_open()
        count = self._metadata.snapshot.partition_counts.get(topic) or self._wait_for_topic(topic)
        sticky = self._sticky if partition is None and key is None else None
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            raise KraftlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has partitions 0..{count - 1}, not {partition}")
        size = record_size_bytes(value, key, headers)
        if size > self._max_request_size:
            raise KraftlogError(ErrorCode.MESSAGE_TOO_LARGE, f"record of {size} bytes > max_request_size={self._max_request_size}")
        if self._transactions is not None:
            self._transactions.leader_adds((topic, partition))
        self._memory.reserve(size, self._max_block_s)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        now = now_ms()
        result = self._accumulator.append((topic, partition), value, key, headers, timestamp_ms, size, now, on_delivery)
        if sticky is not None:
            sticky.on_append(topic, partition, size, result.batch.size_bytes >= self.options.batch_size, count)
        if self._transactions is not None:
            self._transactions.track(result.batch.result)
        if result.wake_sender:
            self._sender.wakeup()
        return RecordFuture(result.batch, result.index)

    def _partition_loads(self, topic: str, partition_count: int) -> list[int | None]:
        """For the sticky partitioner's next choice: per partition, the batches waiting to be
        sent, or None while it has no known leader."""
        queued = self._accumulator.queued_batches(topic, partition_count)
        return [queued[p] if self._metadata.leader((topic, p)) is not None else None for p in range(partition_count)]

    def send_batch(
        self, topic: str, partition: int, values: list[bytes | None], keys: list[bytes | None] | None = None
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queues `values` as one batch for one partition (the bulk fast path).

        The future gives the first record's RecordMetadata; record i has offset
        `offset + i`. The list must fit in max_request_size; do not modify it afterwards.
        """
        self._check_open()
        if not values:
            raise ValueError("send_batch needs at least one value")
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values: pass one key per value or None")
        count = self._metadata.snapshot.partition_counts.get(topic) or self._wait_for_topic(topic)
        if not 0 <= partition < count:
            raise KraftlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} has partitions 0..{count - 1}, not {partition}")
        size = sum(map(len, filter(None, values))) + RECORD_OVERHEAD_BYTES * len(values)  # filter(None): no None (nor b"")
        if keys is not None:
            size += sum(map(len, filter(None, keys)))
        if size > self._max_request_size:
            raise KraftlogError(
                "MESSAGE_TOO_LARGE", f"batch of {size} bytes > max_request_size={self._max_request_size}: split it"
            )
        if self._transactions is not None:
            self._transactions.leader_adds((topic, partition))
        self._memory.reserve(size, self._max_block_s)
        batch = ProducerBatch.bulk((topic, partition), now_ms(), values, keys, size, time.time_ns() // 1_000_000)
        if self._transactions is not None:
            self._transactions.track(batch.result)
        self._accumulator.append_bulk(batch)
        self._sender.wakeup()
        return batch.result

    def partitions_for(self, topic: str) -> int:
        """The topic's partition count (waits for metadata up to max_block_ms)."""
        return self._metadata.snapshot.partition_counts.get(topic) or self._wait_for_topic(topic)

    def init_transactions(self) -> None:
        """Registers the transactional id with its coordinator (once, before the first
        transaction): fences older producers with the same id and aborts what they left open."""
        self._transactional().init_transactions()

    def begin_transaction(self) -> None:
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[tuple[str, int], int], group_metadata: GroupMetadata) -> None:
        """Commits a group consumer's ``offsets`` ((topic, partition) -> next offset to read)
        inside the open transaction (KIP-447): they become the group's committed offsets if
        and only if the transaction commits. ``group_metadata`` is `Consumer.group_metadata()`
        taken after the poll that read the records."""
        self._transactional().send_offsets_to_transaction(offsets, group_metadata, self.partitions_for(OFFSETS_TOPIC))

    def commit_transaction(self) -> None:
        """Delivers the transaction's records, then commits: read_committed readers see all of
        them or, after a failure (raised here; then call abort_transaction), none."""
        self._transactional().commit_transaction()

    def abort_transaction(self) -> None:
        """Aborts the open transaction: read_committed readers never see its records."""
        self._transactional().abort_transaction()

    def prepare_transaction(self) -> PreparedTransaction | None:
        """Delivers the transaction's records (raises if one failed) and leaves the
        transaction open for `end_prepared` to commit or abort, in any process
        (data_plane/client/prepared_transactions.py); None when it wrote nothing."""
        manager = self._transactional()
        prepared = manager.prepare_transaction()
        return None if prepared is None else PreparedTransaction(manager.transactional_id, *prepared)

    def _transactional(self) -> TransactionManager:
        self._check_open()
        if self._transactions is None:
            raise KraftlogError(ErrorCode.INVALID_TXN_STATE, "not a transactional producer: create it with transactional_id=...", retriable=False)
        return self._transactions

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued now and waits until each record so far is delivered or
        failed. Raises TimeoutError after `timeout` seconds; failures stay on the futures."""
        batches = self._accumulator.begin_flush()
        try:
            self._sender.wakeup()
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in batches:
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                concurrent.futures.wait([batch.result], remaining)
                if not batch.result.done():
                    raise TimeoutError(f"flush: records still undelivered after {timeout}s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Delivers what is queued (up to `timeout` seconds), then fails whatever is left
        with CLIENT_CLOSED and stops the sender thread. A transactional producer's open
        transaction is aborted, never committed (TransactionManager.abort_on_close)."""
        if self._closed:
            return
        if self._transactions is not None and self._sender.fatal_error is None:
            self._transactions.abort_on_close(timeout)
        self._closed = True
        self._sender.close(timeout)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise KraftlogError("CLIENT_CLOSED", "send after close()")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error

    def _wait_for_topic(self, topic: str) -> int:
        """Refreshes metadata until `topic` has partitions, up to max_block_ms.

        UNKNOWN_TOPIC_OR_PARTITION is waited out (the topic may be being created), with one
        log line saying so; other topic errors (INVALID_TOPIC, ...) are raised at once, and so
        is the producer's fatal error (no broker answered, producer id refused).
        """
        self._metadata.want([topic])
        deadline = time.monotonic() + self._max_block_s
        last_error: Exception | None = None
        said_waiting = False
        while True:
            refresh = self._sender.submit(self._sender.refresh_metadata())
            concurrent.futures.wait([refresh], timeout=max(deadline - time.monotonic(), 0.0))
            self._check_open()  # the sender stopped (its lookups end cancelled): raise why
            if refresh.done() and not refresh.cancelled() and refresh.exception() is not None:
                last_error = refresh.exception()
            count = self._metadata.partition_count(topic)
            if count:
                return count
            failure = self._metadata.topic_failure(topic)
            if failure is not None:
                raise failure
            error = self._metadata.topic_error(topic)
            unreachable = isinstance(last_error, KraftlogError) and last_error.code == "NO_BROKER_REACHABLE"
            if time.monotonic() + WAIT_SLICE_S >= deadline:
                if unreachable:  # the address is the problem, not the topic: say so, with its advice
                    raise KraftlogError("NO_BROKER_REACHABLE", f"{last_error.detail}, for max_block_ms={self._max_block_s * 1000:.0f}",
                                        retriable=False)
                detail = f"; last error: {last_error}" if last_error else ""
                raise KraftlogError(
                    "UNKNOWN_TOPIC_OR_PARTITION",
                    f"topic {topic!r} not in metadata after max_block_ms={self._max_block_s * 1000:.0f}{detail}",
                    retriable=False,
                )
            if not said_waiting and (error is not None or unreachable):
                said_waiting = True
                if unreachable:
                    log.warning("no broker answers yet; retrying until max_block_ms", topic=topic, error=str(last_error),
                                max_block_ms=self._max_block_s * 1000)
                else:
                    log.warning("waiting for the topic to appear in metadata", topic=topic, max_block_ms=self._max_block_s * 1000,
                                hint=f"create it with 'kraftlog topics create {topic}'")
            time.sleep(WAIT_SLICE_S)
