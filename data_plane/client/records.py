"""The values the client hands back to applications: delivery reports and consumed records."""

from __future__ import annotations

from typing import NamedTuple

# timestamp_type values, as in the batch header attributes and the proto's Record.
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class RecordMetadata(NamedTuple):
    """Where a produced record landed. `offset` is -1 with acks=0 (the broker never says)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One consumed record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: int
