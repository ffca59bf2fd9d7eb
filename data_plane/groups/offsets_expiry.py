"""Committed offsets expire (Kafka's ``offsets.retention.minutes``, KIP-211) as a pure
decision: a group, the time, the retention and the group's partitions with offsets in open
transactions in; the records to write out. Pure: no I/O, the clock is passed in.

- **An empty group** (no members) loses all its offsets, and is then deleted as DeleteGroups
  deletes it (`offsets.delete_group`: tombstones for the offsets, then for the group), once
  the retention has passed since it became empty (``GroupEpoch.empty_since_ms``, written with
  the epoch that removed the last member) and since its last commit: an admin commit
  (``groups reset-offsets --execute``) to an empty group, or a group that never had members
  (only admin or transactional commits), keeps its offsets for the retention from then.
- **A group with members** keeps the offsets of the topics it subscribes to; those of topics
  it no longer subscribes to expire the retention after their commit (as Kafka does for
  KIP-848 consumer groups).
- **Offsets in an open transaction** never expire: a group with any is left alone until the
  transaction's marker lands (a commit then counts as its last commit).

The decision's records go through the group's ordinary write path, so a coordinator that
replays the partition after a failover finds the same groups.
"""

from __future__ import annotations

from typing import Collection

from data_plane.groups.changes import GroupChange
from data_plane.groups.offsets import delete_group
from data_plane.groups.state import Group, TopicPartition


def expire(group: Group, now_ms: int, retention_ms: int, unstable: Collection[TopicPartition]) -> GroupChange | None:
    """The change that expires what is due in ``group`` (``unstable``: its partitions with an
    offset in an open transaction); None when nothing is."""
    if unstable:
        return None
    if not group.members:
        last_commit = max((o.commit_timestamp_ms for o in group.offsets.values()), default=0)
        if now_ms < max(group.metadata.empty_since_ms, last_commit) + retention_ms:
            return None
        return delete_group(group, group.group_id)
    subscribed = {topic for topic, _ in group.metadata.subscribed_topics}
    due = sorted(tp for tp, o in group.offsets.items() if tp[0] not in subscribed and now_ms >= o.commit_timestamp_ms + retention_ms)
    if not due:
        return None
    change = GroupChange.of(group, group.group_id)
    for topic, partition in due:
        change.set_offset(topic, partition, None)
    return change
