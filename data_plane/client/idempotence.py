"""The idempotent producer's numbering rules for one partition (pure: no I/O, no clock).

The leader accepts a producer's batches for a partition only in sequence order and answers a
retry of a batch it already holds with the original offsets (data_plane/replication/
producer_state.py). The producer keeps its side of that bargain here:

- A partition numbers batches under one producer id, from 0, in the order they leave its queue;
  a batch keeps its number across retries, so the leader can recognise a retry.
- One request per partition is in flight (RecordAccumulator mutes it), carrying at most
  ``BATCHES_PER_REQUEST_MAX`` of its batches: the leader remembers the last five batches of a
  producer, so any batch that may be in the log is still recognised when retried.
- When the partition's sequence can no longer continue (a numbered batch failed for good, so
  every later number leaves a gap; or the leader answered OUT_OF_ORDER_SEQUENCE, because it
  lost track of us), the partition *resets*: it waits until its in-flight request has come
  back, resolves under the old id any batch whose outcome is unknown (a retry under the old
  id is recognised as a duplicate if it was written), then moves to a newer producer id and
  renumbers its unacknowledged batches from 0, in their original order (KIP-360). Nothing
  acknowledged is sent again and nothing is reordered. Other partitions keep their producer
  id: the leader keeps state per producer id, so they need not start over.
"""

from __future__ import annotations

from dataclasses import dataclass

from data_plane.replication.producer_state import BATCHES_RETAINED

BATCHES_PER_REQUEST_MAX = BATCHES_RETAINED
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
    """Where a partition's numbering stands: the producer id it numbers under and the next
    sequence; `needs_reset` once that numbering cannot continue."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    needs_reset: bool = False

    def take(self, record_count: int) -> int:
        """The base sequence of the next batch of `record_count` records."""
        assert record_count > 0, record_count
        sequence = self.next_sequence
        self.next_sequence = (sequence + record_count) & SEQUENCE_MASK
        return sequence
