"""`GroupChange`: one operation's scratch copy of a group and the records it emits. Every
change goes through `emit`, which applies the record to the scratch copy at once, so the
state an operation leaves behind is by construction what replaying its records gives."""

from __future__ import annotations

from dataclasses import dataclass, field

from data_plane.groups.state import (
    CommittedOffset,
    CurrentAssignment,
    Group,
    GroupEpoch,
    GroupRecord,
    MemberSubscription,
    Partitions,
    RecordKey,
    RecordType,
    apply,
)


@dataclass
class GroupChange:
    group: Group  # the scratch copy
    records: list[GroupRecord] = field(default_factory=list)  # to write
    applied: list[GroupRecord] = field(default_factory=list)  # applied, already in the log (a commit marker's offsets)

    @classmethod
    def of(cls, group: Group | None, group_id: str) -> GroupChange:
        return cls(group.copy() if group is not None else Group(group_id))

    def emit(self, type_: RecordType, value, member_id: str = "", topic: str = "", partition: int = 0) -> None:
        record = GroupRecord(RecordKey(type_, self.group.group_id, member_id, topic, partition), value)
        apply(self.group, record)
        self.records.append(record)

    def set_epoch(self, metadata: GroupEpoch) -> None:
        self.emit(RecordType.GROUP_EPOCH, metadata)

    def set_member(self, member_id: str, subscription: MemberSubscription) -> None:
        self.emit(RecordType.MEMBER, subscription, member_id)

    def set_target(self, member_id: str, partitions: Partitions) -> None:
        self.emit(RecordType.TARGET_ASSIGNMENT, partitions, member_id)

    def set_target_epoch(self, epoch: int) -> None:
        self.emit(RecordType.TARGET_EPOCH, epoch)

    def set_current(self, member_id: str, current: CurrentAssignment) -> None:
        self.emit(RecordType.CURRENT_ASSIGNMENT, current, member_id)

    def set_offset(self, topic: str, partition: int, committed: CommittedOffset | None) -> None:
        self.emit(RecordType.OFFSET, committed, topic=topic, partition=partition)

    def stage_offset(self, topic: str, partition: int, committed: CommittedOffset) -> None:
        """An offset committed inside a transaction: written now, not applied (the scratch copy
        stays as it was); the commit marker applies it (`txn_offsets`)."""
        self.records.append(GroupRecord(RecordKey(RecordType.OFFSET, self.group.group_id, topic=topic, partition=partition), committed))

    def apply_logged(self, records: list[GroupRecord]) -> None:
        """Apply records that are in the log already (staged offsets a commit marker made
        committed): nothing more to write."""
        for record in records:
            apply(self.group, record)
        self.applied.extend(records)

    @property
    def changed(self) -> bool:
        return bool(self.records or self.applied)

    def remove_member(self, member_id: str) -> None:
        """Tombstones for every key of the member; its partitions are free at once."""
        for type_ in (RecordType.CURRENT_ASSIGNMENT, RecordType.TARGET_ASSIGNMENT, RecordType.MEMBER):
            self.emit(type_, None, member_id)
        self.group.session_deadlines_ms.pop(member_id, None)
        self.group.revocation_deadlines_ms.pop(member_id, None)

    def delete_group(self) -> None:
        """Tombstones for every committed offset, then for the group itself (no members left)."""
        assert not self.group.members, self.group.group_id
        for topic, partition in sorted(self.group.offsets):
            self.set_offset(topic, partition, None)
        self.emit(RecordType.TARGET_EPOCH, None)
        self.emit(RecordType.GROUP_EPOCH, None)

    def assignment_changes(self) -> list[tuple[str, CurrentAssignment | None]]:
        """The members whose current assignment this change set, for the assignment log."""
        return [(r.key.member_id, r.value) for r in self.records if r.key.type is RecordType.CURRENT_ASSIGNMENT]
