"""An in-process, in-memory stand-in for a group coordinator, so the consumer's group
shell (heartbeat thread, reconciliation in poll, commits, rediscovery) is tested without
processes.

Just enough of KIP-848: members join with epoch 0 and get a round-robin share of every
partition of the topics they subscribe to; a partition is handed to its new owner only
once no other member owns it or was last sent it; each assignment change bumps the member's epoch;
a stale epoch is FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID; commits check
the member epoch (admin commits only to an empty group). ListGroups, DescribeGroups and
DeleteGroups answer for the one group it holds, named ``group_id``. Faults: ``not_coordinator`` answers
that many calls NOT_COORDINATOR; ``forget(member_id)`` drops a member (as a session timeout);
``unstable_answers`` answers that many OffsetFetch calls with require_stable
UNSTABLE_OFFSET_COMMIT for every partition (offsets in an open transaction), and
``require_stable_seen`` records each OffsetFetch's flag.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from data_plane.client.group_membership import from_topic_partitions, to_topic_partitions
from kraftlog_proto import common_pb2, group_pb2, group_pb2_grpc


@dataclass
class FakeMember:
    epoch: int
    topics: tuple[str, ...]
    owned: frozenset = frozenset()
    sent: frozenset | None = None
    target: frozenset = frozenset()
    previous_epoch: int = -1  # a heartbeat may still carry it (it crossed the answer with the new one)


@dataclass
class FakeCoordinator(group_pb2_grpc.GroupCoordinatorServicer):
    topics: dict[str, int]
    group_id: str = "g"
    members: dict[str, FakeMember] = field(default_factory=dict)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    epoch: int = 0
    not_coordinator: int = 0
    bump_before_commits: int = 0  # this many commits find the member's epoch just bumped (stale): a rebalance raced them
    unstable_answers: int = 0
    require_stable_seen: list[bool] = field(default_factory=list)
    address: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    ownership_log: list[dict] = field(default_factory=list)

    def start(self) -> grpc.Server:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        group_pb2_grpc.add_GroupCoordinatorServicer_to_server(self, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.address = f"127.0.0.1:{port}"
        return server

    def serve_on(self, server: grpc.Server, address: str) -> None:
        """Adds the coordinator to a fake broker's server (before it starts): one node, as
        every real broker also coordinates."""
        group_pb2_grpc.add_GroupCoordinatorServicer_to_server(self, server)
        self.address = address

    def forget(self, member_id: str) -> None:
        with self.lock:
            self.members.pop(member_id, None)
            self._rebalance()

    def FindCoordinator(self, request, context):
        _, port = self.address.rsplit(":", 1)
        return group_pb2.FindCoordinatorResponse(coordinators=[
            group_pb2.Coordinator(key=k, node_id=1, host="127.0.0.1", port=int(port)) for k in request.keys
        ])

    def _refuse(self):
        if self.not_coordinator > 0:
            self.not_coordinator -= 1
            return True
        return False

    def _rebalance(self) -> None:
        self.epoch += 1
        ids = sorted(self.members)
        all_tps = sorted({(t, p) for m in self.members.values() for t in m.topics for p in range(self.topics.get(t, 0))})
        for i, member_id in enumerate(ids):
            self.members[member_id].target = frozenset(tp for j, tp in enumerate(all_tps) if j % len(ids) == i)

    def ConsumerGroupHeartbeat(self, request, context):
        with self.lock:
            if self._refuse():
                return group_pb2.ConsumerGroupHeartbeatResponse(error_code=common_pb2.NOT_COORDINATOR)
            member = self.members.get(request.member_id)
            if request.member_epoch < 0:
                self.members.pop(request.member_id, None)
                self._rebalance()
                return group_pb2.ConsumerGroupHeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch)
            if request.member_epoch == 0:
                member = self.members[request.member_id] = FakeMember(0, tuple(request.subscribed_topic_names))
                self._rebalance()
            elif member is None:
                return group_pb2.ConsumerGroupHeartbeatResponse(error_code=common_pb2.UNKNOWN_MEMBER_ID)
            elif request.member_epoch not in (member.epoch, member.previous_epoch):
                return group_pb2.ConsumerGroupHeartbeatResponse(error_code=common_pb2.FENCED_MEMBER_EPOCH)
            if request.owned_changed:
                member.owned = from_topic_partitions(request.owned_partitions)
            others = {tp for mid, m in self.members.items() if mid != request.member_id for tp in m.owned | (m.sent or frozenset())}
            grant = frozenset(tp for tp in member.target if tp not in others or tp in member.owned)
            owners: dict = {}
            for mid, m in self.members.items():
                for tp in m.owned:
                    owners.setdefault(tp, []).append(mid)
            self.ownership_log.append(owners)
            answer = group_pb2.ConsumerGroupHeartbeatResponse(member_id=request.member_id, heartbeat_interval_ms=100)
            if grant != member.sent:
                member.sent = grant
                member.epoch = self.epoch
                answer.has_assignment = True
                answer.assignment.extend(to_topic_partitions(grant))
            answer.member_epoch = member.epoch
            return answer

    def OffsetCommit(self, request, context):
        with self.lock:
            if self._refuse():
                return group_pb2.OffsetCommitResponse(error_code=common_pb2.NOT_COORDINATOR)
            member = self.members.get(request.member_id)
            if request.member_epoch == -1 and not request.member_id:
                if self.members:
                    return group_pb2.OffsetCommitResponse(error_code=common_pb2.NON_EMPTY_GROUP)
            elif member is None:
                return group_pb2.OffsetCommitResponse(error_code=common_pb2.UNKNOWN_MEMBER_ID)
            elif self.bump_before_commits > 0 and request.member_epoch == member.epoch:
                self.bump_before_commits -= 1
                member.previous_epoch, member.epoch = member.epoch, member.epoch + 1
                return group_pb2.OffsetCommitResponse(error_code=common_pb2.STALE_MEMBER_EPOCH)
            elif request.member_epoch != member.epoch:
                return group_pb2.OffsetCommitResponse(error_code=common_pb2.STALE_MEMBER_EPOCH)
            for t in request.topics:
                for p in t.partitions:
                    self.offsets[(t.topic, p.partition)] = p.committed_offset
            return group_pb2.OffsetCommitResponse()

    def OffsetFetch(self, request, context):
        with self.lock:
            if self._refuse():
                return group_pb2.OffsetFetchResponse(error_code=common_pb2.NOT_COORDINATOR)
            self.require_stable_seen.append(request.require_stable)
            unstable = request.require_stable and self.unstable_answers > 0
            self.unstable_answers -= unstable
            wanted = from_topic_partitions(request.topics) or set(self.offsets)
            answer = group_pb2.OffsetFetchResponse()
            for topic in sorted({t for t, _ in wanted}):
                entry = answer.topics.add(topic=topic)
                for t, p in sorted(wanted):
                    if t == topic and unstable:
                        entry.partitions.add(partition=p, committed_offset=-1, committed_leader_epoch=-1,
                                             error_code=common_pb2.UNSTABLE_OFFSET_COMMIT)
                    elif t == topic:
                        entry.partitions.add(partition=p, committed_offset=self.offsets.get((t, p), -1), committed_leader_epoch=-1)
            return answer

    def ListGroups(self, request, context):
        with self.lock:
            if not self.members and not self.offsets:
                return group_pb2.ListGroupsResponse()
            state = "stable" if self.members else "empty"
            return group_pb2.ListGroupsResponse(groups=[group_pb2.ListedGroup(group_id=self.group_id, state=state, coordinator_id=1, member_count=len(self.members))])

    def DescribeGroups(self, request, context):
        with self.lock:
            answer = group_pb2.DescribeGroupsResponse()
            for group_id in request.group_ids:
                if group_id != self.group_id or not (self.members or self.offsets):
                    answer.groups.add(group_id=group_id, error_code=common_pb2.GROUP_ID_NOT_FOUND)
                    continue
                described = answer.groups.add(group_id=group_id, state="stable" if self.members else "empty", group_epoch=self.epoch,
                                              assignor="uniform", coordinator_id=1)
                for member_id, m in sorted(self.members.items()):
                    described.members.add(member_id=member_id, client_id="kraftlog-consumer", client_host="127.0.0.1", member_epoch=m.epoch,
                                          assignment=to_topic_partitions(m.owned), target_assignment=to_topic_partitions(m.target))
            return answer

    def DeleteGroups(self, request, context):
        with self.lock:
            answer = group_pb2.DeleteGroupsResponse()
            for group_id in request.group_ids:
                if self.members:
                    answer.results.add(group_id=group_id, error_code=common_pb2.NON_EMPTY_GROUP)
                else:
                    self.offsets.clear()
                    answer.results.add(group_id=group_id)
            return answer
