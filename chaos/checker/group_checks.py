"""The consumer-group checks: a group's history in, every broken promise out.

Pure code (no clock, no I/O), like the rest of the checker, and fed with its own operations
(``chaos/group_history.py``): what the producers had acknowledged, what each member's polls
returned, the committed offsets an observer saw over time and those standing at the end,
and the coordinator's ownership history (who was given which partitions, who reported
giving them up, who was removed).

- ``group-undelivered``: an acknowledged record no member of the group ever read: the group
  promises at-least-once delivery from committed offsets.
- ``commit-backwards``: a partition's committed offset went down between two observations
  taken one after the other (only an admin reset may do that, and the workload makes none).
- ``double-owner``: a partition held by two members at once, from either record: the
  coordinator's (it gave a partition to a member while another still held it: given it and
  not yet reported it gone nor been removed) or the members' own (one took a partition on
  before another had released it). The second catches a coordinator that wrongly believes a
  revocation happened, which its own record cannot show.
- ``commit-behind-read``: after the run, a partition's committed offset is below the offset
  after the last record the group read from it (members close cleanly at the end, so
  everything they read was committed).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from chaos.checker.findings import Finding, Findings
from chaos.group_history import CommittedObservation, GroupPoll, MemberOwnershipChange, OwnershipEvent

GROUP_KINDS: dict[str, str] = {
    "group-undelivered": "an acknowledged record was never delivered to any member of the group",
    "commit-backwards": "a partition's committed offset went down between two observations, one after the other",
    "double-owner": "the coordinator gave a partition to a member while another member of the group still held it",
    "commit-behind-read": "after the run, a partition's committed offset is below what the group had read of it",
}


@dataclass(frozen=True)
class GroupAnomaly(Finding):
    kinds: ClassVar[dict[str, str]] = GROUP_KINDS


def undelivered(acked: dict[int, dict[int, str]], polls: Iterable[GroupPoll]) -> Iterator[GroupAnomaly]:
    """``acked``: partition -> offset -> value of every acknowledged send."""
    read: dict[int, set[int]] = {}
    for poll in polls:
        for partition, records in poll.reads.items():
            read.setdefault(partition, set()).update(offset for offset, _ in records)
    for partition, offsets in sorted(acked.items()):
        missing = sorted(set(offsets) - read.get(partition, set()))
        if missing:
            yield GroupAnomaly(
                "group-undelivered", partition, f"{len(missing)} acknowledged records of partition {partition} never read by the group",
                {"offsets": missing[:20], "count": len(missing)},
            )


def commits_backwards(observations: Iterable[CommittedObservation]) -> Iterator[GroupAnomaly]:
    """Observations in the order taken (each after the previous one answered)."""
    highest: dict[int, tuple[int, float]] = {}
    for obs in sorted(observations, key=lambda o: o.at_s):
        for partition, offset in sorted(obs.offsets.items()):
            before = highest.get(partition)
            if before is not None and offset < before[0]:
                yield GroupAnomaly(
                    "commit-backwards", partition,
                    f"committed offset of partition {partition} went from {before[0]} (at {before[1]:.3f}s) to {offset} (at {obs.at_s:.3f}s)",
                    {"from": before[0], "to": offset, "from_s": before[1], "to_s": obs.at_s},
                )
            if before is None or offset > before[0]:
                highest[partition] = (offset, obs.at_s)


def double_owners(events: Iterable[OwnershipEvent]) -> Iterator[GroupAnomaly]:
    """Replays the coordinator's ownership history in its order. A member holds a partition
    from being given it until it reports owning less without it, or is removed."""
    given: dict[str, frozenset[int]] = {}
    owned: dict[str, frozenset[int]] = {}
    for event in sorted(events, key=lambda e: e.seq):
        member = event.member
        if event.kind == "removed":
            given.pop(member, None)
            owned.pop(member, None)
            continue
        if event.kind == "owned":
            owned[member] = event.partitions
            continue
        held_before = given.get(member, frozenset()) | owned.get(member, frozenset())
        for partition in sorted(event.partitions - held_before):
            holders = sorted(m for m in set(given) | set(owned) if m != member and partition in given.get(m, frozenset()) | owned.get(m, frozenset()))
            if holders:
                yield GroupAnomaly(
                    "double-owner", partition,
                    f"partition {partition} given to {member} (event {event.seq}, epoch {event.epoch}) while {', '.join(holders)} still held it",
                    {"member": member, "holders": holders, "seq": event.seq, "epoch": event.epoch},
                )
        given[member] = event.partitions


def double_owners_seen_by_members(changes: Iterable[MemberOwnershipChange]) -> Iterator[GroupAnomaly]:
    """Replays what members say they owned, in time order (at one instant, releases first):
    a member taking on a partition another member has not released is a double owner, whatever
    the coordinator's own record says (a coordinator that believes a revocation it never saw
    records no overlap)."""
    holders: dict[int, set[str]] = {}
    for change in sorted(changes, key=lambda c: (c.at_s, not c.released)):
        for partition in change.released:
            holders.get(partition, set()).discard(change.member)
        for partition in sorted(change.gained):
            others = sorted(holders.setdefault(partition, set()) - {change.member})
            if others:
                yield GroupAnomaly(
                    "double-owner", partition,
                    f"partition {partition} taken on by {change.member} at {change.at_s:.3f}s while {', '.join(others)} had not released it",
                    {"member": change.member, "holders": others, "at_s": change.at_s, "source": "members"},
                )
            holders[partition].add(change.member)


def commits_behind_reads(final: CommittedObservation | None, polls: Iterable[GroupPoll]) -> Iterator[GroupAnomaly]:
    """The committed offsets standing after the run must reach past every record read."""
    read_upto: dict[int, int] = {}
    for poll in polls:
        for partition, records in poll.reads.items():
            if records:
                read_upto[partition] = max(read_upto.get(partition, 0), max(o for o, _ in records) + 1)
    committed = final.offsets if final is not None else {}
    for partition, upto in sorted(read_upto.items()):
        if committed.get(partition, -1) < upto:
            yield GroupAnomaly(
                "commit-behind-read", partition,
                f"partition {partition}: the group read up to offset {upto} but its committed offset is {committed.get(partition)}",
                {"read_upto": upto, "committed": committed.get(partition)},
            )


@dataclass
class GroupCheckResult(Findings):
    """A group run's findings, shaped like the records checker's ``CheckResult`` where the
    verdict, the CLI and the soak read it."""

    kinds: ClassVar[dict[str, str]] = GROUP_KINDS
    anomalies: list[GroupAnomaly]


def check_group(
    acked: dict[int, dict[int, str]], polls: list[GroupPoll], observations: list[CommittedObservation],
    final: CommittedObservation | None, ownership: list[OwnershipEvent], member_changes: list[MemberOwnershipChange] = (),
) -> list[GroupAnomaly]:
    """Every group check over one run."""
    return [
        *undelivered(acked, polls),
        *commits_backwards([*observations, *([final] if final else [])]),
        *double_owners(ownership),
        *double_owners_seen_by_members(member_changes),
        *commits_behind_reads(final, polls),
    ]
