"""What a controller decision returns: records to commit as one Raft entry, and the answer
to send once they have committed (or at once, when there are no records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from metadata_quorum.records import Record

R = TypeVar("R")


@dataclass(frozen=True)
class Decision(Generic[R]):
    records: tuple[Record, ...]
    response: R
