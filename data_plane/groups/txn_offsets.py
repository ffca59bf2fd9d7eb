"""Offsets committed inside a transaction (KIP-447), waiting for the transaction's outcome.
Pure: no I/O, no clock.

A transactional producer commits a group's offsets with TxnOffsetCommit: the coordinator
writes the OFFSET records to the group's `__consumer_offsets` partition as a transactional
batch of that producer, and they count only once the transaction's marker lands on that
partition. Until then they are *staged* here, per producer id, each with the offset of the
batch that carries it: a commit marker at offset ``m`` makes the records staged below ``m``
the groups' committed offsets (in log order, so a later commit of a partition wins), an
abort marker drops them. Records staged at or above ``m`` belong to the producer's next
transaction and stay.

**The latest write in the log wins.** A staged offset is applied only if the group's offset
of that partition was last written (committed or deleted) at an earlier log offset
(``Group.offsets_at``), as Kafka does: a plain OffsetCommit logged after the transactional
one, but before the marker, stays. That is also what log compaction keeps (the latest
record of each key), so a coordinator replaying a compacted log agrees with the live one.
For the same reason a deletion (an OFFSET tombstone: OffsetDelete, DeleteGroups) drops the
offsets staged for that partition before it, as Kafka does: they would otherwise bring a
deleted group back at the marker.

The live coordinator and a coordinator replaying the partition go through the same calls in
log order, so both end with the same groups and the same staged offsets (open transactions
stay staged after a replay).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

from data_plane.groups.state import Group, GroupRecord, RecordType, TopicPartition, replay


@dataclass(frozen=True)
class LoggedOffset:
    """An OFFSET record and the offset of the batch that carries it."""

    log_offset: int
    record: GroupRecord

    @property
    def partition(self) -> TopicPartition:
        return self.record.key.topic, self.record.key.partition


def note_logged(group: Group | None, logged: Iterable[LoggedOffset]) -> None:
    """Remember where each of ``group``'s offsets was last written (a tombstone too)."""
    if group is None:
        return
    for entry in logged:
        if entry.record.key.type is RecordType.OFFSET and entry.record.key.group_id == group.group_id:
            group.offsets_at[entry.partition] = entry.log_offset


@dataclass
class PendingTxnOffsets:
    """One offsets partition's staged offsets, by producer id, in log order."""

    by_producer: dict[int, list[LoggedOffset]] = field(default_factory=dict)

    def stage(self, producer_id: int, log_offset: int, records: Iterable[GroupRecord]) -> None:
        """A transactional batch of ``producer_id`` at ``log_offset`` carries ``records``. Kept
        in log order: two groups' rounds of one producer may become durable in either order."""
        staged = self.by_producer.setdefault(producer_id, [])
        at = bisect.bisect_right(staged, log_offset, key=lambda s: s.log_offset)
        for record in records:
            assert record.key.type is RecordType.OFFSET, record
        staged[at:at] = [LoggedOffset(log_offset, record) for record in records]
        if not staged:
            del self.by_producer[producer_id]

    def committed(self, producer_id: int, marker_offset: int, group_id: str, group: Group | None) -> list[LoggedOffset]:
        """What a commit marker of ``producer_id`` at ``marker_offset`` makes ``group_id``'s
        committed offsets, in log order: its staged records below the marker, except those the
        group has a later write of."""
        written_at = group.offsets_at if group is not None else {}
        return [s for s in self.by_producer.get(producer_id, ())
                if s.log_offset < marker_offset and s.record.key.group_id == group_id
                and s.log_offset > written_at.get(s.partition, -1)]

    def forget(self, producer_id: int, marker_offset: int, group_id: str) -> None:
        """Drop what the marker at ``marker_offset`` decided for ``group_id`` (applied or aborted)."""
        staged = [s for s in self.by_producer.get(producer_id, ())
                  if s.log_offset >= marker_offset or s.record.key.group_id != group_id]
        if staged:
            self.by_producer[producer_id] = staged
        else:
            self.by_producer.pop(producer_id, None)

    def groups_of(self, producer_id: int, marker_offset: int) -> set[str]:
        """The groups with offsets staged by ``producer_id`` below ``marker_offset``."""
        return {s.record.key.group_id for s in self.by_producer.get(producer_id, ()) if s.log_offset < marker_offset}

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` with an offset in an open transaction: OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them."""
        return {s.partition for staged in self.by_producer.values() for s in staged if s.record.key.group_id == group_id}

    def on_logged(self, group: Group | None, records: list[GroupRecord], log_offset: int) -> None:
        """A plain batch at ``log_offset`` was applied to ``group`` (live, or by a replay):
        remember where its offsets were written, and drop what its deletions delete."""
        logged = [LoggedOffset(log_offset, r) for r in records]
        note_logged(group, logged)
        deleted = {(r.key.group_id, r.key.topic, r.key.partition) for r in records if r.key.type is RecordType.OFFSET and r.value is None}
        if not deleted:
            return
        for producer_id, staged in list(self.by_producer.items()):
            kept = [s for s in staged if not (s.log_offset < log_offset and (s.record.key.group_id, *s.partition) in deleted)]
            if kept:
                self.by_producer[producer_id] = kept
            else:
                del self.by_producer[producer_id]

    def replay_plain(self, groups: dict[str, Group], records: list[GroupRecord], log_offset: int) -> None:
        """Replay a plain batch at ``log_offset``."""
        replay(records, groups)
        for group_id in sorted({r.key.group_id for r in records}):
            self.on_logged(groups.get(group_id), [r for r in records if r.key.group_id == group_id], log_offset)

    def on_marker(self, producer_id: int, marker_offset: int, commit: bool, groups: dict[str, Group]) -> None:
        """Replay a marker: apply (commit) or drop (abort) everything it decides, every group at once."""
        for group_id in sorted(self.groups_of(producer_id, marker_offset)):
            if commit:
                applied = self.committed(producer_id, marker_offset, group_id, groups.get(group_id))
                replay([s.record for s in applied], groups)
                note_logged(groups.get(group_id), applied)
            self.forget(producer_id, marker_offset, group_id)
