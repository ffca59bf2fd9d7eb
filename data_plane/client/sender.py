"""The producer's I/O: one background thread running an asyncio loop with `grpc.aio` channels.

Each turn of the loop asks the accumulator which brokers have sendable data, drains one
request's worth per broker that has fewer than `max_in_flight_per_broker` requests open,
and sends each as one Produce call carrying every partition it holds for that broker.
Answers resolve batches, re-queue retriable failures with backoff (after correcting the
leader from the answer's hint or refreshing metadata), and fail the rest: what to do with each
batch's answer is decided by `produce_answers.decide` (pure), and only carried out here. A
batch never outlives `delivery_timeout_ms`. The loop sleeps until the next linger deadline or until
the application wakes it (new batch, full batch, flush, close). With idempotence, a
partition whose sequence cannot continue waits for a newer producer id, fetched by a task
beside the loop while other partitions go on (idempotence.py has the rules).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from typing import Any

import grpc
import structlog

from data_plane.client.buffer_memory import BufferMemory
from data_plane.client.channels import aio_broker_channels
from data_plane.client.errors import KraftlogError, from_error_code, from_rpc_error
from data_plane.client.metadata_cache import (
    LEADER_WATCH_INTERVAL_MIN_MS,
    LEADER_WATCH_WAIT_MS,
    MetadataCache,
    TopicPartition,
    leader_watch,
    now_ms,
    refresh_async,
)
from data_plane.client.produce_answers import (
    Appended,
    BatchState,
    Complete,
    Fail,
    ResetSequence,
    Retry,
    RetryRules,
    decide,
    delivery_timeout,
)
from data_plane.client.produce_streams import ProduceStreams, StreamTimeout
from data_plane.client.producer_batch import ProducerBatch
from data_plane.client.producer_options import ProducerOptions
from data_plane.client.record_accumulator import RecordAccumulator
from kraftlog_proto import broker_pb2
from kraftlog_proto.broker_pb2_grpc import BrokerStub
from server_common.aio_loops import thread_loop
from server_common.nudge import Nudge
from server_common.channel_pool import AioChannelPool
from server_common.errors import ErrorCode

log = structlog.get_logger(__name__)

# How long the loop may sleep with nothing timed: bounds how late queued batches expire.
IDLE_WAKE_MS = 100.0
METADATA_MAX_AGE_MS = 300_000.0
REFRESH_WARNING_INTERVAL_MS = 10_000.0
# Extra time a Produce call gets beyond the acks timeout it gives the broker.
CALL_GRACE_MS = 1_000.0


class Sender:
    """Runs the producer's network loop on its own thread."""

    def __init__(
        self,
        config: ProducerOptions,
        accumulator: RecordAccumulator,
        memory: BufferMemory,
        metadata: MetadataCache,
    ) -> None:
        self._config = config
        self._rules = RetryRules(config.retries, config.retry_backoff_ms, config.retry_backoff_max_ms,
                                 config.delivery_timeout_ms, config.enable_idempotence)
        self._accumulator = accumulator
        self._memory = memory
        self._metadata = metadata
        self._loop = thread_loop()
        self._wakeup = Nudge()
        self._wake_pending = False
        self._closing = False
        self._force_close = False
        self._in_flight: dict[int, int] = {}
        self._throttled_until_ms: dict[int, float] = {}  # broker -> when its last throttle_time_ms has passed
        self._tasks: set[asyncio.Task[None]] = set()
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_warned_ms = float("-inf")
        self._pool: AioChannelPool[BrokerStub] | None = None
        self._streams: ProduceStreams | None = None
        self._fatal: KraftlogError | None = None
        self._producer_id_pending = False  # a task is fetching a newer producer id
        self._thread = threading.Thread(target=self._run_thread, name="kraftlog-producer-sender", daemon=True)

    # ------------------------------------------------------------ called from other threads

    def start(self) -> None:
        """Starts the loop thread."""
        self._thread.start()

    def wakeup(self) -> None:
        """Makes the loop look at the accumulator now. Cheap when a wake is already queued."""
        if self._wake_pending:
            return
        self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._on_wakeup)
        except RuntimeError:
            pass  # the loop has already stopped: nothing left to wake

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Runs a coroutine on the sender loop (metadata lookups for `send`). Raises the
        producer's fatal error (or CLIENT_CLOSED) once the loop has stopped."""
        try:
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:  # the loop is closed
            coroutine.close()
            raise self._fatal or KraftlogError("CLIENT_CLOSED", "the producer's sender has stopped") from None

    def close(self, timeout_s: float | None) -> None:
        """Sends what is queued, waits for answers up to `timeout_s`, then fails the rest."""
        self._accumulator.begin_close()
        self._closing = True
        self.wakeup()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._force_close = True
            self.wakeup()
            self._thread.join()

    @property
    def fatal_error(self) -> KraftlogError | None:
        """Set when the producer can no longer send (idempotent producer id refused)."""
        return self._fatal

    # ------------------------------------------------------------ the loop

    def _on_wakeup(self) -> None:
        self._wake_pending = False
        self._wakeup.set()

    def _run_thread(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._run())
        finally:
            # metadata lookups submitted by `send` may still wait: they end as cancelled
            left = asyncio.all_tasks(self._loop)
            for task in left:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            self._loop.close()

    async def _run(self) -> None:
        self._pool = aio_broker_channels(self._metadata.security, self._config.client_id)
        self._streams = ProduceStreams(self._pool.stub)
        try:
            if self._config.enable_idempotence and not self._config.transactional:
                await self._init_producer_id()
            while not self._done():
                if (not self._producer_id_pending and not self._config.transactional and self._accumulator.has_queued()
                        and self._accumulator.needs_new_producer_id()):
                    self._producer_id_pending = True
                    log.info("a partition's sequence cannot continue: getting a new producer id",
                             old_producer_id=self._accumulator.producer_id)
                    self._spawn(self._renew_producer_id())
                self._wakeup.clear()
                sleep_ms = self._run_once(now_ms())
                await self._wakeup.wait(sleep_ms / 1000.0)
        finally:
            closed = KraftlogError("CLIENT_CLOSED", "the producer closed before these records were delivered")
            for batch in self._accumulator.abort_all():
                self._fail(batch, self._fatal or closed)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._refresh is not None:
                self._refresh.cancel()
                await asyncio.gather(self._refresh, return_exceptions=True)
            await self._streams.close()
            await self._pool.close()

    def _done(self) -> bool:
        """The loop ends on forced close, or on close once nothing is queued or in flight."""
        if self._force_close or self._fatal is not None:
            return True
        # A task that has just finished may still be in `_tasks` (its done callback runs on a
        # later loop iteration): it is not in flight.
        return self._closing and all(task.done() for task in self._tasks) and not self._accumulator.has_queued()

    def _run_once(self, now: float) -> float:
        """One pass: expire, refresh if needed, drain and send. Returns how long to sleep (ms)."""
        for batch in self._accumulator.expire(now, self._config.delivery_timeout_ms):
            self._fail(batch, delivery_timeout(batch_state(batch), self._rules))
        metadata = self._metadata
        leader_of = self._leader_id
        check = self._accumulator.ready(now, leader_of, self._memory.waiters)
        if check.unknown_leaders:
            metadata.want({tp[0] for tp in check.unknown_leaders})
            metadata.invalidate()
        if metadata.stale or now - metadata.last_refresh_ms > METADATA_MAX_AGE_MS:
            self._maybe_refresh(now)
        nodes = {n for n in check.ready_nodes if self._in_flight.get(n, 0) < self._config.max_in_flight_per_broker
                 and self._throttled_until_ms.get(n, 0.0) <= now}  # KIP-219: wait out a throttle before sending again
        if nodes:
            for node, batches in self._accumulator.drain(nodes, leader_of, now).items():
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
                self._spawn(self._produce(node, batches))
        sleep_ms = min(check.next_ready_ms - now, IDLE_WAKE_MS, *(t - now for t in self._throttled_until_ms.values() if t > now))
        if check.unknown_leaders:
            sleep_ms = min(sleep_ms, self._config.retry_backoff_ms)
        return max(sleep_ms, 0.0)

    def _leader_id(self, tp: TopicPartition) -> int | None:
        leader = self._metadata.leader(tp)
        return None if leader is None else leader.broker_id

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ metadata

    def _maybe_refresh(self, now: float) -> None:
        """Starts one metadata refresh unless one runs or the last was under a backoff ago.
        While retries wait for a leader that stopped answering, the refresh is a long poll
        the broker answers when it learns of the new leader (so it may follow the last one
        sooner than a backoff: the broker paces it)."""
        if self._refresh is not None and not self._refresh.done():
            return
        awaited = self._accumulator.leaders_awaited()
        if now - self._metadata.last_refresh_ms < (LEADER_WATCH_INTERVAL_MIN_MS if awaited else self._config.retry_backoff_ms):
            return
        self._refresh = self._loop.create_task(self._refresh_metadata(awaited))

    async def _refresh_metadata(self, awaited: dict[TopicPartition, int]) -> None:
        try:
            request = leader_watch(self._metadata, awaited, LEADER_WATCH_WAIT_MS) if awaited else None
            await refresh_async(self._metadata, self._pool.stub, self._config.request_timeout_ms / 1000.0, request)
            self._accumulator.retry_where_leader_moved(self._metadata.leader_epoch)
        except KraftlogError as err:
            now = now_ms()
            if now - self._refresh_warned_ms >= REFRESH_WARNING_INTERVAL_MS:
                self._refresh_warned_ms = now  # one line per interval, not one per backoff
                log.warning("metadata refresh failed", error=str(err))
            self._metadata.last_refresh_ms = now  # back off before asking again
        self._wakeup.set()

    async def refresh_metadata(self) -> None:
        """A refresh on behalf of the application (`send` to a topic not yet known)."""
        await refresh_async(self._metadata, self._pool.stub, self._config.request_timeout_ms / 1000.0)

    async def _renew_producer_id(self) -> None:
        """Fetches a newer producer id for the partitions that must reset, then wakes the loop."""
        try:
            await self._init_producer_id()
            log.info("new producer id", producer_id=self._accumulator.producer_id)
        finally:
            self._producer_id_pending = False
            self._wakeup.set()

    async def _init_producer_id(self) -> None:
        """Gets a producer id for idempotent sends.

        A cluster that cannot answer for a while (every broker restarting, say) is waited out,
        never fatal: records queued meanwhile fail once they outlive ``delivery_timeout_ms``,
        and the producer carries on as soon as a broker answers. Only an answer that no retry
        can change stops the producer."""
        while not self._force_close and not (self._closing and not self._accumulator.has_queued()):
            last: KraftlogError
            try:
                await refresh_async(self._metadata, self._pool.stub, self._config.request_timeout_ms / 1000.0)
                address = next(iter(self._metadata.refresh_addresses()))
                response = await self._pool.stub(address).InitProducerId(
                    broker_pb2.InitProducerIdRequest(), timeout=self._config.request_timeout_ms / 1000.0
                )
                if response.error_code == ErrorCode.NONE:
                    self._accumulator.new_producer_id(response.producer_id, response.producer_epoch)
                    return
                last = from_error_code(response.error_code, response.error_message, f"InitProducerId at {address}")
            except grpc.RpcError as err:
                last = from_rpc_error(err, "InitProducerId")
            except KraftlogError as err:
                # no broker answered metadata (all restarting, or none has cluster metadata
                # yet): waited out like any other outage
                last = KraftlogError(err.code, err.detail, retriable=True) if err.code == "NO_BROKER_REACHABLE" else err
            if not last.retriable:
                self._fatal = last
                return
            for batch in self._accumulator.expire(now_ms(), self._config.delivery_timeout_ms):
                batch.last_error = last
                self._fail(batch, delivery_timeout(batch_state(batch), self._rules))
            await asyncio.sleep(self._config.retry_backoff_ms / 1000.0)

    # ------------------------------------------------------------ produce

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        """Sends one request to broker `node` and settles every batch in it."""
        partitions = {batch.tp for batch in batches}
        try:
            address = self._metadata.snapshot.brokers.get(node)
            if address is None:
                error = KraftlogError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node} left the metadata")
                self._metadata.invalidate()
                self._settle([(batch, error) for batch in batches])
                return
            request, batches = self._build_request(batches)
            if not batches:
                return
            try:
                sent_ns = time.monotonic_ns()
                if self._config.acks == 0:
                    for batch in batches:
                        self._complete(batch, -1, -1)
                response = await self._streams.produce(address, request, self._call_timeout_s())
                answered_ns = time.monotonic_ns()
                if response.throttle_time_ms > 0:  # over a quota (docs/quotas.md): no request to this broker meanwhile
                    self._throttled_until_ms[node] = now_ms() + response.throttle_time_ms
                broker_ns = response.broker_time_us * 1000
                for batch in batches:
                    batch.request_sent_ns, batch.request_answered_ns, batch.broker_time_ns = sent_ns, answered_ns, broker_ns
            except (grpc.RpcError, ConnectionError, StreamTimeout) as err:
                error = from_rpc_error(err, address) if isinstance(err, grpc.RpcError) else KraftlogError(
                    "REQUEST_TIMED_OUT" if isinstance(err, StreamTimeout) else "BROKER_NOT_AVAILABLE", f"broker {address}: {err}")
                if self._config.acks == 0:
                    log.warning("acks=0 produce failed", broker=node, error=str(error))
                    return
                for batch in batches:
                    batch.outcome_unknown = True  # the request may have reached the leader
                if error.refresh_metadata:
                    self._metadata.invalidate()
                self._settle([(batch, error) for batch in batches])
                return
            if self._config.acks != 0:
                self._handle_response(response, batches)
        except asyncio.CancelledError:
            closed = KraftlogError("CLIENT_CLOSED", "the producer was closed while this request was in flight")
            for batch in batches:
                if not batch.result.done():
                    self._fail(batch, closed)
            raise
        finally:
            self._in_flight[node] -= 1
            for tp in partitions:
                self._accumulator.request_done(tp)
            self._wakeup.set()

    def _call_timeout_s(self) -> float:
        """The gRPC deadline: the broker may hold acks=all for request_timeout_ms, so the
        call gets a little longer to bring back the broker's own REQUEST_TIMED_OUT."""
        return (self._config.request_timeout_ms + CALL_GRACE_MS) / 1000.0

    def _build_request(
        self, batches: list[ProducerBatch]
    ) -> tuple[broker_pb2.ProduceRequest | None, list[ProducerBatch]]:
        """One ProduceRequest for all batches, and the batches it carries. A partition with
        several batches sends them concatenated in drain order. Batches the codec refuses
        fail here and are left out."""
        config = self._config
        by_tp: dict[TopicPartition, list[bytes]] = {}
        carried: list[ProducerBatch] = []
        for batch in batches:
            try:
                encoded = batch.encode(config.compression)
            except (ValueError, TypeError, OverflowError) as err:
                self._fail(batch, KraftlogError(ErrorCode.INVALID_REQUEST, f"cannot encode records: {err}", retriable=False))
                continue
            by_tp.setdefault(batch.tp, []).append(encoded)
            carried.append(batch)
        if not carried:
            return None, carried
        topics: dict[str, broker_pb2.TopicProduceData] = {}
        epochs = {tp: self._metadata.leader_epoch(tp) for tp in by_tp}
        for batch in carried:
            batch.leader_epoch = epochs[batch.tp]
        for (topic, partition), encoded in by_tp.items():
            data = topics.get(topic)
            if data is None:
                data = topics[topic] = broker_pb2.TopicProduceData(topic=topic)
            data.partitions.append(
                broker_pb2.PartitionProduceData(
                    partition=partition,
                    batches=encoded[0] if len(encoded) == 1 else b"".join(encoded),
                    current_leader_epoch=epochs[(topic, partition)],
                )
            )
        request = broker_pb2.ProduceRequest(
            acks=config.acks,
            timeout_ms=int(config.request_timeout_ms),
            topics=list(topics.values()),
            client_id=config.client_id,
            transactional_id=config.transactional_id or "",  # the leader adds a first write's partition with the coordinator
            add_to_transaction=config.transactional,  # (KIP-890 part 2): the producer does not add it itself
        )
        return request, carried

    def _handle_response(self, response: broker_pb2.ProduceResponse, batches: list[ProducerBatch]) -> None:
        """Each batch's answer, settled (`_settle`).

        The broker appends a partition's batches together, so the second batch starts
        where the first ends: base_offset plus the record counts before it.
        """
        answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        next_offset: dict[TopicPartition, int] = {}
        answered: list[tuple[ProducerBatch, Appended | KraftlogError]] = []
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                self._fail(batch, KraftlogError(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker did not answer for {batch.tp}", retriable=False))
            elif answer.error_code == ErrorCode.NONE:
                base = next_offset.get(batch.tp, answer.base_offset)
                next_offset[batch.tp] = base + batch.record_count
                answered.append((batch, Appended(base, answer.log_append_time_ms)))
            else:
                error = from_error_code(answer.error_code, answer.error_message, f"{batch.tp[0]}-{batch.tp[1]}")
                if error.refresh_metadata:
                    hint = answer.current_leader if answer.HasField("current_leader") else None
                    self._metadata.apply_leader_hint(batch.tp, hint, response.node_endpoints)
                answered.append((batch, error))
        self._settle(answered)

    def _settle(self, answered: list[tuple[ProducerBatch, Appended | KraftlogError]]) -> None:
        """Carries out `produce_answers.decide` for each batch: completions and what the answers
        say about the log first, in request order; then retries and failures last first, since
        a retry goes back to the head of its queue and last-first keeps the partition's order."""
        now = now_ms()
        pending: list[tuple[ProducerBatch, Retry | ResetSequence | Fail]] = []
        for batch, answer in answered:
            decision = decide(batch_state(batch), answer, now, self._rules, stopping=self._force_close)
            if isinstance(decision, Complete):
                self._complete(batch, decision.base_offset, decision.log_append_time_ms)
                continue
            batch.last_error = answer if isinstance(answer, KraftlogError) else None
            match decision:
                case ResetSequence() | Fail(reset_sequence=True):
                    self._accumulator.out_of_order(batch, reset=True)
                case Retry(not_appended=True):
                    self._accumulator.out_of_order(batch, reset=False)
                case Retry(outcome_unknown=unknown) | Fail(outcome_unknown=unknown):
                    batch.outcome_unknown = unknown
            pending.append((batch, decision))
        for batch, decision in reversed(pending):
            if isinstance(decision, Fail):
                self._fail(batch, decision.error)
                continue
            log.info("retrying batch", topic=batch.tp[0], partition=batch.tp[1], attempt=batch.attempts + 1, error=decision.error.code,
                     producer_id=batch.producer_id, sequence=batch.base_sequence, reset_sequence=isinstance(decision, ResetSequence))
            self._accumulator.reenqueue(batch, now, decision.backoff_ms)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        self._accumulator.completed(batch, delivered=True)
        self._memory.release(batch.size_bytes)
        batch.complete(base_offset, log_append_time_ms)

    def _fail(self, batch: ProducerBatch, error: KraftlogError) -> None:
        self._accumulator.batch_failed(batch)
        if batch.outcome_unknown:
            error = error.with_outcome_unknown()
        self._accumulator.completed(batch)
        self._memory.release(batch.size_bytes)
        batch.fail(error)


def batch_state(batch: ProducerBatch) -> BatchState:
    """What `produce_answers.decide` reads of a batch."""
    return BatchState(batch.tp[0], batch.tp[1], batch.record_count, batch.created_ms, batch.attempts,
                      batch.outcome_unknown, batch.sent_behind_unresolved, batch.last_error)
