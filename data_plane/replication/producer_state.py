"""Idempotent-producer deduplication for one partition (Kafka's `ProducerStateManager`).

An idempotent producer numbers its records per partition (int32 sequences that wrap to 0
after 2**31 - 1) and retries a batch with the same numbers, so the leader can tell a retry of
something already in the log from a new batch. Rules (KIP-98, `ProducerAppendInfo`):

- The last five batches of each producer are remembered (the producer keeps at most five in
  flight per partition). A batch matching one of them, same epoch and same sequence range,
  is a DUPLICATE: answer success with the original offsets, append nothing. Only the range
  (base sequence and record count) is compared, never the content: a resend with other
  records in the same range is taken for the original. One with the base sequence of a
  remembered batch but another record count is INVALID_RECORD: that sequence was written
  with a different count, so it is neither the original nor a batch that follows.
- Otherwise, with the same producer epoch, the batch must start right after the last
  sequence (OUT_OF_ORDER_SEQUENCE otherwise: a gap means a lost batch, and appending would
  reorder records).
- An older producer epoch is a zombie: INVALID_PRODUCER_EPOCH, or PRODUCER_FENCED for a
  transactional batch (as Kafka answers: a newer incarnation of its transactional id, or the
  end of its transaction, bumped the epoch). A newer epoch starts over at sequence 0 and
  forgets the older batches.
- A producer id with no remembered batches (new, or its batches were truncated or removed by
  retention) may start at any sequence, as in Kafka since KIP-360: its earlier batches can no
  longer be checked against, and the producer itself only resends unacknowledged batches.

The state must survive restarts and follow the log exactly: `snapshot`/`from_snapshot` give
a plain dict for a checkpoint file, `rebuild_from_batches` replays batch headers from the log
after the snapshot's `next_offset`, and `truncate_to` follows log truncation. Followers call
`on_appended` for every batch they replicate, so a new leader already holds the state.

A transaction marker (a control batch, base sequence -1) carries no sequence: `on_marker`
records it, and its producer epoch, when newer, becomes the producer's epoch with no batch
remembered (KIP-890: the coordinator bumps the epoch at each transaction's end, so a write of
the older epoch arriving late is refused as a zombie's, and the next one starts at sequence 0).
Open transactions and the LSO are `transaction_index`'s.

A producer id is remembered while the log holds its writes and it has written within
`producer.id.expiration.ms` (Kafka's rule, KIP-854): `remove_before` forgets producers whose
last batch and marker the log start has passed (retention, DeleteRecords), as a restart,
which rebuilds from the log start, would; `expire` forgets producers whose newest batch or
marker timestamp is that old, unless a transaction of theirs is open on the partition. A
forgotten producer that writes again is a new one (any sequence, KIP-360 above). Without
both, a partition written by many short-lived producers (a task per batch, a process per
request) would keep an entry for every producer id it ever saw until the broker restarts.

The group coordinator's transactional offset writes (KIP-447) carry the producer's id and
epoch but no sequence of the producer's own (the producer never numbered them): they are
checked with `check_epoch` alone, as Kafka checks coordinator appends, and remembered like
any batch (a batch the log holds is never refused on replay or on a follower).
"""

from dataclasses import dataclass
from typing import Any, Container, Iterable, Protocol, Sequence

from server_common.errors import ErrorCode

NO_PRODUCER_ID = -1
SEQUENCE_MAX = 2**31 - 1
BATCHES_RETAINED = 5
SNAPSHOT_VERSION = 1


class BatchHeader(Protocol):
    """The fields of a stored batch header that producer state needs."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    record_count: int
    is_control: bool
    is_transactional: bool
    max_timestamp: int


@dataclass(frozen=True)
class BatchMetadata:
    """One remembered batch: its sequence range and where it landed in the log."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class Append:
    """Append the batch, then call `on_appended` with its offsets."""


@dataclass(frozen=True)
class Duplicate:
    """A retry of a batch already in the log: answer success with these offsets."""

    first_offset: int
    last_offset: int


GAP = "it does not follow the producer's last batch on this partition: an earlier batch was lost; restart the producer"


@dataclass(frozen=True)
class Rejected:
    """Refuse the batch; nothing is appended. ``reason``: why, for the error message."""

    error: ErrorCode
    reason: str = GAP


SequenceCheck = Append | Duplicate | Rejected
APPEND = Append()


def last_sequence(base_sequence: int, record_count: int) -> int:
    """Sequence of a batch's last record; sequences wrap from SEQUENCE_MAX to 0."""
    return (base_sequence + record_count - 1) % (SEQUENCE_MAX + 1)


def next_sequence(sequence: int) -> int:
    return 0 if sequence == SEQUENCE_MAX else sequence + 1


