"""The idempotent producer's numbering and in-flight rules for one partition (pure: no I/O,
no clock).

The leader accepts a producer's batches for a partition only in sequence order, answers a
retry of a batch it already holds with the original offsets, and refuses a batch that does
not follow the last one it holds with OUT_OF_ORDER_SEQUENCE (data_plane/replication/
producer_state.py). It remembers a producer's last five batches. The producer keeps its side
of that bargain here, as Kafka's `TransactionManager` and `RecordAccumulator` do:

- A partition numbers batches under one producer id, from 0, in the order they leave its queue;
  a batch keeps its number across retries, so the leader can recognise a retry.
- Up to ``max_in_flight_per_partition`` requests (at most five) may carry a partition at once,
  and at most ``BATCHES_UNRESOLVED_MAX`` (five) batches may be numbered from its oldest
  *unresolved* batch (sent, not yet acknowledged or failed) on: any batch that may be in the
  log is then among the five the leader remembers, so its retry is recognised as a duplicate. gRPC does not promise
  that a broker handles two calls in the order they were sent, so a later batch may reach the
  leader first: the leader refuses it (OUT_OF_ORDER_SEQUENCE), and it is retried. The sequence
  numbers, not the transport, keep the records in send order.
- Until a partition has one batch acknowledged under its producer id, that batch goes alone:
  a leader that holds no batch of a producer id accepts any sequence for it (KIP-360: its
  history may have been removed by retention), so a second batch that overtook the first, or
  went out while the first was refused, would be written ahead of it.
- A batch that comes back for a retry goes back into its queue in sequence order, and a retry is
  sent only when it is the partition's first unresolved batch, alone in its request: while
  earlier batches are retried, later ones wait (in effect one request in flight until the
  retries are through), so the leader sees them in order.
- OUT_OF_ORDER_SEQUENCE is retried without further ado when the batch was sent while an earlier
  batch of the partition was still unresolved (it may simply have overtaken it). Sent as the
  first unresolved batch, it means the leader lost track of us (an unclean election, say).
- When the partition's sequence can no longer continue (a numbered batch failed for good, so
  every later number leaves a gap; or the leader lost track of us), the partition *resets*:
  it waits until none of its requests is in flight, resolves under the old id any batch whose
  outcome is unknown (a retry under the old id is recognised as a duplicate if it was written),
  then moves to a newer producer id and renumbers its unacknowledged batches from 0, in their
  original order (KIP-360). Nothing acknowledged is sent again and nothing is reordered. Other
  partitions keep their producer id: the leader keeps state per producer id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from data_plane.replication.producer_state import BATCHES_RETAINED

if TYPE_CHECKING:
    from data_plane.client.producer_batch import ProducerBatch

BATCHES_UNRESOLVED_MAX = BATCHES_RETAINED
# Requests carrying one partition at once; Kafka's limit with idempotence
# (max.in.flight.requests.per.connection <= 5).
IN_FLIGHT_PER_PARTITION_MAX = BATCHES_RETAINED
SEQUENCE_MASK = 0x7FFFFFFF

# Answers after which a batch may or may not be in the log: the request reached a broker
# and the answer does not say that nothing was appended. NOT_LEADER_OR_FOLLOWER is among
# them because an acks=all leader that loses leadership before its HW covers an appended
# batch answers it (the new leader may or may not have replicated the batch).
OUTCOME_UNKNOWN_CODES: frozenset[str] = frozenset(
    {"REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "UNKNOWN_SERVER_ERROR", "NOT_LEADER_OR_FOLLOWER"}
)


@dataclass
class PartitionSequence:
    """Where a partition's numbering stands: the producer id it numbers under, the next
    sequence, its *window* (every batch numbered since its oldest unresolved one, in order),
    and `needs_reset` once that numbering cannot continue.

    The window, not the count of unresolved batches, is what the leader's memory bounds:
    answers come back in any order, so batches numbered after an unresolved one may be
    acknowledged first, and each of them pushes an older batch out of the five the leader
    remembers."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    needs_reset: bool = False
    window: list[ProducerBatch] = field(default_factory=list)
    settled: set[ProducerBatch] = field(default_factory=set)  # resolved, but still in the window
    acknowledged: bool = False  # the leader holds a batch of ours: it checks our sequences

    def take(self, record_count: int) -> int:
        """The base sequence of the next batch of `record_count` records."""
        assert record_count > 0, record_count
        sequence = self.next_sequence
        self.next_sequence = (sequence + record_count) & SEQUENCE_MASK
        return sequence

    def owns(self, batch: ProducerBatch) -> bool:
        """True when `batch` is numbered under this partition's current producer id."""
        return batch.base_sequence >= 0 and batch.producer_id == self.producer_id

    @property
    def unresolved(self) -> list[ProducerBatch]:
        """Batches sent under this producer id and neither acknowledged nor failed, in order."""
        return [b for b in self.window if b not in self.settled]

    def room(self) -> int:
        """How many more batches may be numbered now: the window holds at most five, and
        one until the leader has acknowledged a batch under this producer id."""
        return (BATCHES_UNRESOLVED_MAX if self.acknowledged else 1) - len(self.window)

    def sent(self, batch: ProducerBatch) -> None:
        """`batch` (numbered here) leaves in a request. Remembers whether an earlier batch was
        still unresolved: only then may an OUT_OF_ORDER_SEQUENCE answer mean "overtaken"."""
        assert self.owns(batch), (batch.producer_id, batch.base_sequence, self.producer_id)
        if batch not in self.window:
            self.window.append(batch)
        batch.sent_behind_unresolved = not self.is_first_unresolved(batch)

    def resolved(self, batch: ProducerBatch, delivered: bool) -> None:
        """`batch` was acknowledged (`delivered`) or failed; the window moves past settled
        batches at its front."""
        if batch not in self.window:
            return
        self.settled.add(batch)
        self.acknowledged = self.acknowledged or delivered
        while self.window and self.window[0] in self.settled:
            self.settled.discard(self.window.pop(0))

    def is_first_unresolved(self, batch: ProducerBatch) -> bool:
        return next((b for b in self.window if b not in self.settled), None) is batch

    def precedes(self, a: ProducerBatch, b: ProducerBatch) -> bool:
        """True when `a` was numbered before `b` (both in the window). Compares places in
        the window, not sequence numbers, which wrap at 2**31."""
        return self.window.index(a) < self.window.index(b)
