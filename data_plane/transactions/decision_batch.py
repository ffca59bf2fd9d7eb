"""Group commit of a coordinator shard's decisions (pure): the decisions waiting while the
previous write replicated are made in arrival order, each on the metadata the earlier ones
left, and their records go to `__transaction_state` as one batch, one replication round trip
for all of them (Kafka's coordinator batches its log appends the same way).

The shell (coordinator.py) writes ``log`` acks=all, then applies it and answers every
decision; if the write fails, every decision of the batch is refused and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from data_plane.transactions.state_machine import Decision, TxnMetadata


class DecisionBatch:
    """Decisions on one shard's ids, to be made durable by one write, over ``ids`` (the
    shard's durable state, left untouched)."""

    def __init__(self, ids: Mapping[str, TxnMetadata]) -> None:
        self._ids = ids
        self._decided: dict[str, TxnMetadata] = {}  # each id's state after this batch's records so far
        self.log: list[TxnMetadata] = []
        self.decisions: list[Decision] = []

    def current(self, transactional_id: str) -> TxnMetadata | None:
        """The id's metadata as the batch's earlier decisions left it."""
        if transactional_id in self._decided:
            return self._decided[transactional_id]
        return self._ids.get(transactional_id)

    def add(self, decision: Decision) -> None:
        """Append a decision made on `current` of its id: its records follow the earlier ones."""
        self.decisions.append(decision)
        self.log.extend(decision.log)
        for meta in decision.log:
            self._decided[meta.transactional_id] = meta
