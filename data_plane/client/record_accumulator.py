"""Per-partition queues of batches: where `send` leaves records and the sender picks them up.

Pure bookkeeping (no I/O, no clock: callers pass `now_ms`), guarded by one lock because the
application thread appends while the sender thread drains. The rules follow Kafka's
RecordAccumulator: a partition's head batch is ready when it is full, when linger_ms has
passed since it opened (or retry_backoff since its last failure), when someone flushes,
closes or is blocked on memory, or when the partition has no request in flight (a lone
record pays no linger); a drain takes ready partitions' batches grouped by leader
broker, so the sender makes one request per broker. A drain also piggybacks any other
partition of the same broker that has data, since that request is being paid for anyway.
A partition is in at most `max_in_flight_per_partition` requests at once. With a producer
id, drains number batches per partition, keep at most five numbered from the oldest
unresolved one on, send retries in sequence order, and reset a partition whose numbering cannot continue (the rules
are in idempotence.py).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from data_plane.client.idempotence import PartitionSequence
from data_plane.client.metadata_cache import TopicPartition
from data_plane.client.producer_batch import DeliveryCallback, Headers, ProducerBatch
from data_plane.client.producer_options import ProducerOptions

LeaderOf = Callable[[TopicPartition], "int | None"]


class AppendResult(NamedTuple):
    """Where a record went; `wake_sender` when the sender has something new to time or send."""

    batch: ProducerBatch
    index: int
    wake_sender: bool


class ReadyCheck(NamedTuple):
    """Brokers with sendable data, when to look again, and partitions with no known leader."""

    ready_nodes: set[int]
    next_ready_ms: float
    unknown_leaders: set[TopicPartition]


class RecordAccumulator:
    """Batches records per partition until the sender drains them."""

    def __init__(self, options: ProducerOptions) -> None:
        """Batches, lingers and drains by the producer's own (already checked) options."""
        self.batch_size_bytes = options.batch_size
        self.linger_ms = options.linger_ms
        self.request_bytes_max = options.max_request_size
        self.in_flight_per_partition_max = options.max_in_flight_per_partition
        self._lock = threading.Lock()
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()  # appended, not yet completed
        self._in_flight: dict[TopicPartition, int] = {}  # requests carrying the partition now
        self._flushes = 0
        self._closing = False
        self._drain_rotation = 0  # start point of the next drain, for fairness across partitions
        self._sequences: dict[TopicPartition, PartitionSequence] = {}
        self.producer_id = -1  # the newest producer id; -1: not idempotent
        self.producer_epoch = -1
        self.transactional = False  # every batch is numbered as part of the producer's open transaction

    # ------------------------------------------------------------ application side

    def append(
        self,
        tp: TopicPartition,
        value: bytes,
        key: bytes | None,
        headers: Headers | None,
        timestamp_ms: int,
        size_bytes: int,
        now_ms: float,
        callback: DeliveryCallback | None = None,
    ) -> AppendResult:
        """Adds a record to the partition's open batch, opening a new one when it is full."""
        with self._lock:
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            batch = queue[-1] if queue else None
            new_batch = (
                batch is None
                or batch.closed
                or (batch.record_count > 0 and batch.size_bytes + size_bytes > self.batch_size_bytes)
            )
            if new_batch:
                batch = ProducerBatch(tp, now_ms)
                queue.append(batch)
                self._incomplete.add(batch)
            index = batch.append(value, key, headers, timestamp_ms, size_bytes, callback)
            full = batch.size_bytes >= self.batch_size_bytes
            return AppendResult(batch, index, new_batch or full)

    def queued_batches(self, topic: str, partition_count: int) -> list[int]:
        """Batches waiting to be sent, per partition of ``topic`` (in flight ones not counted)."""
        with self._lock:
            return [len(self._queues.get((topic, p), ())) for p in range(partition_count)]

    def append_bulk(self, batch: ProducerBatch) -> None:
        """Queues a closed batch built by the caller (`Producer.send_batch`)."""
        assert batch.closed and batch.record_count > 0
        with self._lock:
            queue = self._queues.get(batch.tp)
            if queue is None:
                queue = self._queues[batch.tp] = deque()
            if queue and not queue[-1].closed:
                queue[-1].closed = True  # keep record order: later sends go after this batch
            queue.append(batch)
            self._incomplete.add(batch)

    def begin_flush(self) -> list[ProducerBatch]:
        """Makes every batch ready now and returns those the flush must wait for."""
        with self._lock:
            self._flushes += 1
            return list(self._incomplete)

    def end_flush(self) -> None:
        """Ends one `begin_flush`; lingering resumes when no flush is left."""
        with self._lock:
            self._flushes -= 1
            assert self._flushes >= 0

    def begin_close(self) -> None:
        """From now on every batch is ready at once: the producer is draining to close."""
        with self._lock:
            self._closing = True

    # ------------------------------------------------------------ sender side

    def ready(self, now_ms: float, leader_of: LeaderOf, memory_waiters: int = 0) -> ReadyCheck:
        """Which brokers have a sendable batch now, and the earliest time another becomes so."""
        ready_nodes: set[int] = set()
        unknown: set[TopicPartition] = set()
        next_ready_ms = float("inf")
        with self._lock:
            urgent = self._flushes > 0 or self._closing or memory_waiters > 0
            for tp, queue in self._queues.items():
                if not queue or self._blocked(tp, queue):
                    continue
                node = leader_of(tp)
                if node is None:
                    unknown.add(tp)
                    continue
                if node in ready_nodes:
                    continue
                ready_at = self._ready_at_ms(queue, urgent or not self._in_flight.get(tp, 0))
                if ready_at <= now_ms:
                    ready_nodes.add(node)
                else:
                    next_ready_ms = min(next_ready_ms, ready_at)
        return ReadyCheck(ready_nodes, next_ready_ms, unknown)

    def _ready_at_ms(self, queue: deque[ProducerBatch], urgent: bool) -> float:
        """When the head batch may be sent: backoff first, then full/urgent, then linger.

        ``urgent`` includes a partition with no request in flight: its first record goes at
        once and pays no linger (a lone record's latency is one round trip), while the
        records that arrive during that request's round trip gather into the next batch, so
        batching still forms under load (Nagle's rule rather than a fixed delay)."""
        head = queue[0]
        if head.attempts > 0:
            return head.retry_at_ms
        if urgent or len(queue) > 1 or head.closed or head.size_bytes >= self.batch_size_bytes:
            return 0.0
        return head.created_ms + self.linger_ms

    def drain(self, nodes: set[int], leader_of: LeaderOf, now_ms: float) -> dict[int, list[ProducerBatch]]:
        """Takes batches for `nodes`, at most `request_bytes_max` per node (at least one batch).

        Each partition drained here is in one more request until `request_done`; one that is
        already in `in_flight_per_partition_max` requests waits. gRPC does not promise that a
        broker handles concurrent calls in the order they were sent, so without a producer id
        only one request per partition keeps its records in send order; with one, sequence
        numbers keep the order and the leader refuses a batch that overtook an earlier one
        (idempotence.py). Batches leave their queue closed; with a producer id they get their
        sequence numbers here, at most as many as the partition's window of five has room for,
        and a retry goes alone.
        """
        drained: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        with self._lock:
            items = list(self._queues.items())
            if not items:
                return drained
            start = self._drain_rotation % len(items)
            self._drain_rotation += 1
            for tp, queue in items[start:] + items[:start]:
                if not queue or self._blocked(tp, queue):
                    continue
                node = leader_of(tp)
                if node not in nodes:
                    continue
                state = self._reset_if_due(tp, queue) if self.producer_id >= 0 else None
                taken = 0
                while queue:
                    head = queue[0]
                    if head.attempts > 0 and head.retry_at_ms > now_ms:
                        break
                    size = sizes.get(node, 0)
                    if size and size + head.size_bytes > self.request_bytes_max:
                        break
                    retry = head.attempts > 0
                    if state is not None and taken and (retry or state.room() == 0):
                        break
                    queue.popleft()
                    head.closed = True
                    if state is not None:
                        head.transactional = self.transactional
                        self._assign_sequence(state, head)
                        state.sent(head)
                    drained.setdefault(node, []).append(head)
                    sizes[node] = size + head.size_bytes
                    taken += 1
                    if retry:
                        break  # a retry goes alone: the broker answers a retried request from memory as a whole
                if taken:
                    self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
        return drained

    def _blocked(self, tp: TopicPartition, queue: deque[ProducerBatch]) -> bool:
        """True while the partition's head batch may not be sent, whatever the time: the
        partition is in as many requests as allowed, or (with a producer id) the head is a
        retry with an earlier batch still unresolved, its window of five numbered batches is
        full, or the partition must reset and waits for its requests or a new id."""
        in_flight = self._in_flight.get(tp, 0)
        if in_flight >= self.in_flight_per_partition_max:
            return True
        state = self._sequences.get(tp)
        if self.producer_id < 0 or state is None:
            return False
        head = queue[0]
        if state.needs_reset:
            if in_flight:
                return True  # the reset waits until every request of the partition is back
            if _unknown_outcome_leads(state, queue):
                return False  # retried under its own id first: that shows whether it is in the log
            return state.producer_id == self.producer_id  # waits for a newer producer id
        if state.owns(head):
            return not state.is_first_unresolved(head)
        return state.room() == 0

    def _reset_if_due(self, tp: TopicPartition, queue: deque[ProducerBatch]) -> PartitionSequence:
        """The partition's numbering state, moved to the newest producer id (numbering from 0)
        when it must reset and no batch of unknown outcome under the old id leads its queue
        (`_blocked` has checked that none of its requests is in flight). Queued batches are
        renumbered as they are drained."""
        state = self._sequences.get(tp)
        due = state is None or (
            state.needs_reset and state.producer_id != self.producer_id and not _unknown_outcome_leads(state, queue)
        )
        if due:
            state = self._sequences[tp] = PartitionSequence(self.producer_id, self.producer_epoch)
        return state

    @staticmethod
    def _assign_sequence(state: PartitionSequence, batch: ProducerBatch) -> None:
        """Numbers a batch under its partition's producer id; a retry keeps its number unless
        its partition reset since."""
        if not state.owns(batch):
            batch.number(state.producer_id, state.producer_epoch, state.take(batch.record_count))

    def new_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """The newest producer id: partitions that must reset move to it (numbering from 0);
        the others keep numbering under theirs."""
        with self._lock:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch

    def start_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A transactional producer's id or epoch changed (init, or a transaction's end bumps the
        epoch, KIP-890): every partition numbers from 0 under it, as the leader expects after the
        marker with the new epoch. Called with nothing queued or in flight."""
        with self._lock:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self._sequences.clear()

    def needs_new_producer_id(self) -> bool:
        """True when some partition must reset and the newest producer id is its own."""
        with self._lock:
            return any(s.needs_reset and s.producer_id == self.producer_id for s in self._sequences.values())

    def batch_failed(self, batch: ProducerBatch) -> None:
        """A numbered batch failed for good: later numbers of its partition would leave a gap
        the leader never accepts, so the partition resets."""
        with self._lock:
            state = self._sequences.get(batch.tp)
            if state is not None and state.owns(batch):
                state.needs_reset = True

    def out_of_order(self, batch: ProducerBatch, reset: bool) -> None:
        """The leader answered OUT_OF_ORDER_SEQUENCE for `batch`: it is not in the log. Call
        before `reenqueue`. With `reset` (produce_answers.decide: the leader lost track of
        this producer id), nothing numbered after the batch under that id can be in the log
        either (a leader never appends past a gap), and the partition resets, unless it
        already numbers under a newer id than the batch's."""
        with self._lock:
            batch.outcome_unknown = False
            state = self._sequences.get(batch.tp)
            if not reset or state is None or not state.owns(batch):
                return
            state.needs_reset = True
            later = state.unresolved[state.unresolved.index(batch) + 1:] if batch in state.unresolved else []
            for other in later + list(self._queues.get(batch.tp, ())):
                if other.producer_id == batch.producer_id:
                    other.outcome_unknown = False

    def request_done(self, tp: TopicPartition) -> None:
        """A request carrying the partition came back (answered, failed or cancelled)."""
        with self._lock:
            left = self._in_flight[tp] - 1
            assert left >= 0, (tp, left)
            if left:
                self._in_flight[tp] = left
            else:
                del self._in_flight[tp]

    def reenqueue(self, batch: ProducerBatch, now_ms: float, backoff_ms: float) -> None:
        """Puts a failed batch back into its queue, to be retried after `backoff_ms`: in
        sequence order among the partition's queued retries when it has a sequence (answers
        of different requests come back in any order), else at the head (re-enqueue one
        request's batches for a partition last-first to keep their order)."""
        with self._lock:
            batch.attempts += 1
            batch.retry_at_ms = now_ms + backoff_ms
            queue = self._queues.get(batch.tp)
            if queue is None:
                queue = self._queues[batch.tp] = deque()
            state = self._sequences.get(batch.tp)
            place = 0
            if state is not None and state.owns(batch) and batch in state.window:
                while place < len(queue) and state.owns(queue[place]) and state.precedes(queue[place], batch):
                    place += 1
            queue.insert(place, batch)

    def retry_where_leader_moved(self, leader_epoch_of: Callable[[TopicPartition], int]) -> None:
        """Makes a waiting retry due at once where the partition has a newer leader than its
        last attempt was sent to (Kafka's KIP-951): the back-off is for a leader that may
        recover, and waiting it out after a failover only lengthens the producer's stall."""
        with self._lock:
            for tp, queue in self._queues.items():
                for batch in queue:
                    if batch.attempts == 0:
                        break  # retries sit at the head of their queue
                    if leader_epoch_of(tp) > batch.leader_epoch:
                        batch.retry_at_ms = 0.0

    def leaders_awaited(self) -> dict[TopicPartition, int]:
        """The partitions whose waiting retry failed in a way a new leader cures (the leader
        stopped answering or stepped down), with the leader epoch that failed."""
        with self._lock:
            return {tp: queue[0].leader_epoch for tp, queue in self._queues.items()
                    if queue and queue[0].attempts and queue[0].last_error is not None and queue[0].last_error.refresh_metadata}

    def expire(self, now_ms: float, delivery_timeout_ms: float) -> list[ProducerBatch]:
        """Removes queued batches older than the delivery timeout; the caller fails them."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for queue in self._queues.values():
                while queue and queue[0].created_ms + delivery_timeout_ms <= now_ms:
                    expired.append(queue.popleft())
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Removes every queued batch (forced close); the caller fails them."""
        with self._lock:
            aborted = [batch for queue in self._queues.values() for batch in queue]
            self._queues.clear()
        return aborted

    def completed(self, batch: ProducerBatch, delivered: bool = False) -> None:
        """Forgets a batch that has been resolved: `delivered`, or failed."""
        with self._lock:
            self._incomplete.discard(batch)
            state = self._sequences.get(batch.tp)
            if state is not None:
                state.resolved(batch, delivered)

    def has_incomplete(self) -> bool:
        """True while any appended batch has not been resolved."""
        return bool(self._incomplete)

    def has_queued(self) -> bool:
        """True while any batch waits in a queue (not counting in-flight ones)."""
        with self._lock:
            return any(self._queues.values())


def _unknown_outcome_leads(state: PartitionSequence, queue: deque[ProducerBatch]) -> bool:
    """The queue's head is a batch of unknown outcome numbered under ``state``'s producer id:
    it is retried under that id before the partition may reset."""
    head = queue[0]
    return head.outcome_unknown and head.producer_id == state.producer_id
