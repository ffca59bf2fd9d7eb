"""The isolation level on the wire (Fetch, Consume, ListOffsets): checking the request's field
and answering a read_committed read's aborted transactions (docs/transactions.md)."""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from data_plane import record_batch
from data_plane.partition_errors import MalformedRequest
from data_plane.replication.transaction_index import AbortedTxn, in_aborted
from kraftlog_proto import broker_pb2


def read_committed(level: int) -> bool:
    """Whether a request's ``isolation_level`` asks for read_committed; MalformedRequest
    unless it is READ_UNCOMMITTED (0) or READ_COMMITTED (1)."""
    if level not in (broker_pb2.READ_UNCOMMITTED, broker_pb2.READ_COMMITTED):
        raise MalformedRequest(f"isolation_level must be READ_UNCOMMITTED (0) or READ_COMMITTED (1), got {level}")
    return level == broker_pb2.READ_COMMITTED


def aborted_to_wire(aborted: Iterable[AbortedTxn]) -> list[broker_pb2.AbortedTransaction]:
    return [broker_pb2.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset, last_offset=t.last_offset)
            for t in aborted]


def readable_bytes(data: bytes, aborted: Sequence[AbortedTxn]) -> int:
    """The bytes of the batches in ``data`` a consumer gets records from: neither control
    batches (transaction markers) nor batches of the ``aborted`` transactions (read_committed;
    empty under read_uncommitted). What a Fetch's ``min_bytes`` counts: an answer holding only
    a marker must not end the long poll at once with nothing for the consumer."""
    return sum(header.batch_length for _, header in record_batch.iter_headers(data)
               if not header.is_control and not (header.is_transactional and in_aborted(aborted, header.producer_id, header.base_offset)))


class ReadEnd(NamedTuple):
    """Where a partition continues after a read, and the leader epoch of the last batch read
    (-1 when nothing was read): the offset and epoch a consumer commits (KIP-320)."""

    offset: int
    leader_epoch: int


def read_end(data: bytes, fetch_offset: int) -> ReadEnd:
    """Where a partition continues after whole batches read from ``fetch_offset``."""
    end = ReadEnd(fetch_offset, -1)
    for _, header in record_batch.iter_headers(data):
        end = ReadEnd(max(header.next_offset, fetch_offset), header.leader_epoch)
    return end
