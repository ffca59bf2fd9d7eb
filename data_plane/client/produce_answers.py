"""What the producer does with one batch's answer (pure: no I/O, no clock, no queues).

A Produce answer, or a failed call, settles each batch it carried in one of four ways, as
`FollowerCore.decide` settles a follower's fetch answers: `Complete` (the leader appended
it), `Retry` after a back-off, `ResetSequence` (retry once the partition is renumbered under a
newer producer id) or `Fail`. The sender (sender.py) turns a response into `Appended` or a
`KraftlogError` per batch, asks `decide`, and carries the decision out: the queue, the
partition's numbering (record_accumulator.py, idempotence.py), buffer memory, the caller's
future and the log line.

The rules:

- Back-off doubles with each attempt, from ``retry_backoff_ms`` up to ``retry_backoff_max_ms``.
- A retriable error is retried while attempts (``retries``) and time are left: the retry
  must be due before the batch's ``delivery_timeout_ms`` ends, else the batch fails with
  DELIVERY_TIMEOUT naming the last error. A producer being force-closed retries nothing.
- An answer that does not say whether the batch was appended (OUTCOME_UNKNOWN_CODES, or a
  call that may have reached the leader) marks its outcome unknown: a failure then says the
  records may have been written, and a reset retries it under the old id first.
- OUT_OF_ORDER_SEQUENCE (idempotent producers) means nothing was appended, so the batch is
  retried whatever the broker's flags say. Sent behind an unresolved batch of its partition,
  it may simply have overtaken that batch: it is retried in its turn. Sent as the first
  unresolved batch, the leader has lost track of the producer id (an unclean election, say):
  nothing numbered after it can be in the log either, and the partition resets (KIP-360).
  Re-sending it under its old numbers after later batches, which once wrote records out of
  order, cannot happen: the reset renumbers the partition's batches in their original order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from data_plane.client.errors import KraftlogError
from data_plane.client.idempotence import OUTCOME_UNKNOWN_CODES
from server_common.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class RetryRules:
    """The producer settings the decision reads (see ProducerOptions for their meaning)."""

    retries: int
    retry_backoff_ms: float
    retry_backoff_max_ms: float
    delivery_timeout_ms: float
    idempotent: bool


@dataclass(frozen=True, slots=True)
class BatchState:
    """What the decision reads of a batch (producer_batch.ProducerBatch)."""

    topic: str
    partition: int
    record_count: int
    created_ms: float
    attempts: int  # retries so far
    outcome_unknown: bool  # an earlier attempt, or this one, may have been appended
    sent_behind_unresolved: bool  # its last attempt left while an earlier batch was unresolved
    last_error: KraftlogError | None = None  # of the attempt before this answer


@dataclass(frozen=True, slots=True)
class Appended:
    """The leader appended the batch at ``base_offset``."""

    base_offset: int
    log_append_time_ms: int


@dataclass(frozen=True, slots=True)
class Complete:
    base_offset: int
    log_append_time_ms: int


@dataclass(frozen=True, slots=True)
class Retry:
    """Re-queue the batch, due after ``backoff_ms``. ``not_appended``: the leader refused it
    before appending (overtaken), so its outcome is no longer unknown."""

    error: KraftlogError
    backoff_ms: float
    outcome_unknown: bool
    not_appended: bool = False


@dataclass(frozen=True, slots=True)
class ResetSequence:
    """The leader lost track of the producer id: the batch is not in the log, nor anything
    numbered after it; the partition moves to a newer producer id and the batch is retried
    after ``backoff_ms``, renumbered in its original place."""

    error: KraftlogError
    backoff_ms: float


@dataclass(frozen=True, slots=True)
class Fail:
    """The batch fails with ``error``. ``reset_sequence``: it was refused out of order as its
    partition's first unresolved batch, so the partition resets as for `ResetSequence`."""

    error: KraftlogError
    outcome_unknown: bool
    reset_sequence: bool = False


Decision = Complete | Retry | ResetSequence | Fail


def backoff_ms(attempts: int, rules: RetryRules) -> float:
    """The wait before attempt ``attempts + 1``: doubling, capped."""
    return min(rules.retry_backoff_ms * (2 ** attempts), rules.retry_backoff_max_ms)


def delivery_timeout(batch: BatchState, rules: RetryRules) -> KraftlogError:
    """The error of a batch that outlived ``delivery_timeout_ms``, naming its last error."""
    last = f"; last error: {batch.last_error}" if batch.last_error else ""
    return KraftlogError(
        "DELIVERY_TIMEOUT",
        f"{batch.record_count} records for {batch.topic}-{batch.partition} not acknowledged within "
        f"delivery_timeout_ms={rules.delivery_timeout_ms:.0f}{last}",
        retriable=False,
    )


def decide(batch: BatchState, answer: Appended | KraftlogError, now_ms: float, rules: RetryRules, *,
           stopping: bool = False) -> Decision:
    """What to do with ``batch`` given the ``answer`` for it at ``now_ms``; ``stopping``: the
    producer is being force-closed."""
    if isinstance(answer, Appended):
        return Complete(answer.base_offset, answer.log_append_time_ms)
    error, outcome_unknown = answer, batch.outcome_unknown
    out_of_order = answer.error is ErrorCode.OUT_OF_ORDER_SEQUENCE and rules.idempotent
    if out_of_order:
        error, outcome_unknown = KraftlogError(answer.code, answer.detail, retriable=True), False
    elif answer.code in OUTCOME_UNKNOWN_CODES:
        outcome_unknown = True
    reset = out_of_order and not batch.sent_behind_unresolved
    wait = backoff_ms(batch.attempts, rules)
    in_time = now_ms + wait < batch.created_ms + rules.delivery_timeout_ms
    if error.retriable and batch.attempts < rules.retries and in_time and not stopping:
        return ResetSequence(error, wait) if reset else Retry(error, wait, outcome_unknown, out_of_order)
    if error.retriable and not in_time:
        return Fail(delivery_timeout(replace(batch, last_error=error), rules), outcome_unknown, reset)
    return Fail(error, outcome_unknown, reset)
