"""Committed offsets and group deletion as pure decisions: a group and a request in, records
and per-partition answers out.

A commit from a member is checked against the member's epoch (Kafka's rule for consumer
groups): an unknown member is refused with UNKNOWN_MEMBER_ID, a newer epoch than the
member's with FENCED_MEMBER_EPOCH and an older one with STALE_MEMBER_EPOCH, so a member that
was fenced or lost its partitions cannot move the group's offsets. An admin commit (empty
member id, epoch -1) is accepted only while the group has no members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from data_plane.groups.changes import GroupChange
from data_plane.groups.membership import Refused
from data_plane.groups.state import CommittedOffset, Group, TopicPartition
from server_common.errors import ErrorCode

METADATA_BYTES_MAX = 4096  # Kafka's offset.metadata.max.bytes
ADMIN_EPOCH = -1


@dataclass(frozen=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


PartitionErrors = dict[TopicPartition, tuple[ErrorCode, str]]


def commit(group: Group | None, group_id: str, member_id: str, member_epoch: int, offsets: Iterable[OffsetToCommit],
           now_ms: int) -> tuple[GroupChange, PartitionErrors]:
    """Check the committer, then each partition; raises `Refused` for a group-level refusal."""
    accepted, errors = _checked(group, group_id, member_id, member_epoch, offsets, now_ms)
    change = _created(group, group_id)
    for (topic, partition), committed in accepted:
        change.set_offset(topic, partition, committed)
    return change, errors


def create_for_txn_commit(group: Group | None, group_id: str, member_id: str, member_epoch: int) -> GroupChange:
    """What an admin TxnOffsetCommit to a group that does not exist writes first, as a plain
    record of its own: the group's epoch record, as an admin `commit` creates the (empty)
    group. The transactional batch cannot carry it (it counts only at the marker, and holds
    offsets only), and without it the commit marker would bring the group into being (or back,
    after a DeleteGroups logged before the commit) with offsets and no epoch record. Nothing
    when the group exists or the commit is not an admin one (`txn_commit` decides those)."""
    if group is not None or member_id or member_epoch != ADMIN_EPOCH:
        return GroupChange.of(group, group_id)
    return _created(group, group_id)


def _created(group: Group | None, group_id: str) -> GroupChange:
    change = GroupChange.of(group, group_id)
    if group is None:
        change.set_epoch(change.group.metadata)  # an admin commit creates the (empty) group
    return change


def txn_commit(group: Group | None, group_id: str, member_id: str, member_epoch: int, offsets: Iterable[OffsetToCommit],
               now_ms: int) -> tuple[GroupChange, PartitionErrors]:
    """TxnOffsetCommit (KIP-447): the same checks as `commit` (a fenced or stale member cannot
    commit inside a transaction either), but the records are only written, not applied: they
    count once the transaction's commit marker lands (`txn_offsets`). The group exists by now
    (`create_for_txn_commit` ran just before); if its write failed, the commit is refused as
    retriable rather than staged for a group without an epoch record."""
    accepted, errors = _checked(group, group_id, member_id, member_epoch, offsets, now_ms)
    if group is None:
        raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {group_id} could not be created for the transactional commit "
                      "(its write failed): nothing was written; retry")
    change = GroupChange.of(group, group_id)
    for (topic, partition), committed in accepted:
        change.stage_offset(topic, partition, committed)
    return change, errors


def _checked(group: Group | None, group_id: str, member_id: str, member_epoch: int, offsets: Iterable[OffsetToCommit],
             now_ms: int) -> tuple[list[tuple[TopicPartition, CommittedOffset]], PartitionErrors]:
    """The offsets to commit and every partition's answer; raises `Refused` for the whole request."""
    if not group_id:
        raise Refused(ErrorCode.INVALID_GROUP_ID, "group_id is empty: name the group")
    _check_committer(group, group_id, member_id, member_epoch)
    accepted: list[tuple[TopicPartition, CommittedOffset]] = []
    errors: PartitionErrors = {}
    for item in offsets:
        tp = (item.topic, item.partition)
        if item.offset < 0 or item.partition < 0:
            errors[tp] = (ErrorCode.INVALID_COMMIT_OFFSET, f"{item.topic}-{item.partition}: offset {item.offset} is invalid: commit the next offset to read (>= 0)")
        elif len(item.metadata.encode()) > METADATA_BYTES_MAX:
            errors[tp] = (ErrorCode.OFFSET_METADATA_TOO_LARGE, f"{item.topic}-{item.partition}: metadata is over {METADATA_BYTES_MAX} bytes: shorten it")
        else:
            accepted.append((tp, CommittedOffset(item.offset, item.leader_epoch, item.metadata, now_ms)))
            errors[tp] = (ErrorCode.NONE, "")
    return accepted, errors


def _check_committer(group: Group | None, group_id: str, member_id: str, member_epoch: int) -> None:
    if not member_id and member_epoch == ADMIN_EPOCH:
        if group is not None and group.members:
            raise Refused(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has {len(group.members)} members: an admin commit "
                          "(no member id, epoch -1) needs an empty group; stop its consumers first")
        return
    current = group.current.get(member_id) if group is not None else None
    if current is None:
        raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"member '{member_id}' is not in group {group_id}: rejoin with member epoch 0 "
                      "(an admin commit sends an empty member id and epoch -1)")
    if member_epoch > current.member_epoch:
        raise Refused(ErrorCode.FENCED_MEMBER_EPOCH, f"member epoch {member_epoch} is newer than the member's ({current.member_epoch}): rejoin with member epoch 0")
    if member_epoch < current.member_epoch:
        raise Refused(ErrorCode.STALE_MEMBER_EPOCH, f"member epoch {member_epoch} is older than the member's ({current.member_epoch}): "
                      "heartbeat to learn the current epoch and assignment, then commit again")


def fetch(group: Group | None, partitions: Iterable[TopicPartition] | None,
          unstable: Iterable[TopicPartition] = ()) -> dict[TopicPartition, CommittedOffset | None]:
    """Committed offsets of ``partitions`` (None: every committed offset of the group, and
    every ``unstable`` partition, one with an offset in an open transaction)."""
    offsets = group.offsets if group is not None else {}
    if partitions is None:
        return {tp: offsets.get(tp) for tp in sorted({*offsets, *unstable})}
    return {tp: offsets.get(tp) for tp in partitions}


def delete_offsets(group: Group | None, group_id: str, partitions: Iterable[TopicPartition],
                   subscribed: Mapping[str, int]) -> tuple[GroupChange, PartitionErrors]:
    """Delete committed offsets of partitions of topics the group does not subscribe to."""
    if group is None:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist here: check the name (kraftlog groups list)")
    change = GroupChange.of(group, group_id)
    errors: PartitionErrors = {}
    for topic, partition in partitions:
        if topic in subscribed:
            errors[(topic, partition)] = (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, f"group {group_id} consumes {topic}: stop its consumers "
                                          "(or unsubscribe them from the topic) before deleting its offsets")
            continue
        if (topic, partition) in change.group.offsets:
            change.set_offset(topic, partition, None)
        errors[(topic, partition)] = (ErrorCode.NONE, "")
    return change, errors


def delete_group(group: Group | None, group_id: str) -> GroupChange:
    if group is None:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist here: check the name (kraftlog groups list)")
    if group.members:
        raise Refused(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has {len(group.members)} members: stop its consumers "
                      "(or wait for their session timeout) and delete it again")
    change = GroupChange.of(group, group_id)
    change.delete_group()
    return change
