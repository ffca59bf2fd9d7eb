"""The client's view of the cluster: which broker leads each partition, and where brokers are.

Filled from Metadata answers (any broker gives them) and corrected between refreshes by the
leader hints that NOT_LEADER_OR_FOLLOWER answers carry. Readers get an immutable
`ClusterSnapshot`, replaced whole under a lock, so the producer's application thread and
its sender thread never see a half-applied update. The refresh functions at the bottom are
the only I/O here: they ask the known brokers, then the bootstrap list, one at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

import grpc

from data_plane.client.channels import controller_service_name, listed_services
from data_plane.client.errors import KraftlogError, error_code_name
from server_common.client_security import ClientSecurity
from kraftlog_proto import broker_pb2, common_pb2
from server_common.errors import ErrorCode, error_code_name

TopicPartition = tuple[str, int]

NO_LEADER = -1


class PartitionInfo(NamedTuple):
    """A partition's leadership as of some Metadata answer or leader hint."""

    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


class LeaderEndpoint(NamedTuple):
    """Where to send produce and fetch requests for a partition, and the epoch to send."""

    broker_id: int
    address: str
    leader_epoch: int


class ClusterSnapshot(NamedTuple):
    """An immutable view of the cluster; a refresh builds a new one."""

    brokers: dict[int, str]  # broker id -> "host:port"
    partitions: dict[TopicPartition, PartitionInfo]
    partition_counts: dict[str, int]
    topic_ids: dict[str, str]
    topic_errors: dict[str, tuple[str, str]]  # topic -> (ErrorCode name, the cluster's message), for topics it refused
    controllers: tuple[str, ...]
    cluster_id: str
    metadata_offset: int


EMPTY_SNAPSHOT = ClusterSnapshot({}, {}, {}, {}, {}, (), "", -1)


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[str]:
    """Splits "host:port,host:port" (or takes a list) into addresses, checking each has a port."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    addresses = [item.strip() for item in items if item.strip()]
    if not addresses:
        raise ValueError("bootstrap is empty: pass 'host:port[,host:port...]' of one or more brokers")
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap address {address!r} is not host:port")
    return addresses


def endpoint_address(endpoint: common_pb2.BrokerEndpoint) -> str:
    """"host:port" for a BrokerEndpoint (brackets IPv6 hosts for gRPC)."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{host}:{endpoint.port}"


