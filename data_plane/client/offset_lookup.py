"""ListOffsets and OffsetForLeaderEpoch for many partitions at once: one call per leader
broker, retried on leader moves.

Shared by the consumer (seek_to_beginning/end, offsets_for_times, offset reset) and admin
(list_offsets). The ``try_`` forms ask once and return what answered and why the rest did
not: the consumer's offset reset and position checks use them, so one partition without a
reachable leader holds up no other. Timestamps follow the proto: -2 earliest, -1 latest (the high
watermark), otherwise the first offset whose record timestamp is at or after it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Callable, NamedTuple

import grpc

from data_plane.client.errors import KraftlogError, from_error_code, from_rpc_error
from data_plane.client.metadata_cache import MetadataCache, TopicPartition, refresh_sync
from kraftlog_proto import broker_pb2
from kraftlog_proto.broker_pb2_grpc import BrokerStub
from server_common.channel_pool import ChannelPool
from server_common.errors import ErrorCode

EARLIEST = -2
LATEST = -1


class OffsetAndTimestamp(NamedTuple):
    """A ListOffsets answer; offset -1 when no record is at or after the timestamp asked."""

    offset: int
    timestamp: int


class EpochEnd(NamedTuple):
    """An OffsetForLeaderEpoch answer: the largest epoch the leader's log holds at or below
    the one asked about, and where it ends (-1, -1: the log holds no such epoch)."""

    leader_epoch: int
    end_offset: int


class Lookup(NamedTuple):
    """One round of asking the leaders: the answers, and for every other partition the
    retriable error that kept it from one (no known leader, leader unreachable, NOT_LEADER...)."""

    answers: dict
    failures: dict[TopicPartition, KraftlogError]


def list_offsets(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    queries: Mapping[TopicPartition, int],
    timeout_s: float,
    retry_backoff_s: float = 0.1,
    isolation_level: int = broker_pb2.READ_UNCOMMITTED,
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """Answers every query or raises: retriable errors are retried (with a metadata
    refresh) until `timeout_s`; other errors raise at once. Latest (-1) is the high
    watermark, or the last stable offset with READ_COMMITTED."""
    answers = _ask_leaders(metadata, pool, queries, timeout_s, retry_backoff_s, _list_offsets_call(metadata, isolation_level), "ListOffsets")
    return {tp: OffsetAndTimestamp(a.offset, a.timestamp) for tp, a in answers.items()}


def try_list_offsets(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    queries: Mapping[TopicPartition, int],
    timeout_s: float,
    refresh_after_s: float,
    isolation_level: int = broker_pb2.READ_UNCOMMITTED,
) -> Lookup:
    """`list_offsets` in one round: what the leaders answered within `timeout_s`, and why
    the other partitions got nothing (a caller that must not wait on one partition's
    offline leader asks again later). Errors waiting will not cure raise."""
    got = _ask_round(metadata, pool, queries, time.monotonic() + timeout_s, _list_offsets_call(metadata, isolation_level), refresh_after_s)
    return got._replace(answers={tp: OffsetAndTimestamp(a.offset, a.timestamp) for tp, a in got.answers.items()})


def epoch_end_offsets(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    epochs: Mapping[TopicPartition, int],
    timeout_s: float,
    retry_backoff_s: float = 0.1,
) -> dict[TopicPartition, EpochEnd]:
    """Where each partition's leader says the given epoch ends (KIP-320), retried like
    `list_offsets`."""
    answers = _ask_leaders(metadata, pool, epochs, timeout_s, retry_backoff_s, _epoch_end_call(metadata), "OffsetForLeaderEpoch")
    return {tp: EpochEnd(a.leader_epoch, a.end_offset) for tp, a in answers.items()}


def try_epoch_end_offsets(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    epochs: Mapping[TopicPartition, int],
    timeout_s: float,
    refresh_after_s: float,
) -> Lookup:
    """`epoch_end_offsets` in one round, like `try_list_offsets`."""
    got = _ask_round(metadata, pool, epochs, time.monotonic() + timeout_s, _epoch_end_call(metadata), refresh_after_s)
    return got._replace(answers={tp: EpochEnd(a.leader_epoch, a.end_offset) for tp, a in got.answers.items()})


def _list_offsets_call(metadata: MetadataCache, isolation_level: int):
    def call(stub: BrokerStub, group: Mapping[TopicPartition, int], timeout: float) -> grpc.Future:
        return stub.ListOffsets.future(_request(metadata, group, isolation_level), timeout=timeout)

    return call


def _epoch_end_call(metadata: MetadataCache):
    def call(stub: BrokerStub, group: Mapping[TopicPartition, int], timeout: float) -> grpc.Future:
        topics: dict[str, broker_pb2.OffsetForLeaderEpochTopic] = {}
        for (topic, partition), epoch in group.items():
            entry = topics.setdefault(topic, broker_pb2.OffsetForLeaderEpochTopic(topic=topic))
            entry.partitions.add(partition=partition, leader_epoch=epoch, current_leader_epoch=metadata.leader_epoch((topic, partition)))
        return stub.OffsetForLeaderEpoch.future(broker_pb2.OffsetForLeaderEpochRequest(topics=list(topics.values())), timeout=timeout)

    return call


def _ask_leaders(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    queries: Mapping[TopicPartition, int],
    timeout_s: float,
    retry_backoff_s: float,
    call: Callable[[BrokerStub, Mapping[TopicPartition, int], float], grpc.Future],
    what: str,
) -> dict:
    """One ``call`` per leader broker for its partitions of ``queries``, until every partition
    has an answer without error (the proto's per-partition answer) or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    pending = dict(queries)
    answers: dict = {}
    last_error: KraftlogError | None = None
    while pending:
        got = _ask_round(metadata, pool, pending, deadline, call, refresh_after_s=0.0)
        answers.update(got.answers)
        for tp in got.answers:
            del pending[tp]
        last_error = next(iter(got.failures.values()), last_error)
        if pending:
            if time.monotonic() + retry_backoff_s >= deadline:
                detail = f"; last error: {last_error}" if last_error else ""
                raise KraftlogError(
                    "REQUEST_TIMED_OUT", f"{what} unanswered for {sorted(pending)} after {timeout_s:.1f}s{detail}"
                )
            time.sleep(retry_backoff_s)
    return answers


def _ask_round(
    metadata: MetadataCache,
    pool: ChannelPool[BrokerStub],
    queries: Mapping[TopicPartition, int],
    deadline: float,
    call: Callable[[BrokerStub, Mapping[TopicPartition, int], float], grpc.Future],
    refresh_after_s: float,
) -> Lookup:
    """Asks every leader once, all at the same time (an unreachable one holds up no other);
    raises an error that waiting will not cure. Metadata is refreshed first when stale or a
    leader is unknown, unless it was refreshed less than ``refresh_after_s`` ago."""
    metadata.want({tp[0] for tp in queries})
    failures: dict[TopicPartition, KraftlogError] = {}
    refresh_error: KraftlogError | None = None
    if (metadata.stale or any(metadata.leader(tp) is None for tp in queries)) and (
        time.monotonic() * 1000 - metadata.last_refresh_ms >= refresh_after_s * 1000
    ):
        try:
            refresh_sync(metadata, pool.stub, max(deadline - time.monotonic(), 0.01))
        except KraftlogError as err:
            metadata.last_refresh_ms = time.monotonic() * 1000  # not asked again before refresh_after_s
            refresh_error = err
    by_address: dict[str, dict[TopicPartition, int]] = {}
    for tp, query in queries.items():
        leader = metadata.leader(tp)
        if leader is not None:
            by_address.setdefault(leader.address, {})[tp] = query
        elif (failure := metadata.topic_failure(tp[0])) is not None:
            raise failure
        else:
            failures[tp] = refresh_error or KraftlogError(ErrorCode.LEADER_NOT_AVAILABLE, f"no known leader for {tp[0]}-{tp[1]}")
    calls = {address: call(pool.stub(address), group, max(deadline - time.monotonic(), 0.01)) for address, group in by_address.items()}
    answers: dict = {}
    for address, future in calls.items():
        group = by_address[address]
        try:
            response = future.result()
        except grpc.RpcError as err:
            error = from_rpc_error(err, address)
            failures.update(dict.fromkeys(group, error))
            metadata.invalidate()
            continue
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition)
                if tp not in group:
                    continue
                if answer.error_code == ErrorCode.NONE:
                    answers[tp] = answer
                    continue
                error = from_error_code(answer.error_code, answer.error_message, f"{tp[0]}-{tp[1]}")
                if not error.retriable:
                    raise error
                failures[tp] = error
                if error.refresh_metadata:
                    hint = answer.current_leader if answer.HasField("current_leader") else None
                    metadata.apply_leader_hint(tp, hint)
        for tp in group.keys() - answers.keys() - failures.keys():
            failures[tp] = KraftlogError(ErrorCode.REQUEST_TIMED_OUT, f"{address} left {tp[0]}-{tp[1]} out of its answer")
    return Lookup(answers, failures)


def _request(metadata: MetadataCache, group: Mapping[TopicPartition, int], isolation_level: int) -> broker_pb2.ListOffsetsRequest:
    topics: dict[str, broker_pb2.ListOffsetsTopic] = {}
    for (topic, partition), timestamp in group.items():
        entry = topics.get(topic)
        if entry is None:
            entry = topics[topic] = broker_pb2.ListOffsetsTopic(topic=topic)
        entry.partitions.append(
            broker_pb2.ListOffsetsPartition(
                partition=partition,
                timestamp=timestamp,
                current_leader_epoch=metadata.leader_epoch((topic, partition)),
            )
        )
    return broker_pb2.ListOffsetsRequest(topics=list(topics.values()), isolation_level=isolation_level)
