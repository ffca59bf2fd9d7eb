"""The isolation level on the wire (Fetch, Consume, ListOffsets): checking the request's field
and answering a read_committed read's aborted transactions (docs/transactions.md)."""

from __future__ import annotations

from typing import Iterable

from data_plane.broker.errors import MalformedRequest
from data_plane.replication.transaction_index import AbortedTxn
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
