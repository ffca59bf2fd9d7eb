"""One partition's open transactions, its last stable offset (LSO) and its aborted-transaction
index (KIP-98: Kafka's ``ProducerStateManager`` ongoing transactions and ``TransactionIndex``).

A transactional batch opens its producer's transaction on the partition at the batch's first
offset (if none is open); a marker (``data_plane.control_batch``) closes it. An abort adds
(producer id, first offset, marker offset) to the aborted index, which a read_committed reader
uses to drop the aborted records it receives. A closed transaction stays *unstable* until the
high watermark passes its marker, so a marker that a leader change could still lose never
lets a reader past the transaction's data (Kafka's "unreplicated transactions")::

    LSO = min(HW, first offset of every open transaction, first offset of every closed
              transaction whose marker is at or above HW)

**The log start bounds the LSO** (as Kafka's first unstable offset is bounded by the log
start): when retention or DeleteRecords moves the log start past a transaction's first
offset, the transaction holds the LSO at the log start at most, and an open transaction whose
data lies wholly below the log start no longer holds it at all (no reader can be served any of
its records; its marker still closes it, as an empty transaction, and a later batch of it
opens it again). Otherwise the LSO would stay below the log start, where no reader can be,
until the index is rebuilt from the log.

A read_committed Fetch is served only below the LSO. Pure: the partition shell feeds it every
batch it appends (leader and follower alike, so a new leader already holds it) and the high
watermark; on open it replays the log (``rebuild``). A marker with no open transaction on the
partition (the producer wrote nothing here) closes an empty one at the marker's own offset,
as Kafka does, so an abort still gets an index entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol


class TxnBatch(Protocol):
    """The fields of a stored batch header this index needs."""

    producer_id: int
    base_offset: int
    last_offset: int
    is_transactional: bool
    is_control: bool


@dataclass(frozen=True, order=True)
class AbortedTxn:
    """An aborted transaction's range on this partition: its data lies in
    [first_offset, last_offset), ``last_offset`` being the abort marker's offset."""

    first_offset: int
    last_offset: int
    producer_id: int


@dataclass(frozen=True)
class ClosedTxn:
    """A transaction whose marker is in the log but not yet below the high watermark."""

    first_offset: int
    marker_offset: int
    producer_id: int


def in_aborted(aborted: Iterable[AbortedTxn], producer_id: int, offset: int) -> bool:
    """Whether a transactional batch of ``producer_id`` at ``offset`` belongs to one of the
    ``aborted`` transactions: what a read_committed reader drops (control batches aside)."""
    return any(t.producer_id == producer_id and t.first_offset <= offset < t.last_offset for t in aborted)


@dataclass
class TransactionIndex:
    """Open transactions by producer, closed-but-unreplicated ones, and the aborted index."""

    open_first_offset: dict[int, int] = field(default_factory=dict)
    # The last offset of each open transaction's data (at most: after a truncation, the cut):
    # whether the log start has passed all of it.
    open_last_offset: dict[int, int] = field(default_factory=dict)
    unreplicated: list[ClosedTxn] = field(default_factory=list)
    aborted: list[AbortedTxn] = field(default_factory=list)  # in marker order
    next_offset: int = 0

    def on_batch(self, batch: TxnBatch, marker_commit: bool | None = None) -> None:
        """Follow one appended batch; for a control batch, ``marker_commit`` says whether its
        marker commits (True) or aborts (False): the shell decodes it (``control_batch``)."""
        assert batch.base_offset >= self.next_offset, (batch.base_offset, self.next_offset)
        assert batch.is_control == (marker_commit is not None), (batch.is_control, marker_commit)
        self.next_offset = batch.last_offset + 1
        if batch.is_control:
            first = self.open_first_offset.pop(batch.producer_id, batch.base_offset)
            self.open_last_offset.pop(batch.producer_id, None)
            aborted = not marker_commit
            self.unreplicated.append(ClosedTxn(first, batch.base_offset, batch.producer_id))
            if aborted:
                self.aborted.append(AbortedTxn(first, batch.base_offset, batch.producer_id))
        elif batch.is_transactional:
            self.open_first_offset.setdefault(batch.producer_id, batch.base_offset)
            self.open_last_offset[batch.producer_id] = batch.last_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget closed transactions whose marker the high watermark has passed."""
        self.unreplicated = [t for t in self.unreplicated if t.marker_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction not yet stable, or None."""
        firsts = [*self.open_first_offset.values(), *(t.first_offset for t in self.unreplicated if t.marker_offset >= high_watermark)]
        return min(firsts, default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: read_committed readers see only offsets below it."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(high_watermark, first)

    def aborted_between(self, from_offset: int, to_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [from_offset, to_offset): what a read_committed
        Fetch answer covering that range must list."""
        return [t for t in self.aborted if t.first_offset < to_offset and t.last_offset > from_offset]

    def truncate_to(self, offset: int) -> None:
        """The log was cut at ``offset``: markers at or past it are gone, so their transactions
        are open again (if their data stays), and data at or past it opened nothing. Exact
        when the cut is at or above the high watermark the index was last told (closed
        transactions below it are not remembered): below that, ``rebuild`` from the log."""
        self.open_first_offset = {p: f for p, f in self.open_first_offset.items() if f < offset}
        for t in self.unreplicated:
            if t.marker_offset >= offset and t.first_offset < offset:
                self.open_first_offset[t.producer_id] = min(t.first_offset, self.open_first_offset.get(t.producer_id, t.first_offset))
        self.open_last_offset = {p: min(self.open_last_offset.get(p, offset - 1), offset - 1) for p in self.open_first_offset}
        self.unreplicated = [t for t in self.unreplicated if t.marker_offset < offset]
        self.aborted = [t for t in self.aborted if t.last_offset < offset]
        self.next_offset = min(self.next_offset, offset)

    def remove_before(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords removed the log below ``log_start_offset``: aborted
        entries wholly below it are no longer needed by any reader, an open transaction with
        no data left no longer holds the LSO, and no transaction holds it below the log start."""
        self.aborted = [t for t in self.aborted if t.last_offset >= log_start_offset]
        gone = [p for p, last in self.open_last_offset.items() if last < log_start_offset]
        for producer_id in gone:
            del self.open_first_offset[producer_id], self.open_last_offset[producer_id]
        self.open_first_offset = {p: max(first, log_start_offset) for p, first in self.open_first_offset.items()}
        self.unreplicated = [ClosedTxn(max(t.first_offset, log_start_offset), t.marker_offset, t.producer_id)
                             for t in self.unreplicated if t.marker_offset >= log_start_offset]

    @classmethod
    def rebuild(cls, batches: Iterable[tuple[TxnBatch, bool | None]]) -> "TransactionIndex":
        """Replay the log's batches in offset order (each with ``marker_commit``) on open."""
        index = cls()
        for batch, marker_commit in batches:
            index.on_batch(batch, marker_commit)
        return index
