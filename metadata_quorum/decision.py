"""What a controller decision returns: records to commit (as one Raft entry, or as several
where the decision says a prefix may commit on its own), the answer to send once they
have committed (or at once, when there are no records), and what happened that an operator
wants to read (an unclean election, a fenced broker): decisions are pure and do not log,
the shell that carries a decision out (``ActiveController.write``) logs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Mapping, TypeVar

from metadata_quorum.records import Record

R = TypeVar("R")


@dataclass(frozen=True)
class Happened:
    """One thing a decision did, as the log line the shell writes for it."""

    level: Literal["info", "warning"]
    event: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision(Generic[R]):
    records: tuple[Record, ...]
    response: R
    # Indexes into ``records`` where another Raft entry starts; empty: one entry. Only a
    # decision whose every prefix (cut at these indexes) leaves a consistent image sets them.
    entry_starts: tuple[int, ...] = ()
    happened: tuple[Happened, ...] = ()  # in the order it happened; logged by the shell

    def entries(self) -> list[tuple[Record, ...]]:
        """The records, cut into the entries to commit one after another."""
        bounds = [0, *self.entry_starts, len(self.records)]
        return [self.records[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
