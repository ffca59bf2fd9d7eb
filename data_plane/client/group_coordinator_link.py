"""The client's line to a group's (or a transactional id's) coordinator: found with
FindCoordinator (any broker answers), remembered, and found again when the coordinator moves.

A coordinator is the leader of the group's ``__consumer_offsets`` partition, so it moves
with that leadership: a call that fails to connect, or is answered NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE, forgets the address and asks again; COORDINATOR_LOAD_IN_PROGRESS
(the new leader replays the partition) waits and retries at the same place. Shared by the
consumer's heartbeat thread, its commits and the group admin, so it is thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from data_plane.client.channels import client_channels
from data_plane.client.errors import KraftlogError, from_error_code, from_rpc_error
from data_plane.client.group_membership import REDISCOVER_CODES, RETRY_CODES
from data_plane.client.metadata_cache import MetadataCache
from kraftlog_proto import group_pb2, group_pb2_grpc
from server_common.channel_pool import ChannelPool
from server_common.client_security import ClientSecurity
from server_common.errors import ErrorCode

FIND_COORDINATOR_TIMEOUT_S = 5.0


def coordinator_channels(security: ClientSecurity, client_id: str = "") -> ChannelPool[group_pb2_grpc.GroupCoordinatorStub]:
    """Blocking GroupCoordinator stubs with the client's channel options, credentials and client id."""
    return client_channels(group_pb2_grpc.GroupCoordinatorStub, security, client_id)


def raise_commit_errors(answer: group_pb2.OffsetCommitResponse, where: str) -> None:
    """Raises the group-level refusal of an OffsetCommit answer, else its first partition's."""
    if answer.error_code != ErrorCode.NONE:
        raise from_error_code(answer.error_code, answer.error_message, where)
    for topic in answer.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                raise from_error_code(p.error_code, p.error_message, f"{where} {topic.topic}-{p.partition}")


class CoordinatorLink:
    """Calls to one group's coordinator, with rediscovery and bounded retries. With
    ``key_type`` TRANSACTION the key is a transactional id and the calls go to ``call_pool``'s
    stubs (the TransactionCoordinator service); FindCoordinator always goes to ``pool``."""

    def __init__(
        self, group_id: str, metadata: MetadataCache, pool: ChannelPool[group_pb2_grpc.GroupCoordinatorStub],
        request_timeout_s: float, retry_backoff_s: float, key_type: int = group_pb2.GROUP, call_pool: ChannelPool | None = None,
    ) -> None:
        self.group_id = group_id
        self._key_type = key_type
        self._what = "transactional id" if key_type == group_pb2.TRANSACTION else "group"
        self._metadata = metadata
        self._pool = pool
        self._call_pool = call_pool or pool
        self._request_timeout_s = request_timeout_s
        self._retry_backoff_s = retry_backoff_s
        self._lock = threading.Lock()
        self._address: str | None = None
        self.coordinator_id = -1

    @property
    def address(self) -> str | None:
        return self._address

    def forget(self) -> None:
        """The coordinator moved or is unreachable: the next call asks FindCoordinator."""
        with self._lock:
            self._address = None
            self.coordinator_id = -1

    def find(self, timeout_s: float) -> str:
        """The coordinator's address (asking brokers one after another); raises when no
        broker names one within ``timeout_s``."""
        with self._lock:
            if self._address is not None:
                return self._address
        deadline = time.monotonic() + timeout_s
        request = group_pb2.FindCoordinatorRequest(keys=[self.group_id], key_type=self._key_type)
        last = "no broker answered"
        while True:
            for address in list(self._metadata.refresh_addresses()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    answer = self._pool.stub(address).FindCoordinator(request, timeout=min(remaining, FIND_COORDINATOR_TIMEOUT_S))
                except grpc.RpcError as err:
                    last = str(from_rpc_error(err, address))
                    continue
                found = next((c for c in answer.coordinators if c.key == self.group_id), None)
                if found is None:
                    last = f"broker {address} answered FindCoordinator without {self._what} {self.group_id!r}"
                    continue
                if found.error_code != ErrorCode.NONE:
                    last = str(from_error_code(found.error_code, found.error_message, f"{self._what} {self.group_id!r}"))
                    break  # every broker reads the same metadata: wait, then ask again
                host = f"[{found.host}]" if ":" in found.host else found.host
                with self._lock:
                    self._address = f"{host}:{found.port}"
                    self.coordinator_id = found.node_id
                    return self._address
            if time.monotonic() + self._retry_backoff_s >= deadline:
                raise KraftlogError(
                    "COORDINATOR_NOT_AVAILABLE", f"no coordinator found for {self._what} {self.group_id!r} within {timeout_s:.1f}s: {last}",
                    retriable=True,
                )
            time.sleep(self._retry_backoff_s)

    def call_once(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        """One attempt of ``method`` at the coordinator; a connection failure forgets it and
        raises a retriable KraftlogError. The answer's error code is the caller's to read."""
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        address = self.find(timeout_s)
        try:
            return getattr(self._call_pool.stub(address), method)(request, timeout=timeout_s)
        except grpc.RpcError as err:
            error = from_rpc_error(err, address)
            if error.retriable:
                self.forget()
            raise error from None

    def call(self, method: str, request: Any, timeout_s: float | None = None,
             error_of: Callable[[Any], int] = lambda answer: answer.error_code) -> Any:
        """``method`` at the coordinator, retried across coordinator moves and restarts until
        ``timeout_s`` (default: the request timeout); returns the first answer whose
        ``error_of`` is not a coordinator error (the caller reads the rest)."""
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        last: KraftlogError | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KraftlogError(
                    "REQUEST_TIMED_OUT", f"{method} for {self._what} {self.group_id!r} unanswered after {timeout_s:.1f}s; last error: {last}",
                )
            try:
                answer = self.call_once(method, request, remaining)
            except KraftlogError as err:
                if not err.retriable:
                    raise
                last = err
            else:
                code = error_of(answer)
                if code not in REDISCOVER_CODES and code not in RETRY_CODES:
                    return answer
                last = from_error_code(code, getattr(answer, "error_message", ""), f"{self._what} {self.group_id!r}")
                if code in REDISCOVER_CODES:
                    self.forget()
            time.sleep(min(self._retry_backoff_s, max(deadline - time.monotonic(), 0)))
