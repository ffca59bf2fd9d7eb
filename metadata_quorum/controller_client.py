"""Synchronous admin client for the controller quorum (used by the CLI, tests and tools).

Finds the active controller, follows NOT_CONTROLLER hints, retries unreachable controllers
with backoff until a deadline, and raises ControllerError carrying the server's guidance.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping, Sequence

import grpc

from metadata_quorum.controller_router import CONTROLLER_CHANNEL_OPTIONS, ControllerError, ControllerRouter, is_catching_up
from metadata_quorum.endpoints import Endpoint, grpc_address, parse_endpoints
from metadata_quorum.topic_admin import PARTITIONS_PER_ENTRY_MAX
from kraftlog_proto import controller_pb2 as pb
from kraftlog_proto import controller_pb2_grpc
from server_common.channel_pool import ChannelPool
from server_common.client_id import with_client_id
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from server_common.errors import ErrorCode

__all__ = ["ControllerClient", "ControllerError"]

_RETRIABLE_TRANSPORT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class ControllerClient:
    def __init__(self, controller_endpoints: str | Sequence[Endpoint], timeout_s: float = 30.0, rpc_timeout_s: float = 5.0,
                 security: ClientSecurity | None = None) -> None:
        """``security``: TLS files and credentials (None: ``KRAFTLOG_CLIENT_CONFIG``, else plaintext)."""
        endpoints = parse_endpoints(controller_endpoints) if isinstance(controller_endpoints, str) else list(controller_endpoints)
        self._router = ControllerRouter(endpoints)
        self.timeout_s = timeout_s
        self.rpc_timeout_s = rpc_timeout_s
        self.security = resolve_security(security)
        self._channels = ChannelPool(with_client_id(controller_pb2_grpc.ControllerServiceStub, "", self.security.call_metadata()), CONTROLLER_CHANNEL_OPTIONS,
                                     self.security.channel_credentials())

    def __enter__(self) -> "ControllerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channels.close()

    def _stub(self, endpoint: Endpoint) -> controller_pb2_grpc.ControllerServiceStub:
        return self._channels.stub(grpc_address(endpoint))

    def _call(self, method: str, request, write: bool = True, endpoint: Endpoint | None = None, rpc_timeout_s: float | None = None,
              after_cut_off: Callable | None = None):
        """One RPC, retried against other controllers until ``timeout_s``. Read RPCs are
        answered by any controller; write RPCs only by the active one. ``rpc_timeout_s``
        overrides the per-attempt deadline for a write known to take longer. When an attempt
        was cut off by its deadline (it may have been carried out) and a later one answers,
        the answer goes through ``after_cut_off``, which may read it as the retry it is."""
        rpc_timeout_s = rpc_timeout_s or self.rpc_timeout_s
        deadline = time.monotonic() + self.timeout_s
        last = "no controller tried yet"
        outcomes: dict[str, str] = {}  # each controller tried: how its last attempt ended
        cut_off = False
        tls_refused: set[str] = set()  # controllers whose certificate (or ours) failed: the others may still serve
        while True:
            target = endpoint or self._router.current()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, self._unanswered(method, last, outcomes))
            try:
                response = getattr(self._stub(target), method)(request, timeout=min(rpc_timeout_s, remaining))
            except grpc.RpcError as e:
                if e.code() not in _RETRIABLE_TRANSPORT:
                    raise ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{self._router.describe(target)} failed {method}: {e.code().name} {e.details()}") from None
                tls_advice = self.security.explain_failure(grpc_address(target), e.code(), e.details() or "")
                if tls_advice is not None:  # retrying this one cannot fix a TLS mismatch; another controller may answer
                    tls_refused.add(grpc_address(target))
                    if endpoint is not None or len(tls_refused) >= len(self._router.endpoints):
                        raise ControllerError(ErrorCode.BROKER_NOT_AVAILABLE, tls_advice) from None
                catching_up = is_catching_up(e)
                if catching_up:  # it answers, but holds a partial image yet: another controller may serve the read
                    last = e.details()
                    outcomes[grpc_address(target)] = "catching up with the metadata log"
                else:
                    last = tls_advice or f"{self._router.describe(target)}: {e.code().name}"
                    outcomes[grpc_address(target)] = "unreachable" if e.code() == grpc.StatusCode.UNAVAILABLE else e.code().name
                cut_off = cut_off or e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                if endpoint is not None:
                    raise ControllerError(ErrorCode.BROKER_NOT_AVAILABLE, last if catching_up else f"{last}; is it running?") from None
                time.sleep(min(self._router.on_unreachable(), max(0.0, deadline - time.monotonic())))
                continue
            if write and response.error_code == ErrorCode.NOT_CONTROLLER:
                last = response.error_message
                outcomes[grpc_address(target)] = "answers, not the active controller"
                time.sleep(min(self._router.on_not_controller(response.active_controller), max(0.0, deadline - time.monotonic())))
                continue
            self._router.on_success()
            if write and response.error_code != ErrorCode.NONE:
                raise ControllerError.from_wire(response.error_code, response.error_message)
            return after_cut_off(response) if cut_off and after_cut_off is not None else response

    def _unanswered(self, method: str, last: str, outcomes: dict[str, str]) -> str:
        """Why ``method`` timed out, saying so when too few controllers answer for a quorum."""
        text = f"{method} got no answer within {self.timeout_s:.0f} s ({last})"
        voters = len(self._router.endpoints)
        unreachable = sorted(address for address, outcome in outcomes.items() if outcome == "unreachable")
        if voters > 1 and len(unreachable) > voters // 2:
            return (f"{text}: {len(unreachable)} of the {voters} controllers do not answer ({', '.join(unreachable)}), so there is no "
                    f"quorum to elect an active controller (it needs {voters // 2 + 1}); start the stopped controllers "
                    "(`kraftlog cluster up` starts a local cluster's), then check with `kraftlog quorum describe`")
        return f"{text}; check the controllers with `kraftlog quorum describe`"

    @staticmethod
    def _raise_failed(results: Iterable) -> None:
        failed = [r for r in results if r.error_code != ErrorCode.NONE]
        if failed:
            raise ControllerError.from_wire(failed[0].error_code, "; ".join(f"{r.name}: {r.error_message}" for r in failed))

    # ---- topics

    def create_topics(self, topics: Sequence[tuple[str, int, int, Mapping[str, str]]], validate_only: bool = False) -> list[pb.TopicResult]:
        """(name, partitions, replication factor, configs) each; raises if any topic failed."""
        request = pb.CreateTopicsRequest(
            topics=[pb.CreateTopicsRequest.Topic(name=n, num_partitions=p, replication_factor=rf, configs=dict(c)) for n, p, rf, c in topics],
            validate_only=validate_only,
        )
        # A large creation commits in several Raft entries: give each attempt time for all of
        # them. An attempt cut off anyway may have created the topics; its retry then reads
        # TOPIC_ALREADY_EXISTS for a topic of the very shape asked for as success.
        entries = sum(-(-p // PARTITIONS_PER_ENTRY_MAX) for _, p, _, _ in topics)
        response = self._call("CreateTopics", request, rpc_timeout_s=self.rpc_timeout_s * max(1, entries),
                              after_cut_off=retried_create_answer)
        self._raise_failed(response.topics)
        return list(response.topics)

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None) -> str:
        """Create one topic; returns its topic id."""
        return self.create_topics([(name, partitions, replication_factor, configs or {})])[0].topic_id

    def delete_topics(self, names: Sequence[str]) -> list[pb.TopicResult]:
        response = self._call("DeleteTopics", pb.DeleteTopicsRequest(names=list(names)))
        self._raise_failed(response.topics)
        return list(response.topics)

    def create_partitions(self, total_counts: Mapping[str, int], validate_only: bool = False) -> list[pb.TopicResult]:
        """Grow each topic to the given total number of partitions."""
        request = pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsRequest.Topic(name=n, total_count=c) for n, c in total_counts.items()], validate_only=validate_only)
        response = self._call("CreatePartitions", request)
        self._raise_failed(response.topics)
        return list(response.topics)

    def alter_configs(self, topic: str, set_configs: Mapping[str, str] | None = None, delete_keys: Sequence[str] = (), validate_only: bool = False) -> pb.TopicResult:
        """Incrementally set and delete (return to default) topic config overrides."""
        ops = [pb.AlterConfigsRequest.Op(key=k, value=v, op=pb.AlterConfigsRequest.SET) for k, v in (set_configs or {}).items()]
        ops += [pb.AlterConfigsRequest.Op(key=k, op=pb.AlterConfigsRequest.DELETE) for k in delete_keys]
        response = self._call("AlterConfigs", pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(name=topic, ops=ops)], validate_only=validate_only))
        self._raise_failed(response.topics)
        return response.topics[0]

    def describe_configs(self, topics: Sequence[str] = ()) -> dict[str, list[pb.ConfigEntry]]:
        """Every config key of each topic (all topics when none given) with its effective value."""
        response = self._call("DescribeConfigs", pb.DescribeConfigsRequest(topics=list(topics)), write=False)
        self._raise_failed(response.topics)
        return {t.name: list(t.entries) for t in response.topics}

    def elect_leaders(self, partitions: Mapping[str, Sequence[int]] | None = None, unclean: bool = False) -> list[pb.PartitionState]:
        """Preferred (default) or unclean election for the given partitions (all when None;
        a topic with no numbers: all its partitions); per-partition outcomes are returned,
        ELECTION_NOT_NEEDED included."""
        kind = pb.ElectLeadersRequest.UNCLEAN if unclean else pb.ElectLeadersRequest.PREFERRED
        return list(self._call("ElectLeaders", pb.ElectLeadersRequest(election_type=kind, topics=_selection(partitions))).partitions)

    def alter_partition_reassignments(self, targets: Mapping[tuple[str, int], Sequence[int] | None]) -> list[pb.PartitionState]:
        """Start (or replace) the reassignment of each (topic, partition) to its target
        replicas, preferred leader first; None cancels. Per-partition outcomes are returned:
        the state once committed (adding/removing replicas while in progress), or an error."""
        items = [
            pb.AlterPartitionReassignmentsRequest.Reassignment(topic=t, partition=p, replicas=None if r is None else pb.BrokerIdList(ids=list(r)))
            for (t, p), r in targets.items()
        ]
        return list(self._call("AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(reassignments=items)).partitions)

    def list_partition_reassignments(self, partitions: Mapping[str, Sequence[int]] | None = None) -> list[pb.PartitionState]:
        """Partitions with a reassignment in progress (of the given ones, else all)."""
        return list(self._call("ListPartitionReassignments", pb.ListPartitionReassignmentsRequest(topics=_selection(partitions)), write=False).partitions)

    # ---- client quotas

    def alter_client_quotas(self, entity: tuple[str | None, str | None], set_values: Mapping[str, float] | None = None,
                            remove_keys: Sequence[str] = ()) -> None:
        """Set and remove quota values of one (user, client id) entity: None leaves a dimension
        out, "" is its default (docs/quotas.md); raises ControllerError if refused."""
        ops = [pb.AlterClientQuotasRequest.Op(key=k, value=v) for k, v in (set_values or {}).items()]
        ops += [pb.AlterClientQuotasRequest.Op(key=k, remove=True) for k in remove_keys]
        entry = pb.AlterClientQuotasRequest.Entry(entity=pb.ClientQuotaEntity(user=entity[0], client_id=entity[1]), ops=ops)
        response = self._call("AlterClientQuotas", pb.AlterClientQuotasRequest(entries=[entry]))
        failed = [r for r in response.entries if r.error_code != ErrorCode.NONE]
        if failed:
            raise ControllerError.from_wire(failed[0].error_code, failed[0].error_message)

    def describe_client_quotas(self, user: str | None = None, client_id: str | None = None) -> pb.DescribeClientQuotasResponse:
        """Entities with quotas and their values (only those naming exactly ``user`` /
        ``client_id`` when given; "" is the default)."""
        return self._call("DescribeClientQuotas", pb.DescribeClientQuotasRequest(user=user, client_id=client_id), write=False)

    # ---- cluster

    def describe_cluster(self) -> pb.DescribeClusterResponse:
        """Brokers (with fencing state), topics and partitions, controllers, the active one."""
        return self._call("DescribeCluster", pb.DescribeClusterRequest(), write=False)

    def add_controller(self, controller_id: int, host: str, raft_port: int, grpc_port: int, catch_up_timeout_s: float = 30.0) -> pb.QuorumChangeResponse:
        """Make a running observer (a controller started with --join) a voter once it has caught up."""
        request = pb.AddControllerRequest(controller_id=controller_id, host=host, raft_port=raft_port, grpc_port=grpc_port,
                                          catch_up_timeout_ms=int(catch_up_timeout_s * 1000))
        return self._call("AddController", request, rpc_timeout_s=catch_up_timeout_s + self.rpc_timeout_s)

    def remove_controller(self, controller_id: int) -> pb.QuorumChangeResponse:
        """Remove a voter or an observer (the active controller hands over first)."""
        return self._call("RemoveController", pb.RemoveControllerRequest(controller_id=controller_id), rpc_timeout_s=3 * self.rpc_timeout_s)

    def describe_quorum(self) -> list[pb.QuorumMember]:
        """One row per voter, each taken from that voter's own answer (state, term, commit,
        applied), with match index and lag from the leader's; unreachable voters are marked
        by state 'unreachable'."""
        answers: dict[int, pb.DescribeQuorumResponse] = {}
        asked: set[str] = set()
        pending = [grpc_address(e) for e in self._router.endpoints]
        while pending:  # the configured controllers, then members they name (added controllers, observers)
            address = pending.pop(0)
            if address in asked:
                continue
            asked.add(address)
            host, _, port = address.rpartition(":")
            try:
                answer = self._call("DescribeQuorum", pb.DescribeQuorumRequest(), write=False, endpoint=(-1, host, int(port)))
            except ControllerError:
                continue
            answers[answer.answering_controller_id] = answer
            pending += [m.grpc_address for m in answer.members if m.grpc_address not in asked]
        if not answers:
            raise ControllerError(ErrorCode.BROKER_NOT_AVAILABLE, "no controller answered DescribeQuorum; are they running at " + ", ".join(f"{h}:{p}" for _, h, p in self._router.endpoints) + "?")
        leader = next((a for a in answers.values() if a.leader_id == a.answering_controller_id), None)
        rows = []
        for template in (leader or next(iter(answers.values()))).members:  # the leader's directory names the members
            own = answers.get(template.controller_id)
            own_row = next((m for m in own.members if m.controller_id == template.controller_id), None) if own else None
            row = pb.QuorumMember()
            row.CopyFrom(own_row or template)
            row.role = template.role  # as the leader's directory says
            if own is None:
                row.state, row.connected = "unreachable", False
            seen = next((m for m in leader.members if m.controller_id == row.controller_id), None) if leader is not None else None
            if seen is not None and row.controller_id != leader.answering_controller_id:  # None: not (or no longer) in the leader's directory
                row.match_index, row.lag = seen.match_index, seen.lag
            rows.append(row)
        return rows


def retried_create_answer(response: pb.CreateTopicsResponse) -> pb.CreateTopicsResponse:
    """The answer to a retried CreateTopics: a topic answered TOPIC_ALREADY_EXISTS with its
    id (the controller names the id only when the topic has exactly the partition count and
    replication factor asked for, see ``topic_admin.create_topics``) was created by the
    attempt that was cut off, so it counts as created."""
    out = pb.CreateTopicsResponse()
    out.CopyFrom(response)
    for result in out.topics:
        if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and result.topic_id:
            result.error_code, result.error_message = ErrorCode.NONE, ""
    return out


def _selection(partitions: Mapping[str, Sequence[int]] | None) -> list[pb.ElectLeadersRequest.TopicPartitions]:
    """Topic -> partition numbers (empty: all of the topic's) as the requests carry them."""
    return [pb.ElectLeadersRequest.TopicPartitions(topic=t, partitions=list(p)) for t, p in (partitions or {}).items()]