def _resized(written: BatchMetadata, record_count: int) -> str:
    """Why a batch reusing a written batch's base sequence with another count is refused."""
    count = written.last_offset - written.first_offset + 1
    return (f"a batch with base sequence {written.first_seq} was already written with {count} record(s) (offsets "
            f"{written.first_offset}..{written.last_offset}), this one has {record_count}: a resend must carry exactly the "
            "records of the original batch (duplicates are recognised by sequence range, not content); new records take "
            "new sequences")


@dataclass
class _ProducerEntry:
    epoch: int
    batches: list[BatchMetadata]
    marker_offset: int = -1  # the marker this epoch came from (-1: it came from a batch)
    last_timestamp_ms: int = -1  # the newest max timestamp of its batches and markers: for `expire`


class ProducerState:
    """Per-partition producer state: epoch and last five batches per producer id."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}
        self.next_offset = 0

    def check(
        self, producer_id: int, producer_epoch: int, base_sequence: int, record_count: int, transactional: bool = False
    ) -> SequenceCheck:
        """Decide what to do with an incoming batch, before appending it."""
        assert record_count >= 1, record_count
        if producer_id == NO_PRODUCER_ID:
            return APPEND
        assert producer_epoch >= 0 and 0 <= base_sequence <= SEQUENCE_MAX
        entry = self._producers.get(producer_id)
        if entry is None:
            return APPEND
        if producer_epoch < entry.epoch:
            return Rejected(ErrorCode.PRODUCER_FENCED if transactional else ErrorCode.INVALID_PRODUCER_EPOCH)
        if producer_epoch > entry.epoch:
            return APPEND if base_sequence == 0 else Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
        last_seq = last_sequence(base_sequence, record_count)
        for batch in entry.batches:
            if batch.first_seq == base_sequence and batch.last_seq == last_seq:
                return Duplicate(batch.first_offset, batch.last_offset)
            if batch.first_seq == base_sequence:
                return Rejected(ErrorCode.INVALID_RECORD, _resized(batch, record_count))
        if not entry.batches:  # the epoch came from a marker: the producer starts over at 0
            return APPEND if base_sequence == 0 else Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
        if base_sequence != next_sequence(entry.batches[-1].last_seq):
            return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
        return APPEND

    def epoch_of(self, producer_id: int) -> int | None:
        """The newest epoch this partition has seen of ``producer_id`` (None: none remembered)."""
        entry = self._producers.get(producer_id)
        return entry.epoch if entry is not None else None

    def check_epoch(self, producer_id: int, producer_epoch: int) -> SequenceCheck:
        """A coordinator's write for a producer: refused only for an older epoch (a zombie)."""
        assert producer_id >= 0 and producer_epoch >= 0, (producer_id, producer_epoch)
        entry = self._producers.get(producer_id)
        return Rejected(ErrorCode.INVALID_PRODUCER_EPOCH) if entry is not None and producer_epoch < entry.epoch else APPEND

    def check_run(self, batches: Sequence[BatchHeader]) -> SequenceCheck:
        """Check the batches one produce request carries for this partition, in order.

        New batches must each continue the one before (same producer and epoch, next
        sequence), since none of them is in the log yet. A retried request must consist of
        retries only: a duplicate followed by new batches is refused, because the answer
        carries one base offset for all of them (the client sends retries alone)."""
        assert batches
        first = batches[0]
        verdict = self.check(first.producer_id, first.producer_epoch, first.base_sequence, first.record_count,
                             first.is_transactional)
        if isinstance(verdict, Rejected):
            return verdict
        if isinstance(verdict, Duplicate):
            last = verdict
            for b in batches[1:]:
                again = self.check(b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)
                if isinstance(again, Rejected) and again.error is ErrorCode.INVALID_RECORD:
                    return again
                if not isinstance(again, Duplicate):
                    return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
                last = again
            return Duplicate(verdict.first_offset, last.last_offset)
        previous = {first.producer_id: first}
        for b in batches[1:]:
            before = previous.get(b.producer_id)
            if b.producer_id == NO_PRODUCER_ID:
                continue
            if before is None:
                if self.check(b.producer_id, b.producer_epoch, b.base_sequence, b.record_count) != APPEND:
                    return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
            elif b.producer_epoch != before.producer_epoch or b.base_sequence != next_sequence(
                last_sequence(before.base_sequence, before.record_count)
            ):
                return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE)
            previous[b.producer_id] = b
        return APPEND

    def on_appended(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        first_offset: int,
        last_offset: int,
        max_timestamp_ms: int = -1,
    ) -> None:
        """Remember a batch now in the log (leader after `check` said APPEND, or follower
        after replicating it). Offsets are dense within a batch, so its record count is
        `last_offset - first_offset + 1`; ``max_timestamp_ms`` is the batch header's, what
        `expire` measures a producer's idleness by."""
        assert first_offset >= self.next_offset, (first_offset, self.next_offset)
        assert last_offset >= first_offset, (first_offset, last_offset)
        self.next_offset = last_offset + 1
        if producer_id == NO_PRODUCER_ID:
            return
        record_count = last_offset - first_offset + 1
        verdict = self.check(producer_id, producer_epoch, base_sequence, record_count)
        entry = self._producers.get(producer_id)
        if entry is None or verdict != APPEND or producer_epoch > entry.epoch:
            # The log is the truth: a batch a leader accepted after it lost this producer's
            # history (KIP-360) starts the history over instead of breaking replication.
            entry = self._producers[producer_id] = _ProducerEntry(producer_epoch, [])
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, max_timestamp_ms)
        entry.batches.append(
            BatchMetadata(
                base_sequence, last_sequence(base_sequence, record_count), first_offset, last_offset
            )
        )
        del entry.batches[:-BATCHES_RETAINED]

    def on_marker(self, producer_id: int, producer_epoch: int, offset: int, timestamp_ms: int = -1) -> None:
        """Remember a transaction marker now in the log at ``offset`` (one record)."""
        assert offset >= self.next_offset and producer_id >= 0, (offset, self.next_offset, producer_id)
        self.next_offset = offset + 1
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = self._producers[producer_id] = _ProducerEntry(producer_epoch, [], offset)
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or after `offset` (the log was truncated there, at a batch
        boundary). A producer left with no remembered batch is forgotten entirely, unless the
        marker its epoch came from is still in the log: that epoch then stands, with no batch
        (its next batch starts at sequence 0, and an older epoch's late write is still a
        zombie's)."""
        for producer_id, entry in list(self._producers.items()):
            for batch in entry.batches:
                assert not batch.first_offset < offset <= batch.last_offset, (
                    "truncation inside a batch", offset, batch)
            entry.batches = [b for b in entry.batches if b.last_offset < offset]
            if not entry.batches and not 0 <= entry.marker_offset < offset:
                del self._producers[producer_id]
        self.next_offset = min(self.next_offset, offset)

    def remove_before(self, log_start_offset: int) -> None:
        """The log start moved to ``log_start_offset`` (retention, DeleteRecords): forget each
        producer whose last batch and marker lie below it (Kafka's `evictUnretainedProducers`).
        A producer with a batch at or past it keeps all it remembers."""
        self._producers = {
            producer_id: entry for producer_id, entry in self._producers.items()
            if (entry.batches and entry.batches[-1].last_offset >= log_start_offset) or entry.marker_offset >= log_start_offset
        }

    def expire(self, now_ms: int, expiration_ms: int, open_transactions: Container[int]) -> list[int]:
        """Forget the producers that have written nothing here for ``expiration_ms`` (their newest
        batch or marker timestamp), except those in ``open_transactions``: a transaction still
        open on the partition needs its producer's epoch to fence a zombie. Answers the ids
        forgotten."""
        expired = [producer_id for producer_id, entry in self._producers.items()
                   if now_ms - entry.last_timestamp_ms >= expiration_ms and producer_id not in open_transactions]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    def __len__(self) -> int:
        """How many producer ids this partition remembers."""
        return len(self._producers)

    def rebuild_from_batches(self, headers: Iterable[BatchHeader]) -> None:
        """Replay batch headers read from the log, in offset order, from `next_offset` on."""
        for header in headers:
            if header.is_control:
                self.on_marker(header.producer_id, header.producer_epoch, header.base_offset, header.max_timestamp)
                continue
            self.on_appended(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )

    def snapshot(self) -> dict[str, Any]:
        """A plain, JSON-ready dict for the broker's producer-state checkpoint."""
        return {
            "version": SNAPSHOT_VERSION,
            "next_offset": self.next_offset,
            "producers": {
                str(pid): {
                    "epoch": entry.epoch,
                    "batches": [
                        [b.first_seq, b.last_seq, b.first_offset, b.last_offset]
                        for b in entry.batches
                    ],
                    **({"marker_offset": entry.marker_offset} if entry.marker_offset >= 0 else {}),
                    **({"last_timestamp_ms": entry.last_timestamp_ms} if entry.last_timestamp_ms >= 0 else {}),
                }
                for pid, entry in sorted(self._producers.items())
            },
        }

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> "ProducerState":
        """Inverse of `snapshot`; then `rebuild_from_batches` from `next_offset`."""
        assert snapshot["version"] == SNAPSHOT_VERSION, snapshot.get("version")
        state = cls()
        state.next_offset = int(snapshot["next_offset"])
        for pid, entry in snapshot["producers"].items():
            batches = [BatchMetadata(*map(int, b)) for b in entry["batches"]]
            assert len(batches) <= BATCHES_RETAINED, (pid, batches)  # none: the epoch came from a marker
            assert all(b.last_offset < state.next_offset for b in batches), (pid, batches)
            state._producers[int(pid)] = _ProducerEntry(int(entry["epoch"]), batches, int(entry.get("marker_offset", -1)),
                                                        int(entry.get("last_timestamp_ms", -1)))
        return state
