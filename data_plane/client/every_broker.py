"""One call to every live broker at once, for the admin listings that each broker answers
for its own share (the groups or transactional ids it coordinates): what the brokers that
answered said, and why the others did not, so a listing can show what it has while a
broker is down."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from data_plane.client.errors import from_error_code, from_rpc_error
from data_plane.client.metadata_cache import MetadataCache, refresh_sync
from kraftlog_proto import broker_pb2
from server_common.errors import ErrorCode


def ask_every_broker(
    metadata: MetadataCache, broker_stub: Callable[[str], Any], timeout_s: float, call: Callable[[str], grpc.Future], rpc: str,
) -> tuple[dict[int, Any], dict[int, str]]:
    """``call(address)`` starts the RPC at one broker. Returns (broker id -> answer, for every
    broker that answered, even with an error code) and (broker id -> error, for those that
    did not answer or answered with an error)."""
    refresh_sync(metadata, broker_stub, timeout_s, broker_pb2.MetadataRequest(brokers_only=True))
    brokers = dict(metadata.snapshot.brokers)
    futures = {broker_id: call(address) for broker_id, address in brokers.items()}
    answers: dict[int, Any] = {}
    unanswered: dict[int, str] = {}
    for broker_id, future in sorted(futures.items()):
        try:
            answer = answers[broker_id] = future.result()
        except grpc.RpcError as err:
            unanswered[broker_id] = str(from_rpc_error(err, brokers[broker_id]))
            continue
        if answer.error_code != ErrorCode.NONE:
            unanswered[broker_id] = str(from_error_code(answer.error_code, answer.error_message, f"{rpc} at broker {broker_id}"))
    return answers, unanswered
