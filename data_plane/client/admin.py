"""Broker-side administrative reads: topics and leaders, offsets, per-replica log state.

Everything here is answered by brokers. Changes to the cluster (create or delete topics,
configs, the quorum) go to the controllers through
`metadata_quorum.controller_client.ControllerClient`; `controller_endpoints()` tells
callers where those are, and the thin create_topics/delete_topics/describe_quorum methods
delegate to it when that module is installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import grpc

from data_plane.client.channels import REQUEST_TIMEOUT_MS_DEFAULT, broker_channels
from data_plane.client.errors import KraftlogError, error_code_name, from_rpc_error
from data_plane.client.metadata_cache import MetadataCache, TopicPartition, refresh_sync
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from data_plane.client.offset_lookup import OffsetAndTimestamp, list_offsets
from data_plane.client.record_deletion import delete_records
from kraftlog_proto import broker_pb2
from server_common.errors import ErrorCode, error_code_name


class PartitionDescription(NamedTuple):
    """A partition's leadership and replica sets as the answering broker knows them."""

    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class TopicDescription(NamedTuple):
    """A topic and its partitions, keyed by partition number."""

    name: str
    topic_id: str
    partitions: dict[int, PartitionDescription]


class Admin:
    """Reads cluster state from brokers. Use as a context manager, or call close()."""

    def __init__(self, bootstrap: str | Iterable[str], *, request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
                 security: ClientSecurity | None = None) -> None:
        """``security``: TLS files and credentials (None: ``KRAFTLOG_CLIENT_CONFIG``, else plaintext)."""
        self.security = resolve_security(security)
        self._metadata = MetadataCache(bootstrap, self.security)
        self._pool = broker_channels(self.security)
        self._timeout_s = request_timeout_ms / 1000.0

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Topics by name (all of them by default). Raises UNKNOWN_TOPIC_OR_PARTITION (or the
        topic's error) for a named topic the cluster does not have."""
        request = broker_pb2.MetadataRequest(topics=sorted(names or ()))
        response = refresh_sync(self._metadata, self._pool.stub, self._timeout_s, request)
        described: dict[str, TopicDescription] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                if request.topics:
                    raise KraftlogError(error_code_name(topic.error_code), f"topic {topic.name!r}: {topic.error_message}")
                continue
            partitions = {
                p.partition: PartitionDescription(
                    p.partition,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                    tuple(p.offline_replicas),
                )
                for p in topic.partitions
            }
            described[topic.name] = TopicDescription(topic.name, topic.topic_id, partitions)
        missing = set(request.topics) - set(described)
        if missing:
            raise KraftlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topics {sorted(missing)} not in metadata")
        return described

    def list_offsets(self, queries: Mapping[TopicPartition, int], read_committed: bool = False) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Per partition: -2 the log start offset, -1 the high watermark (the last stable
        offset with ``read_committed``), else the first offset with a timestamp at or after
        the one given (offset -1 when none)."""
        isolation = broker_pb2.READ_COMMITTED if read_committed else broker_pb2.READ_UNCOMMITTED
        return list_offsets(self._metadata, self._pool, queries, self._timeout_s, isolation_level=isolation)

    def delete_records(self, tp: TopicPartition, before_offset: int) -> int:
        """Delete the records of ``tp`` below ``before_offset`` (-1: every committed record) by
        moving its log start offset; returns the new log start (the low watermark)."""
        return delete_records(self._metadata, self._pool, tp, before_offset, self._timeout_s)

    def describe_logs(
        self,
        broker_id: int | None = None,
        topics: Iterable[str] = (),
        include_checksums: bool = False,
        checksum_upto_offset: int | None = None,
    ) -> dict[int, broker_pb2.DescribeLogsResponse]:
        """Each broker's log state per partition replica (LEO, HW, log start, replica
        progress when leader), from every live broker or just `broker_id`. Checksums cover
        each replica's bytes below its own HW, or below `checksum_upto_offset` when given
        (so replicas with different HWs can be compared at one offset)."""
        brokers = self._brokers()
        if broker_id is not None:
            if broker_id not in brokers:
                raise KraftlogError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in metadata (known: {sorted(brokers)})")
            brokers = {broker_id: brokers[broker_id]}
        request = broker_pb2.DescribeLogsRequest(topics=list(topics), include_checksums=include_checksums)
        if checksum_upto_offset is not None:
            request.checksum_upto_offset = checksum_upto_offset
        futures = {b: self._pool.stub(address).DescribeLogs.future(request, timeout=self._timeout_s) for b, address in brokers.items()}
        answers: dict[int, broker_pb2.DescribeLogsResponse] = {}
        for b, future in futures.items():
            try:
                answers[b] = future.result()
            except grpc.RpcError as err:
                raise from_rpc_error(err, brokers[b]) from None
        return answers

    def controller_endpoints(self) -> list[tuple[int, str, int]]:
        """The controller quorum's (node_id, host, port) endpoints, the form
        `ControllerClient(endpoints)` takes."""
        response = refresh_sync(self._metadata, self._pool.stub, self._timeout_s, broker_pb2.MetadataRequest(brokers_only=True))
        return [(c.broker_id, c.host, c.port) for c in response.controllers]

    def create_topics(
        self, topics: Iterable[tuple[str, int, int]], configs: Mapping[str, str] | None = None
    ) -> list[Any]:
        """Creates (name, partitions, replication_factor) topics through the controllers;
        returns ControllerClient's per-topic results (raises ControllerError on failure)."""
        with self._controller_client() as client:
            return client.create_topics([(name, p, rf, dict(configs or {})) for name, p, rf in topics])

    def delete_topics(self, names: Iterable[str]) -> list[Any]:
        """Deletes topics through the controllers; returns the per-topic results."""
        with self._controller_client() as client:
            return client.delete_topics(list(names))

    def describe_quorum(self) -> list[Any]:
        """The controller quorum's members, as ControllerClient reports them."""
        with self._controller_client() as client:
            return client.describe_quorum()

    def close(self) -> None:
        """Closes the broker channels."""
        self._pool.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _brokers(self) -> dict[int, str]:
        refresh_sync(self._metadata, self._pool.stub, self._timeout_s, broker_pb2.MetadataRequest(brokers_only=True))
        return dict(self._metadata.snapshot.brokers)

    def _controller_client(self) -> Any:
        try:
            from metadata_quorum.controller_client import ControllerClient
        except ImportError:
            raise KraftlogError(
                "INVALID_REQUEST",
                "metadata_quorum.controller_client is not available in this installation; "
                "use the `kraftlog topics` command against the controllers",
                retriable=False,
            ) from None
        return ControllerClient(self.controller_endpoints(), security=self.security)