class MetadataCache:
    """Thread-safe holder of the current `ClusterSnapshot` plus what needs refreshing.

    `wanted_topics` are the topics this client produces to or consumes from; refreshes ask
    only for them (an empty set for the brokers alone: a producer that has not sent yet asks
    for no topic, not for every one of a cluster's partitions). `stale` turns on when an answer
    says the view is wrong; whoever drives I/O refreshes and clears it.
    """

    def __init__(self, bootstrap: str | Iterable[str], security: ClientSecurity = ClientSecurity()) -> None:
        """``security``: how this client connects, used to explain a refused connection."""
        self.bootstrap: list[str] = parse_bootstrap(bootstrap)
        self.security = security
        self.snapshot: ClusterSnapshot = EMPTY_SNAPSHOT
        self.wanted_topics: set[str] = set()
        self.stale = True
        self.last_refresh_ms = 0.0
        self._lock = threading.Lock()

    # ------------------------------------------------------------ reads

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions, or None when the topic is not (yet) known."""
        return self.snapshot.partition_counts.get(topic)

    def leader(self, tp: TopicPartition) -> LeaderEndpoint | None:
        """The partition leader's id, address and epoch; None when unknown or offline."""
        snapshot = self.snapshot
        info = snapshot.partitions.get(tp)
        if info is None or info.leader_id == NO_LEADER:
            return None
        address = snapshot.brokers.get(info.leader_id)
        if address is None:
            return None
        return LeaderEndpoint(info.leader_id, address, info.leader_epoch)

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The epoch to put in requests for `tp`; -1 (unchecked) when unknown."""
        info = self.snapshot.partitions.get(tp)
        return -1 if info is None else info.leader_epoch

    def topic_error(self, topic: str) -> str | None:
        """The error the cluster gave for `topic` in the last answer, if any."""
        error = self.snapshot.topic_errors.get(topic)
        return None if error is None else error[0]

    def topic_failure(self, topic: str) -> KraftlogError | None:
        """The error to raise for `topic`: one the cluster gave that waiting will not cure
        (UNKNOWN_TOPIC_OR_PARTITION may be a topic being created), with the cluster's message
        (for TOPIC_AUTHORIZATION_FAILED: the principal, the operation and the `kraftlog acls
        create` that would allow it)."""
        error = self.snapshot.topic_errors.get(topic)
        if error is None or error[0] == "UNKNOWN_TOPIC_OR_PARTITION":
            return None
        code, message = error
        return KraftlogError(code, f"topic {topic!r}" + (f": {message}" if message else ""), retriable=False)

    def refresh_addresses(self) -> Iterator[str]:
        """Brokers to ask for metadata: known ones first (they are current), then bootstrap."""
        seen: set[str] = set()
        for address in [*self.snapshot.brokers.values(), *self.bootstrap]:
            if address not in seen:
                seen.add(address)
                yield address

    def request(self) -> broker_pb2.MetadataRequest:
        """The Metadata request for the topics this client cares about (the brokers alone while
        it names none)."""
        wanted = sorted(self.wanted_topics)
        return broker_pb2.MetadataRequest(topics=wanted, brokers_only=not wanted)

    # ------------------------------------------------------------ writes

    def want(self, topics: Iterable[str]) -> None:
        """Adds topics to refresh; marks the cache stale when a topic is new to it."""
        with self._lock:
            for topic in topics:
                if topic not in self.wanted_topics:
                    self.wanted_topics.add(topic)
                    self.stale = True

    def update(self, response: broker_pb2.MetadataResponse, now_ms: float) -> None:
        """Merges a Metadata answer.

        Topics absent from the answer keep their entries (the request may have named
        only some). A partition entry is replaced only by one with an equal or newer
        leader epoch, so an answer from a broker that lags in metadata cannot move a
        leader backwards; a new topic id (topic recreated) resets that rule.
        """
        with self._lock:
            old = self.snapshot
            brokers = {b.broker_id: endpoint_address(b) for b in response.brokers if not b.fenced}
            partitions = dict(old.partitions)
            counts = dict(old.partition_counts)
            topic_ids = dict(old.topic_ids)
            topic_errors = dict(old.topic_errors)
            for topic in response.topics:
                if topic.error_code != ErrorCode.NONE:
                    topic_errors[topic.name] = (error_code_name(topic.error_code), topic.error_message)
                    continue
                topic_errors.pop(topic.name, None)
                recreated = topic_ids.get(topic.name, topic.topic_id) != topic.topic_id
                if recreated or counts.get(topic.name, 0) > len(topic.partitions):
                    for p in range(counts.get(topic.name, 0)):
                        partitions.pop((topic.name, p), None)
                topic_ids[topic.name] = topic.topic_id
                counts[topic.name] = len(topic.partitions)
                for p in topic.partitions:
                    tp = (topic.name, p.partition)
                    current = partitions.get(tp)
                    if current is not None and current.leader_epoch > p.leader_epoch:
                        continue
                    leader = p.leader_id if p.error_code == ErrorCode.NONE else NO_LEADER
                    partitions[tp] = PartitionInfo(leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
            self.snapshot = ClusterSnapshot(
                brokers=brokers,
                partitions=partitions,
                partition_counts=counts,
                topic_ids=topic_ids,
                topic_errors=topic_errors,
                controllers=tuple(endpoint_address(c) for c in response.controllers),
                cluster_id=response.cluster_id,
                metadata_offset=response.metadata_offset,
            )
            self.stale = any(
                info.leader_id == NO_LEADER or info.leader_id not in brokers
                for (topic, _), info in partitions.items()
                if topic in self.wanted_topics
            ) or any(t not in counts for t in self.wanted_topics)
            self.last_refresh_ms = now_ms

    def apply_leader_hint(
        self,
        tp: TopicPartition,
        hint: common_pb2.LeaderHint | None,
        endpoints: Iterable[common_pb2.BrokerEndpoint] = (),
    ) -> None:
        """Takes a NOT_LEADER answer's hint so the retry goes to the new leader without
        waiting for a refresh; with no usable hint, forgets the leader and marks stale."""
        with self._lock:
            old = self.snapshot
            brokers = dict(old.brokers)
            for endpoint in endpoints:
                brokers[endpoint.broker_id] = endpoint_address(endpoint)
            partitions = dict(old.partitions)
            current = partitions.get(tp)
            usable = (
                hint is not None
                and hint.leader_id != NO_LEADER
                and hint.leader_id in brokers
                and (current is None or hint.leader_epoch > current.leader_epoch)
            )
            if usable:
                replicas, isr = (current.replicas, current.isr) if current else ((), ())
                partitions[tp] = PartitionInfo(hint.leader_id, hint.leader_epoch, replicas, isr)
            elif current is not None:
                partitions[tp] = current._replace(leader_id=NO_LEADER)
                self.stale = True
            self.snapshot = old._replace(brokers=brokers, partitions=partitions)

    def invalidate(self, tp: TopicPartition | None = None) -> None:
        """Forgets the leader of `tp` (or just marks everything stale) after a failure."""
        with self._lock:
            self.stale = True
            if tp is None:
                return
            old = self.snapshot
            current = old.partitions.get(tp)
            if current is not None and current.leader_id != NO_LEADER:
                partitions = dict(old.partitions)
                partitions[tp] = current._replace(leader_id=NO_LEADER)
                self.snapshot = old._replace(partitions=partitions)


def now_ms() -> float:
    """Monotonic milliseconds: every client deadline and linger is measured on this clock."""
    return time.monotonic() * 1000.0


# While a client waits for the new leader of partitions whose leader failed, its Metadata
# request is a long poll (`leader_watch`): the broker holds it up to LEADER_WATCH_WAIT_MS for a
# newer leader to appear, and one may follow another no sooner than LEADER_WATCH_INTERVAL_MIN_MS
# (a broker that answers at once, not knowing the long poll, is not asked in a tight loop).
LEADER_WATCH_WAIT_MS = 500
LEADER_WATCH_INTERVAL_MIN_MS = 20.0


def leader_watch(cache: MetadataCache, failed: Mapping[TopicPartition, int], max_wait_ms: int) -> broker_pb2.MetadataRequest:
    """The Metadata request that waits for a newer leader than the epoch in ``failed`` (the
    leader epoch each partition's failed call was sent under) for any of those partitions."""
    request = cache.request()
    request.max_wait_ms = max_wait_ms
    for (topic, partition), epoch in sorted(failed.items()):
        request.newer_leader_than.add(topic=topic, partition=partition, leader_epoch=epoch)
    return request


def refresh_sync(
    cache: MetadataCache,
    stub_for: Callable[[str], object],
    timeout_s: float,
    request: broker_pb2.MetadataRequest | None = None,
) -> broker_pb2.MetadataResponse:
    """Asks brokers one after another for metadata until one answers within `timeout_s` total."""
    deadline = time.monotonic() + timeout_s
    request = cache.request() if request is None else request
    errors: list[str] = []
    refused: list[grpc.StatusCode] = []  # each failure's status, to tell a refused password from a dead broker
    addresses = list(cache.refresh_addresses())
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            response = stub_for(address).Metadata(request, timeout=min(remaining, 5.0))
        except grpc.RpcError as err:
            errors.append(explain_refusal(err, address, cache.security))
            refused.append(err.code())
            continue
        cache.update(response, now_ms())
        return response
    raise no_broker_answered(addresses, errors, refused, cache.security.username)


async def refresh_async(
    cache: MetadataCache, stub_for: Callable[[str], object], timeout_s: float,
    request: broker_pb2.MetadataRequest | None = None,
) -> broker_pb2.MetadataResponse:
    """`refresh_sync` for `grpc.aio` stubs (the producer's sender loop)."""
    deadline = time.monotonic() + timeout_s
    request = cache.request() if request is None else request
    errors: list[str] = []
    refused: list[grpc.StatusCode] = []  # each failure's status, to tell a refused password from a dead broker
    addresses = list(cache.refresh_addresses())
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            response = await stub_for(address).Metadata(request, timeout=min(remaining, 5.0))
        except grpc.RpcError as err:
            errors.append(await asyncio.to_thread(explain_refusal, err, address, cache.security))
            refused.append(err.code())
            continue
        cache.update(response, now_ms())
        return response
    raise no_broker_answered(addresses, errors, refused, cache.security.username)


def explain_refusal(err: grpc.RpcError, address: str, security: ClientSecurity) -> str:
    """What a failed Metadata call says about `address`. A server without the Broker service
    is asked (gRPC reflection) what it is, so that a controller's address gets named as such;
    a connection TLS refused is explained with what to configure."""
    tls_advice = security.explain_failure(address, err.code(), err.details() or "")
    if tls_advice is not None:
        return tls_advice
    if err.code() == grpc.StatusCode.UNIMPLEMENTED:
        if controller_service_name() in listed_services(address, 2.0, security):
            return f"{address} is a kraftlog controller, not a broker: pass a broker's address ('kraftlog cluster status' lists them)"
        return f"{address} answers gRPC but is not a kraftlog broker: pass a broker's address"
    if err.code() == grpc.StatusCode.UNAVAILABLE:  # gRPC's detail repeats the address; its last clause is the reason
        return f"{address}: UNAVAILABLE ({(err.details() or 'no connection').rsplit(': ', 1)[-1]})"
    return f"{address}: {err.code().name}: {err.details()}"


def no_broker_answered(addresses: Iterable[str], errors: list[str], codes: Iterable[grpc.StatusCode] = (),
                       username: str | None = None) -> KraftlogError:
    """The error when no address gave metadata: where we asked, and each failure, in one line.
    ``errors[i]`` is the failure at the i-th address; failures that differ only in the address
    are said once, naming every address (a TLS mismatch is the same at every broker). When every
    broker that answered refused the credentials (``codes``), that is the error: the brokers are
    reachable, the user name or password is wrong."""
    addresses = list(addresses)
    where = ", ".join(addresses)
    codes = list(codes)
    if codes and all(code == grpc.StatusCode.UNAUTHENTICATED for code in codes):
        who = f"user {username!r}" if username else "a client without a username"
        return KraftlogError(ErrorCode.AUTHENTICATION_FAILED, f"the brokers at {where} refused {who}: {errors[0].split(': ', 1)[-1]}")
    grouped: dict[str, list[str]] = {}
    for address, error in zip(addresses, errors):
        grouped.setdefault(error.replace(address, "\0", 1), []).append(address)
    said = [error.replace("\0", ", ".join(group)) for error, group in grouped.items()]
    return KraftlogError("NO_BROKER_REACHABLE", f"no broker answered at {where} ({'; '.join(said) or 'metadata refresh timed out'})")
