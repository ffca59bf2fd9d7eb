"""DeleteRecords for one partition: sent to its leader, retried on leader moves.

Used by ``Admin.delete_records`` (and so by ``kraftlog records delete``). Offsets follow the
proto: records below ``offset`` go; -1 means the high watermark (everything committed).
"""

from __future__ import annotations

import time

import grpc

from data_plane.client.errors import KraftlogError, error_code_name, from_rpc_error
from data_plane.client.metadata_cache import MetadataCache, TopicPartition, refresh_sync
from kraftlog_proto import broker_pb2
from kraftlog_proto.broker_pb2_grpc import BrokerStub
from server_common.channel_pool import ChannelPool
from server_common.errors import ErrorCode, error_code_name


def delete_records(
    metadata: MetadataCache, pool: ChannelPool[BrokerStub], tp: TopicPartition, offset: int, timeout_s: float,
    retry_backoff_s: float = 0.1,
) -> int:
    """The partition's new log start offset (its low watermark), or raise: retriable errors
    are retried (with a metadata refresh) until ``timeout_s``, the others raise at once."""
    deadline = time.monotonic() + timeout_s
    metadata.want({tp[0]})
    last_error: KraftlogError | None = None
    while True:
        error = _attempt(metadata, pool, tp, offset, max(deadline - time.monotonic(), 0.01))
        if isinstance(error, int):
            return error
        if not error.retriable:
            raise error
        last_error = error
        if time.monotonic() + retry_backoff_s >= deadline:
            raise KraftlogError(ErrorCode.REQUEST_TIMED_OUT, f"DeleteRecords for {tp[0]}-{tp[1]} unanswered after {timeout_s:.1f}s; "
                                f"last error: {last_error}; check the partition has a leader (kraftlog topics describe)")
        time.sleep(retry_backoff_s)


def _attempt(metadata: MetadataCache, pool: ChannelPool[BrokerStub], tp: TopicPartition, offset: int, timeout_s: float) -> int | KraftlogError:
    """One try: the low watermark, or the error it got."""
    if metadata.stale or metadata.leader(tp) is None:
        try:
            refresh_sync(metadata, pool.stub, timeout_s)
        except KraftlogError as err:
            return err
    leader = metadata.leader(tp)
    if leader is None:
        return metadata.topic_failure(tp[0]) or KraftlogError(ErrorCode.LEADER_NOT_AVAILABLE, f"no known leader for {tp[0]}-{tp[1]}")
    request = broker_pb2.DeleteRecordsRequest(topics=[broker_pb2.DeleteRecordsTopic(topic=tp[0], partitions=[
        broker_pb2.DeleteRecordsPartition(partition=tp[1], offset=offset, current_leader_epoch=metadata.leader_epoch(tp))])])
    try:
        response = pool.stub(leader.address).DeleteRecords(request, timeout=timeout_s)
    except grpc.RpcError as err:
        metadata.invalidate()
        return from_rpc_error(err, leader.address)
    answer = response.topics[0].partitions[0]
    if answer.error_code == ErrorCode.NONE:
        return answer.low_watermark
    error = KraftlogError(error_code_name(answer.error_code), answer.error_message)  # the message names the partition
    if error.refresh_metadata:
        metadata.apply_leader_hint(tp, answer.current_leader if answer.HasField("current_leader") else None)
    return error
