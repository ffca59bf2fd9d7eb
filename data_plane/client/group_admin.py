"""Administering consumer groups: list, describe (with lag), delete, and reset offsets.

ListGroups goes to every broker (each knows only the groups it coordinates); the rest goes
to the group's coordinator. Describe joins three answers: the coordinator's view of the
group (members and their assignments), its committed offsets, and the partition leaders'
log end offsets (the high watermark), so lag is ``log end - committed`` per partition.

Resetting offsets is planned first (``plan_reset``, pure) and committed only on request,
as an admin commit (no member id, member epoch -1) that the coordinator accepts only
while the group has no members: a live member would overwrite the reset at its next commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from data_plane.client.channels import REQUEST_TIMEOUT_MS_DEFAULT, broker_channels
from data_plane.client.errors import KraftlogError, from_error_code
from data_plane.client.every_broker import ask_every_broker
from data_plane.client.group_coordinator_link import CoordinatorLink, coordinator_channels, raise_commit_errors
from data_plane.client.group_membership import from_topic_partitions, offset_commit_request, to_topic_partitions
from data_plane.client.metadata_cache import MetadataCache, TopicPartition
from data_plane.client.offset_lookup import EARLIEST, LATEST, list_offsets
from kraftlog_proto import group_pb2
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from server_common.errors import ErrorCode

RETRY_BACKOFF_S = 0.1
RESET_KINDS = ("to-earliest", "to-latest", "to-datetime", "to-offset", "shift-by")


class ListedGroup(NamedTuple):
    group_id: str
    state: str
    coordinator_id: int
    member_count: int
    protocol: str = "consumer"  # "consumer" (KIP-848) or "classic" (Kafka clients' JoinGroup/SyncGroup)


class PartitionLag(NamedTuple):
    """One partition of a described group: its owner (member id, "" when none), committed
    offset (None: nothing committed), log end offset (the high watermark) and lag."""

    topic: str
    partition: int
    member_id: str
    committed: int | None
    log_end: int | None
    lag: int | None


@dataclass
class GroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator_id: int
    members: list[group_pb2.GroupMember] = field(default_factory=list)
    partitions: list[PartitionLag] = field(default_factory=list)
    protocol: str = "consumer"  # "consumer" (KIP-848) or "classic" (Kafka clients' JoinGroup/SyncGroup)


class ResetStep(NamedTuple):
    """One partition of a reset plan: from ``current`` (None: nothing committed) to ``target``."""

    topic: str
    partition: int
    current: int | None
    target: int


def plan_reset(
    kind: str, value: int | None, current: dict[TopicPartition, int | None], log_start: dict[TopicPartition, int],
    log_end: dict[TopicPartition, int], by_time: dict[TopicPartition, int] | None = None,
) -> list[ResetStep]:
    """The new committed offset of each partition of ``current``, clamped to [log start,
    log end] (an offset outside it would only be reset again by the consumer). ``by_time``:
    for "to-datetime", the first offset at or after the time (-1: none, so the log end)."""
    if kind not in RESET_KINDS:
        raise ValueError(f"unknown reset {kind!r}: use one of {RESET_KINDS}")
    steps = []
    for tp in sorted(current):
        start, end = log_start[tp], log_end[tp]
        if kind == "to-earliest":
            target = start
        elif kind == "to-latest":
            target = end
        elif kind == "to-offset":
            target = value
        elif kind == "to-datetime":
            found = by_time[tp]
            target = end if found < 0 else found
        else:
            base = current[tp]
            if base is None:
                raise ValueError(f"--shift-by: the group has no committed offset for {tp[0]}-{tp[1]}; use --to-earliest/--to-offset instead")
            target = base + value
        steps.append(ResetStep(tp[0], tp[1], current[tp], min(max(target, start), end)))
    return steps


class GroupAdmin:
    """Group administration against the brokers; use as a context manager."""

    def __init__(
        self, bootstrap: str | Iterable[str], *, request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT, security: ClientSecurity | None = None,
    ) -> None:
        """``security``: TLS files and credentials; None: the config named by ``KRAFTLOG_CLIENT_CONFIG``, else plaintext."""
        self.security = resolve_security(security)
        self._metadata = MetadataCache(bootstrap, self.security)
        self._brokers = broker_channels(self.security)
        self._coordinators = coordinator_channels(self.security)
        self._timeout_s = request_timeout_ms / 1000.0

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._brokers.close()
        self._coordinators.close()

    def link(self, group_id: str) -> CoordinatorLink:
        return CoordinatorLink(group_id, self._metadata, self._coordinators, self._timeout_s, RETRY_BACKOFF_S)

    def coordinator_stub(self, group_id: str, timeout_s: float = 10.0):
        """(GroupCoordinator stub of the group's coordinator, its link): for callers that
        drive the RPCs themselves (``kraftlog perf commit``)."""
        link = self.link(group_id)
        return self._coordinators.stub(link.find(timeout_s)), link

    def list_groups(self) -> tuple[list[ListedGroup], dict[int, str]]:
        """Every group of the cluster, from every live broker (each lists those it
        coordinates), and the brokers that did not answer (id -> error): their groups are
        missing, but the rest is still worth showing while a broker is down."""
        request = group_pb2.ListGroupsRequest()
        answers, unanswered = ask_every_broker(self._metadata, self._brokers.stub, self._timeout_s,
                                               lambda a: self._coordinators.stub(a).ListGroups.future(request, timeout=self._timeout_s), "ListGroups")
        groups = {g.group_id: ListedGroup(g.group_id, g.state, g.coordinator_id or broker_id, g.member_count, g.protocol or "consumer")
                  for broker_id, answer in answers.items() for g in answer.groups}
        return sorted(groups.values()), unanswered

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group's state and members, and per partition its owner, committed offset,
        log end offset and lag (partitions with a committed offset or an owner)."""
        link = self.link(group_id)
        answer = link.call(
            "DescribeGroups", group_pb2.DescribeGroupsRequest(group_ids=[group_id]),
            error_of=lambda a: a.groups[0].error_code if a.groups else ErrorCode.NONE,
        )
        described = next((g for g in answer.groups if g.group_id == group_id), None)
        if described is None:
            raise KraftlogError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id!r}: the coordinator did not describe it")
        if described.error_code != ErrorCode.NONE:
            raise from_error_code(described.error_code, described.error_message, f"group {group_id!r}")
        committed = self.committed_offsets(group_id, link=link)
        owners = {tp: m.member_id for m in described.members for tp in from_topic_partitions(m.assignment)}
        tps = sorted(set(committed) | set(owners))
        ends = {tp: a.offset for tp, a in list_offsets(self._metadata, self._brokers, {tp: LATEST for tp in tps}, self._timeout_s).items()} if tps else {}
        rows = []
        for tp in tps:
            c, end = committed.get(tp), ends.get(tp)
            rows.append(PartitionLag(tp[0], tp[1], owners.get(tp, ""), c, end, None if c is None or end is None else max(end - c, 0)))
        return GroupDescription(
            group_id, described.state, described.group_epoch, described.assignment_epoch, described.assignor,
            described.coordinator_id or link.coordinator_id, list(described.members), rows, described.protocol or "consumer",
        )

    def committed_offsets(self, group_id: str, tps: Iterable[TopicPartition] = (), link: CoordinatorLink | None = None) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``tps``; default every one it has)."""
        link = link or self.link(group_id)
        answer = link.call("OffsetFetch", group_pb2.OffsetFetchRequest(group_id=group_id, topics=to_topic_partitions(tps)))
        if answer.error_code != ErrorCode.NONE:
            raise from_error_code(answer.error_code, answer.error_message, f"OffsetFetch of group {group_id!r}")
        return {
            (t.topic, p.partition): p.committed_offset
            for t in answer.topics for p in t.partitions
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
        }

    def delete_group(self, group_id: str) -> None:
        """Deletes a group without members and its committed offsets."""
        answer = self.link(group_id).call(
            "DeleteGroups", group_pb2.DeleteGroupsRequest(group_ids=[group_id]),
            error_of=lambda a: a.results[0].error_code if a.results else ErrorCode.NONE,
        )
        for result in answer.results:
            if result.error_code != ErrorCode.NONE:
                raise from_error_code(result.error_code, result.error_message, f"group {group_id!r}")

    def plan_reset(self, group_id: str, partitions: list[TopicPartition], kind: str, value: int | None) -> list[ResetStep]:
        """What a reset would commit for ``partitions`` (``value``: the offset, the shift, or
        for to-datetime the time in ms)."""
        committed = self.committed_offsets(group_id, partitions)
        current = {tp: committed.get(tp) for tp in partitions}
        start = {tp: a.offset for tp, a in list_offsets(self._metadata, self._brokers, {tp: EARLIEST for tp in partitions}, self._timeout_s).items()}
        end = {tp: a.offset for tp, a in list_offsets(self._metadata, self._brokers, {tp: LATEST for tp in partitions}, self._timeout_s).items()}
        by_time = None
        if kind == "to-datetime":
            by_time = {tp: a.offset for tp, a in list_offsets(self._metadata, self._brokers, {tp: value for tp in partitions}, self._timeout_s).items()}
        return plan_reset(kind, value, current, start, end, by_time)

    def execute_reset(self, group_id: str, steps: list[ResetStep]) -> None:
        """Commits a plan as an admin commit; the coordinator refuses it (NON_EMPTY_GROUP)
        while the group has members."""
        request = offset_commit_request(group_id, "", -1, {(s.topic, s.partition): (s.target, -1) for s in steps})
        raise_commit_errors(self.link(group_id).call("OffsetCommit", request), f"reset of group {group_id!r}")
