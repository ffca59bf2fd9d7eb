"""A consumer group's state as the latest value of each record key, and the one function that
applies a record to it (`apply`). Pure: no I/O, no clock.

Every change the coordinator makes is a list of `GroupRecord`s; the live state is the
records applied one by one (`apply`) and a coordinator that takes over a partition rebuilds
its groups with `replay`. Each record *sets* (or, with a ``None`` value, deletes) exactly one
piece of state named by its key, so the order of records with different keys does not
matter: replaying only the latest record of each key (what log compaction keeps) yields the
same state as replaying the whole log.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Iterable, Union

TopicPartition = tuple[str, int]
Partitions = frozenset  # of TopicPartition
NO_PARTITIONS: Partitions = frozenset()


class RecordType(enum.IntEnum):
    """The kinds of keys (the values of ``GroupRecordType`` in proto/group_records.proto)."""

    GROUP_EPOCH = 0
    MEMBER = 1
    TARGET_ASSIGNMENT = 2
    TARGET_EPOCH = 3
    CURRENT_ASSIGNMENT = 4
    OFFSET = 5


@dataclass(frozen=True)
class RecordKey:
    type: RecordType
    group_id: str
    member_id: str = ""
    topic: str = ""
    partition: int = 0


@dataclass(frozen=True)
class GroupEpoch:
    """The group epoch (bumped on every membership, subscription or topic change), the
    assignor, and the subscribed topics with their partition counts as resolved then: a
    change of those counts (a topic created or grown) bumps the epoch. ``empty_since_ms``:
    when the last member left (0 while it has members, or if it never had any), in the
    record so that a coordinator after failover counts the offsets retention from the same
    moment (Kafka's ``currentStateTimestamp``, KIP-211)."""

    epoch: int = 0
    assignor: str = ""
    subscribed_topics: tuple[tuple[str, int], ...] = ()
    empty_since_ms: int = 0


@dataclass(frozen=True)
class MemberSubscription:
    """Who a member is and what it subscribes to: sent on join and on change."""

    instance_id: str = ""
    client_id: str = ""
    client_host: str = ""
    rack_id: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str = ""
    rebalance_timeout_ms: int = 0
    principal: str = ""  # who subscribed: only topics it may DESCRIBE are resolved for it ("" from before principals were kept)


@dataclass(frozen=True)
class CurrentAssignment:
    """What a member owns (``assigned``) and what it was told to give up but has not yet
    reported revoked (``pending_revocation``): both are its own until then, and no other
    member may get them. ``member_epoch`` -2: a static member that left and may come back."""

    member_epoch: int
    previous_member_epoch: int
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS

    @property
    def owned(self) -> Partitions:
        return self.assigned | self.pending_revocation


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


RecordValue = Union[GroupEpoch, MemberSubscription, Partitions, int, CurrentAssignment, CommittedOffset, None]


@dataclass(frozen=True)
class GroupRecord:
    key: RecordKey
    value: RecordValue  # None: a tombstone

    def __post_init__(self) -> None:
        expected = _VALUE_TYPES[self.key.type]
        assert self.value is None or isinstance(self.value, expected), (self.key, self.value)


_VALUE_TYPES = {
    RecordType.GROUP_EPOCH: GroupEpoch,
    RecordType.MEMBER: MemberSubscription,
    RecordType.TARGET_ASSIGNMENT: frozenset,
    RecordType.TARGET_EPOCH: int,
    RecordType.CURRENT_ASSIGNMENT: CurrentAssignment,
    RecordType.OFFSET: CommittedOffset,
}


@dataclass
class Group:
    """One group: persisted state (compared) plus in-memory timers (not compared, not
    persisted: a new coordinator restarts every member's session clock when it loads) and
    where its offsets were last written (not compared: known only from the log)."""

    group_id: str
    metadata: GroupEpoch = GroupEpoch()
    target_epoch: int = 0
    members: dict[str, MemberSubscription] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    current: dict[str, CurrentAssignment] = field(default_factory=dict)
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    deleted: bool = False
    session_deadlines_ms: dict[str, int] = field(default_factory=dict, compare=False)
    revocation_deadlines_ms: dict[str, int] = field(default_factory=dict, compare=False)
    # Where in the log each committed offset was last written (committed or deleted): a
    # transaction's offset applied at its marker never replaces a later write (`txn_offsets`).
    offsets_at: dict[TopicPartition, int] = field(default_factory=dict, compare=False)

    def copy(self) -> Group:
        """A scratch copy an operation changes; swapped in once its records are durable."""
        return replace(
            self,
            members=dict(self.members),
            targets=dict(self.targets),
            current=dict(self.current),
            offsets=dict(self.offsets),
            session_deadlines_ms=dict(self.session_deadlines_ms),
            revocation_deadlines_ms=dict(self.revocation_deadlines_ms),
            offsets_at=dict(self.offsets_at),
        )

    @property
    def epoch(self) -> int:
        return self.metadata.epoch

    def member_of_instance(self, instance_id: str) -> str | None:
        for member_id, sub in self.members.items():
            if sub.instance_id == instance_id:
                return member_id
        return None

    def owner_of(self) -> dict[TopicPartition, str]:
        """Which member owns each owned partition (assigned or pending revocation)."""
        owners: dict[TopicPartition, str] = {}
        for member_id, current in self.current.items():
            for tp in current.owned:
                owners[tp] = member_id
        return owners

    def state(self) -> str:
        """empty, reconciling or stable (assignments are computed with each epoch, so a
        group is never seen 'assigning' between requests)."""
        if not self.members:
            return "empty"
        if self.target_epoch < self.epoch:
            return "assigning"
        for member_id, current in self.current.items():
            if current.member_epoch < 0:
                continue
            if (current.member_epoch != self.target_epoch or current.pending_revocation
                    or current.assigned != self.targets.get(member_id, NO_PARTITIONS)):
                return "reconciling"
        return "stable"


def apply(group: Group, record: GroupRecord) -> None:
    """Apply one record of ``group``'s to it: set, or with a tombstone delete, what the key names."""
    key, value = record.key, record.value
    assert key.group_id == group.group_id, (key, group.group_id)
    if key.type is RecordType.GROUP_EPOCH:
        if value is None:
            group.deleted = True
        else:
            group.metadata, group.deleted = value, False
    elif key.type is RecordType.TARGET_EPOCH:
        group.target_epoch = 0 if value is None else value
    elif key.type is RecordType.MEMBER:
        _set(group.members, key.member_id, value)
    elif key.type is RecordType.TARGET_ASSIGNMENT:
        _set(group.targets, key.member_id, value)
    elif key.type is RecordType.CURRENT_ASSIGNMENT:
        _set(group.current, key.member_id, value)
    else:
        _set(group.offsets, (key.topic, key.partition), value)


def _set(table: dict, key, value) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def replay(records: Iterable[GroupRecord], groups: dict[str, Group] | None = None) -> dict[str, Group]:
    """The groups a sequence of records describes (a coordinator loading its partition).
    A group appears with its first record and is gone after its GROUP_EPOCH tombstone."""
    groups = {} if groups is None else groups
    for record in records:
        gid = record.key.group_id
        group = groups.get(gid)
        if group is None:
            if record.value is None:
                continue  # deleting what was never there (compaction kept only the tombstone)
            group = groups[gid] = Group(gid)
        apply(group, record)
        if group.deleted:
            del groups[gid]
    return groups


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """(topic, sorted partitions) in topic order: how assignments go on the wire and in logs."""
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return [(topic, sorted(topics[topic])) for topic in sorted(topics)]
