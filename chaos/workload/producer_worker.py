"""A producer thread: sends unique values at a steady rate and records each send's outcome.

The value names the producer and a sequence number, so every value is unique in the run.
The outcome is recorded on the producer's sender thread when the broker answers (or the
producer gives up), with the time it happened.
"""

from __future__ import annotations

import threading

from chaos.history import History, Outcome, SendOp
from chaos.workload.settings import WorkloadSettings
from chaos.workload.worker import Worker
from data_plane.client import KraftlogError, Producer, RecordMetadata

# Refusals a single attempt gets before anything is appended (the leader checks these
# first and writes nothing): the write definitely did not happen. Everything else (a
# timeout, a lost connection, losing leadership while waiting for the HW) is unknown.
REFUSED_BEFORE_APPEND = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "MESSAGE_TOO_LARGE",
        "CORRUPT_MESSAGE",
        "INVALID_REQUEST",
    }
)


# Answers after which a producer is useless (its id or sequence is no longer accepted): the
# worker carries on with a new producer, as an application would.
PRODUCER_FATAL = frozenset({"OUT_OF_ORDER_SEQUENCE", "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH"})


def outcome_of(error: KraftlogError, single_attempt: bool) -> Outcome:
    """Failed only when the one attempt made was refused before the append."""
    return "failed" if single_attempt and error.code in REFUSED_BEFORE_APPEND else "unknown"


class ProducerWorker(Worker):
    """Sends ``settings.rate_per_s`` values a second until stopped."""

    def __init__(self, name: str, bootstrap: str, settings: WorkloadSettings, history: History, single_attempt: bool) -> None:
        super().__init__(name, bootstrap, settings, history)
        self.single_attempt = single_attempt
        self._in_flight = threading.BoundedSemaphore(settings.in_flight_max)
        self._producer_broken = threading.Event()

    def run(self) -> None:
        seq = 0
        while not self.stopping.is_set():
            self._producer_broken.clear()
            producer = self._new_producer()
            try:
                seq = self._send_until_stopped(producer, seq)
            finally:
                self._close(producer)  # what is left fails: unknown

    def _close(self, producer: Producer) -> None:
        producer.close(timeout=self.settings.delivery_timeout_ms / 1000)

    def _new_producer(self) -> Producer:
        s = self.settings
        return Producer(
            self.bootstrap,
            acks="all",
            linger_ms=2,
            enable_idempotence=not self.single_attempt,
            retries=0 if self.single_attempt else 2_147_483_647,
            delivery_timeout_ms=s.delivery_timeout_ms,
            request_timeout_ms=s.request_timeout_ms,
            max_block_ms=1_000,
            client_id=self.name,
        )

    def _send_until_stopped(self, producer: Producer, seq: int) -> int:
        """Sends from sequence number ``seq`` until stopped or the producer breaks; returns
        the next sequence number."""
        interval_s = 1.0 / self.settings.rate_per_s
        next_s = self.history.now()
        while not self.stopping.is_set() and not self._producer_broken.is_set():
            self.stopping.wait(max(next_s - self.history.now(), 0))  # pacing, not synchronization
            next_s += interval_s
            self._serve_callbacks(producer)
            if not self._in_flight.acquire(timeout=0.5):
                continue
            self._send(producer, seq)
            seq += 1
        return seq

    def _serve_callbacks(self, producer) -> None:
        """Let the producer run its delivery callbacks (kraftlog's does on its sender thread)."""

    def _send(self, producer: Producer, seq: int) -> None:
        partition = seq % self.settings.partitions
        value = f"{self.name}-{seq}"
        invoked = self.history.now()

        def delivered(error: KraftlogError | None, metadata: RecordMetadata | None) -> None:
            self._in_flight.release()
            now = self.history.now()
            if error is None:
                assert metadata is not None and metadata.partition == partition
                self.history.add(SendOp(self.name, partition, value, invoked, now, "ok", offset=metadata.offset))
            else:
                self.history.add(SendOp(self.name, partition, value, invoked, now, outcome_of(error, self.single_attempt), error=error.code))
                if error.code in PRODUCER_FATAL:
                    self._producer_broken.set()

        try:
            producer.send(self.settings.topic, value.encode(), partition=partition, on_delivery=delivered)
        except KraftlogError as error:  # refused before it was queued: never sent
            self._in_flight.release()
            self.history.add(SendOp(self.name, partition, value, invoked, self.history.now(), "failed", error=error.code))
