"""The operations of a consumer-group chaos run, for ``chaos/checker/group_checks.py``.

Like ``chaos/history.py``'s, they are plain data that a test can write by hand and a run can
save and check again. Times are seconds since the run started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Read = tuple[int, str]  # (offset, value)


@dataclass(frozen=True)
class GroupPoll:
    """One member's poll: what it returned per partition."""

    member: str
    invoke_s: float
    complete_s: float
    reads: dict[int, list[Read]] = field(default_factory=dict)


@dataclass(frozen=True)
class CommittedObservation:
    """The group's committed offsets per partition as one OffsetFetch answered them."""

    at_s: float
    offsets: dict[int, int]


@dataclass(frozen=True)
class MemberOwnershipChange:
    """What a member itself says it took on or gave up, timed on the machine's clock so that
    it errs on the safe side: ``gained`` is stamped once the partitions have their positions
    (after the coordinator's grant arrived), ``released`` when the member has stopped reading
    them (before it reports them gone), or when the run SIGKILLed it (long before its session
    expires and the coordinator may hand them on)."""

    at_s: float
    member: str
    gained: frozenset[int] = frozenset()
    released: frozenset[int] = frozenset()


@dataclass(frozen=True)
class OwnershipEvent:
    """One step of the coordinator's ownership history, in its order (``seq``): ``assigned``
    (the member was given exactly ``partitions``), ``owned`` (the member reported owning
    exactly ``partitions``) or ``removed`` (the member left, was fenced or timed out)."""

    seq: int
    member: str
    kind: Literal["assigned", "owned", "removed"]
    partitions: frozenset[int] = frozenset()
    epoch: int = -1
