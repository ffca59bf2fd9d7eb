"""The consumer: reads assigned partitions from their leaders, in offset order.

Two ways to read, chosen by ``fetch_mode``. "stream" (the default: faster in
tests/integration/test_consume_benchmark.py) opens one ``Broker.Consume`` stream per leader
broker for its assigned partitions (``consume_streams.py``): the broker pushes committed
data as it arrives, at most ``stream_window_messages`` messages ahead of what ``poll`` has
taken, and a partition whose stream ends (leader change, broker restart) gets a new stream
at its leader from where it stopped. "fetch" polls with Fetch, as follows.

One Fetch per leader broker carries all its assigned partitions. Fetches are prefetched:
when `poll` hands out a partition's data it immediately asks for the next, so the broker's
long poll overlaps the application's processing. At most one fetch is outstanding per
broker, and buffered data is at most one fetch response per partition, so memory stays
bounded by fetch_max_bytes per broker. gRPC's future API gives that concurrency without
threads of our own: completions land in a queue that `poll` waits on.

After a leader change, and on resuming from a committed offset, a position is checked against
the new leader's log before the next fetch (KIP-320, ``truncation.py``), so records an unclean
election truncated are never skipped or re-read silently.

A partition without a position is reset by ``auto_offset_reset`` inside poll, one round of
ListOffsets at a time: one whose leader cannot answer now keeps no position and is asked
again after a backoff (``pending_resets.py``) while the others are read, as Kafka's consumer
does; only ``position()`` of it waits for an answer and raises when none comes.

With ``group_id`` the consumer is a member of a consumer group instead (``subscribe``): the
group's coordinator decides which partitions it owns, and ``group_session.py`` moves the
assignment, heartbeats and commits; this class still does the reading.
"""

from __future__ import annotations

import bisect
import queue
import time
from collections.abc import Iterable
from typing import NamedTuple

import grpc
import structlog

from data_plane import record_batch
from data_plane.client.channels import REQUEST_TIMEOUT_MS_DEFAULT, broker_channels
from data_plane.client.consume_streams import ConsumeStreams, StreamEvent
from data_plane.client.errors import KraftlogError, from_error_code, from_rpc_error
from data_plane.client.group_membership import Subscription
from data_plane.client.group_session import CommittedOffset, GroupSession, OwnedPartitions, PartitionsCallback
from data_plane.client.metadata_cache import (
    LEADER_WATCH_INTERVAL_MIN_MS,
    LEADER_WATCH_WAIT_MS,
    MetadataCache,
    TopicPartition,
    leader_watch,
    refresh_sync,
)
from server_common.client_security import ClientSecurity
from server_common.client_security import resolve as resolve_security
from data_plane.client.offset_lookup import EARLIEST, LATEST, OffsetAndTimestamp, list_offsets, try_epoch_end_offsets, try_list_offsets
from data_plane.client.pending_resets import PendingResets
from data_plane.client.records import ConsumerRecord
from data_plane.client.transactions import GroupMetadata
from data_plane.client.truncation import Diverged, LogTruncationError, Position, check_position
from data_plane.replication.transaction_index import AbortedTxn, in_aborted
from kraftlog_proto import broker_pb2
from server_common.limits import BATCH_BYTES_PER_MESSAGE_MAX, FETCH_BYTES_MAX_DEFAULT
from server_common.errors import ErrorCode

_RESETS = ("none", "earliest", "latest")
_FETCH_MODES = ("stream", "fetch")
GROUP_POLL_WAIT_S_MAX = 0.05  # a group member's poll looks for a reconciliation at least this often
_ISOLATION_LEVELS = {"read_uncommitted": broker_pb2.READ_UNCOMMITTED, "read_committed": broker_pb2.READ_COMMITTED}
LOOKUP_TIMEOUT_S_MAX = 1.0  # one round of position checks or resets inside poll; an unanswered partition is asked again later
RESET_BACKOFF_S_MAX = 1.0  # a partition whose reset got no answer is asked again at most this far apart
RESET_WARN_INTERVAL_S = 5.0  # and warns about it at most this often

log = structlog.get_logger(__name__)


class _Fetched(NamedTuple):
    fetch_offset: int
    batches: list[record_batch.DecodedBatch]
    # the offset after the answer's last batch, past markers and aborted batches left out,
    # and that batch's leader epoch: the position and the epoch before it (KIP-320) move together
    end: int
    end_epoch: int


class Consumer:
    """Reads records from manually assigned partitions, or, with ``group_id``, from the
    partitions its consumer group's coordinator assigns it (``subscribe``).

    Args:
        bootstrap: "host:port,host:port" of any brokers.
        fetch_max_wait_ms: how long a broker holds a fetch waiting for fetch_min_bytes.
        fetch_min_bytes: the data a broker waits for before answering.
        fetch_max_bytes: bytes per fetch response (per broker).
        max_partition_fetch_bytes: bytes per partition in a fetch response.
        auto_offset_reset: what to do when a position is missing or out of range:
            "none" (raise), "earliest" or "latest".
        request_timeout_ms: how long a request may take beyond fetch_max_wait_ms.
        fetch_mode: "stream" (Consume streams pushing data as it is committed) or "fetch"
            (Fetch long polls); both read the same records.
        stream_window_messages: with "stream", messages a broker may send ahead of poll.
        stream_message_bytes: with "stream", batch bytes per streamed message.
        security: TLS files and credentials (``ClientSecurity``); None: the config named by
            ``KRAFTLOG_CLIENT_CONFIG``, else plaintext.
        group_id: join this consumer group (then ``subscribe``, not ``assign``).
        group_instance_id: a static member's stable id: a restart within the session
            timeout keeps its partitions without a rebalance.
        enable_auto_commit: commit the positions of owned partitions every
            ``auto_commit_interval_ms`` (from poll), before a revocation and at close.
        rebalance_timeout_ms: how long the coordinator waits for this member to revoke
            partitions (0: the coordinator's default).
        group_assignor: "uniform", "range" or "sticky" ("": the group's).
        session_timeout_ms: the brokers' group session timeout: when no heartbeat has
            succeeded for this long, the member drops its partitions itself (lost), as the
            coordinator has already given them to others.
        max_poll_records: the most records one ``poll`` hands out (the rest stay buffered for
            the next): how much an application processes between two polls, and so between two
            automatic commits (``poll_batches`` is not bounded by it).
        isolation_level: "read_uncommitted" (everything below the high watermark) or
            "read_committed" (only below the last stable offset, aborted transactions
            dropped; seek_to_end goes to the last stable offset; a group's committed offset in an
            open transaction is waited for: OffsetFetch require_stable). docs/transactions.md.
    """

    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = FETCH_BYTES_MAX_DEFAULT,
        max_partition_fetch_bytes: int = 8 * 1024 * 1024,
        auto_offset_reset: str = "none",
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        retry_backoff_ms: int = 100,
        client_id: str = "kraftlog-consumer",
        fetch_mode: str = "stream",
        stream_window_messages: int = 8,
        stream_message_bytes: int = 1 << 20,
        security: ClientSecurity | None = None,
        group_id: str | None = None,
        group_instance_id: str = "",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        rebalance_timeout_ms: int = 0,
        group_assignor: str = "",
        session_timeout_ms: int = 45000,
        isolation_level: str = "read_uncommitted",
        max_poll_records: int = 500,
    ) -> None:
        if isolation_level not in _ISOLATION_LEVELS:
            raise ValueError(f"isolation_level={isolation_level!r}: use one of {tuple(_ISOLATION_LEVELS)}")
        if auto_offset_reset not in _RESETS:
            raise ValueError(f"auto_offset_reset={auto_offset_reset!r}: use one of {_RESETS}")
        if not 0 < fetch_max_bytes <= BATCH_BYTES_PER_MESSAGE_MAX:
            raise ValueError(f"fetch_max_bytes must be in (0, {BATCH_BYTES_PER_MESSAGE_MAX}]")
        if max_poll_records < 1:
            raise ValueError(f"max_poll_records={max_poll_records}: at least 1")
        if fetch_mode not in _FETCH_MODES:
            raise ValueError(f"fetch_mode={fetch_mode!r}: use one of {_FETCH_MODES}")
        if not 0 < stream_window_messages <= 64 or not 0 < stream_message_bytes <= BATCH_BYTES_PER_MESSAGE_MAX:
            raise ValueError(f"stream_window_messages must be in [1, 64] and stream_message_bytes in (0, {BATCH_BYTES_PER_MESSAGE_MAX}]")
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._max_poll_records = max_poll_records
        self._fetch_min_bytes = fetch_min_bytes
        self._fetch_max_bytes = fetch_max_bytes
        self._max_partition_fetch_bytes = min(max_partition_fetch_bytes, fetch_max_bytes)
        self._auto_offset_reset = auto_offset_reset
        self._request_timeout_s = request_timeout_ms / 1000.0
        self._retry_backoff_s = retry_backoff_ms / 1000.0
        self._client_id = client_id
        self._isolation_level = _ISOLATION_LEVELS[isolation_level]
        self._security = resolve_security(security)
        self._metadata = MetadataCache(bootstrap, self._security)
        self._pool = broker_channels(self._security, client_id)
        self._positions: dict[TopicPartition, int | None] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._log_start_offsets: dict[TopicPartition, int] = {}
        self._buffered: dict[TopicPartition, _Fetched] = {}
        self._in_flight: dict[str, tuple[grpc.Future, dict[TopicPartition, int]]] = {}
        self._completions: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._backoff_until: dict[str, float] = {}
        self._pending_error: KraftlogError | None = None
        self._closed = False
        self._streams = (
            ConsumeStreams(self._pool, stream_window_messages, stream_message_bytes, client_id, self._isolation_level)
            if fetch_mode == "stream" else None
        )
        self._resting_until: dict[TopicPartition, float] = {}  # stream mode: a partition's stream ended with an error
        self._last_epochs: dict[TopicPartition, int] = {}  # leader epoch of the record before the position (KIP-320)
        self._validated_at: dict[TopicPartition, int] = {}  # leader epoch at which the position was last checked
        self._resets = PendingResets(self._retry_backoff_s, RESET_BACKOFF_S_MAX, RESET_WARN_INTERVAL_S)
        owned = OwnedPartitions(self.assignment, self._set_assignment, self._drop_fetched, self._committable_positions,
                                self._seek_committed, self._last_epochs)
        self._group = None if group_id is None else GroupSession(
            owned, self._security, self._metadata, group_id, instance_id=group_instance_id, client_id=client_id, enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            assignor=group_assignor, request_timeout_s=self._request_timeout_s, retry_backoff_s=self._retry_backoff_s,
            session_timeout_ms=session_timeout_ms, require_stable=self._isolation_level == broker_pb2.READ_COMMITTED,
        )

    # ------------------------------------------------------------ assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replaces the assignment. Kept partitions keep their position; new ones have none
        until seek (or auto_offset_reset) gives one."""
        if self._group is not None:
            raise KraftlogError("GROUP_MEMBER", "a consumer with group_id gets its partitions from the group: call subscribe(), "
                                "or create the consumer without group_id to assign partitions by hand", retriable=False)
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = [(str(t), int(p)) for t, p in partitions]
        self._cancel_streams(set(self._positions) - set(wanted))
        self._positions = {tp: self._positions.get(tp) for tp in wanted}
        self._resets.keep_only(set(self._positions))
        for tp in list(self._buffered):
            if tp not in self._positions:
                del self._buffered[tp]
        self._metadata.want({tp[0] for tp in wanted})

    def assignment(self) -> set[TopicPartition]:
        """The assigned partitions (for a group member: those it owns)."""
        return set(self._positions)

    # ------------------------------------------------------------ consumer groups

    def subscribe(
        self, topics: Iterable[str] | None = None, *, pattern: str = "", on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None, on_lost: PartitionsCallback | None = None,
    ) -> None:
        """Joins the group with topic names or a regex ``pattern`` (a full match). Callbacks
        run inside poll: ``on_revoked`` before a partition is given up (after its position
        was committed, with auto-commit), ``on_assigned`` once new partitions have their
        committed positions, ``on_lost`` (default: ``on_revoked``) when the member was fenced
        and its partitions may already be another member's (nothing is committed then)."""
        group = self._require_group()
        group.subscribe(Subscription(tuple(topics or ()), pattern), on_assigned, on_revoked, on_lost)

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> dict[TopicPartition, CommittedOffset]:
        """Commits ``offsets`` (next offsets to read; default: the position of every owned
        partition) in one request and waits; raises when the coordinator refuses (a fenced
        member's commit, for one)."""
        return self._require_group().commit(offsets)

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None, callback=None):
        """``commit`` without waiting: commits go out in order; ``callback(offsets, error)``
        runs on the commit thread; returns a Future."""
        return self._require_group().commit_async(offsets, callback)

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, CommittedOffset | None]:
        """The group's committed offsets of ``tps`` (None where nothing is committed)."""
        return self._require_group().committed(tps)

    def group_metadata(self) -> GroupMetadata:
        """The group id, member id and member epoch as they are now, for a transactional
        producer's `send_offsets_to_transaction` (the coordinator refuses a stale epoch), and
        the leader epoch of the last record read per partition, committed with the offsets as
        `commit` does."""
        group = self._require_group()
        return GroupMetadata(group.group_id, group.member_id, group.member_epoch, dict(self._last_epochs))

    @property
    def group(self) -> GroupSession | None:
        """The group membership (member id, epoch, state), None without group_id."""
        return self._group

    def _require_group(self) -> GroupSession:
        self._check_open()
        if self._group is None:
            raise KraftlogError("NO_GROUP", "this consumer has no group_id: create it with Consumer(..., group_id=...)", retriable=False)
        return self._group

    def _drop_fetched(self, tps: Iterable[TopicPartition]) -> None:
        """Stops reading ``tps``: their buffered data and streams go (a revocation)."""
        tps = set(tps)
        for tp in tps:
            self._buffered.pop(tp, None)
        self._cancel_streams(tps)

    def _committable_positions(self) -> dict[TopicPartition, int]:
        """Positions of assigned partitions that have one: what a commit records."""
        return {tp: pos for tp, pos in self._positions.items() if pos is not None}

    def _seek_committed(self, tp: TopicPartition, offset: int, leader_epoch: int) -> None:
        """Starts ``tp`` at its committed offset; with the epoch committed with it, the
        position is checked against the leader's log before the first fetch (KIP-320)."""
        self.seek(tp, offset)
        if leader_epoch >= 0:
            self._last_epochs[tp] = leader_epoch

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next poll returns `tp` from `offset`."""
        self._check_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset {offset} < 0: use seek_to_beginning/seek_to_end for logical positions")
        self._positions[tp] = offset
        self._resets.resolved([tp])
        self._last_epochs.pop(tp, None)
        self._validated_at.pop(tp, None)
        self._buffered.pop(tp, None)
        self._cancel_streams({tp})

    def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Positions partitions (all assigned by default) at their log start offset."""
        self._seek_to(EARLIEST, tps)

    def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Positions partitions (all assigned by default) at their high watermark."""
        self._seek_to(LATEST, tps)

    def position(self, tp: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record poll returns for `tp`, resolving a reset if needed:
        waits up to `timeout_ms` (default: request_timeout_ms) for the partition's leader to
        answer, then raises REQUEST_TIMED_OUT (poll meanwhile reads the other partitions)."""
        self._check_assigned(tp)
        if self._positions[tp] is None:
            self._require_reset_policy([tp])
            timeout_s = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000.0
            timestamp = self._reset_timestamp()
            try:
                answers = list_offsets(self._metadata, self._pool, {tp: timestamp}, timeout_s, self._retry_backoff_s, self._isolation_level)
            except KraftlogError as err:
                if not err.retriable:
                    raise
                raise KraftlogError(
                    "REQUEST_TIMED_OUT",
                    f"no position for {tp[0]}-{tp[1]}: its reset to the {self._auto_offset_reset} offset got no answer from the "
                    f"partition's leader within {timeout_s:.1f}s ({err}); see its leader with 'kraftlog topics describe {tp[0]}', "
                    "then call position() again with a longer timeout_ms, or seek() to a known offset",
                ) from err
            self._apply_offsets(answers, timestamp)
        return self._positions[tp]

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """For each partition, the first offset with a timestamp at or after the one given
        (None when there is no such record)."""
        answers = list_offsets(self._metadata, self._pool, timestamps, self._request_timeout_s, self._retry_backoff_s)
        return {tp: (a.offset if a.offset >= 0 else None) for tp, a in answers.items()}

    def high_watermark(self, tp: TopicPartition) -> int:
        """The partition's high watermark: from the last fetch, or asked of the leader."""
        hw = self._high_watermarks.get(tp)
        if hw is None:
            answer = list_offsets(self._metadata, self._pool, {tp: LATEST}, self._request_timeout_s)[tp]
            hw = self._high_watermarks[tp] = answer.offset
        return hw

    def log_start_offset(self, tp: TopicPartition) -> int | None:
        """The partition's log start offset as of the last fetch answer (None before one)."""
        return self._log_start_offsets.get(tp)

    # ------------------------------------------------------------ polling

    def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        """Returns records from one or more fetch responses, in offset order per partition, at
        most ``max_poll_records``; waits up to `timeout_ms` when none are buffered."""
        records: list[ConsumerRecord] = []
        for tp, batches in self._poll(timeout_ms, True, self._max_poll_records).items():
            records.extend(_records(tp, batches))
        return records

    def poll_batches(self, timeout_ms: float = 0, fetch_ahead: bool = True) -> dict[TopicPartition, list[record_batch.DecodedBatch]]:
        """Like poll, but hands out decoded batches per partition (no per-record objects).

        Every record returned is at or after the partition's position: a batch that
        straddles it is cut, and its header's base_offset, last_offset_delta and
        record_count describe the cut columns (its crc no longer matches, it is not bytes).
        With `fetch_ahead=False` no fetch is sent before returning: a caller that reads up
        to a known offset calls `fetch_ahead()` only if it needs more, and so never has a
        whole fetch past its end sent, received and thrown away.
        """
        return self._poll(timeout_ms, fetch_ahead, None)

    def _poll(self, timeout_ms: float, fetch_ahead: bool, max_records: int | None) -> dict[TopicPartition, list[record_batch.DecodedBatch]]:
        self._check_open()
        group = self._group
        if group is not None:
            group.on_poll()
        self._reset_positions()
        deadline = time.monotonic() + timeout_ms / 1000.0
        self._collect_completions(0.0)
        while not self._buffered:
            self._send_fetches(leader_wait_s=deadline - time.monotonic())
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._pending_error is not None:
                break
            reset_in = self._resets.next_retry_in(time.monotonic())
            if reset_in is not None:
                remaining = min(remaining, max(reset_in, 0.001))
            if group is not None:
                if group.reconciliation_due():
                    break
                remaining = min(remaining, GROUP_POLL_WAIT_S_MAX)
            self._collect_completions(remaining)
            self._reset_positions()
        if group is not None:
            group.on_poll()  # a revocation that arrived while waiting: its records are not handed out
        self._raise_pending()
        parts = self._take_buffered(max_records)
        if fetch_ahead:
            self.fetch_ahead()
        return parts

    def fetch_ahead(self) -> None:
        """Sends the next fetches now (for partitions with nothing buffered), so that they
        travel while the caller processes what it polled."""
        self._check_open()
        self._send_fetches()

    def close(self) -> None:
        """Cancels outstanding fetches and closes channels. A group member first commits
        (with auto-commit), revokes what it owns and leaves the group at once."""
        if self._closed:
            return
        if self._group is not None:
            self._group.close()
        self._closed = True
        for future, _ in self._in_flight.values():
            future.cancel()
        self._in_flight.clear()
        self._cancel_streams(None)
        self._pool.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise KraftlogError("CLIENT_CLOSED", "consumer used after close(); create a new one", retriable=False)

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise KraftlogError("NOT_ASSIGNED", f"{tp[0]}-{tp[1]} is not assigned", retriable=False)

    def _seek_to(self, timestamp: int, tps: Iterable[TopicPartition] | None) -> None:
        targets = list(self._positions) if tps is None else list(tps)
        for tp in targets:
            self._check_assigned(tp)
        answers = list_offsets(
            self._metadata, self._pool, {tp: timestamp for tp in targets}, self._request_timeout_s, self._retry_backoff_s,
            self._isolation_level,
        )
        self._apply_offsets(answers, timestamp)

    def _apply_offsets(self, answers: dict[TopicPartition, OffsetAndTimestamp], timestamp: int) -> None:
        """Positions the answered partitions where ListOffsets for ``timestamp`` put them."""
        self._cancel_streams(set(answers))
        self._resets.resolved(answers)
        for tp, answer in answers.items():
            self._positions[tp] = answer.offset
            self._last_epochs.pop(tp, None)
            self._validated_at.pop(tp, None)
            self._buffered.pop(tp, None)
            if timestamp == LATEST:
                self._high_watermarks[tp] = answer.offset

    def _require_reset_policy(self, tps: list[TopicPartition]) -> None:
        if self._auto_offset_reset == "none":
            names = ", ".join(f"{t}-{p}" for t, p in tps)
            raise KraftlogError("NO_POSITION", f"no position for {names} and auto_offset_reset='none'", retriable=False)

    def _reset_timestamp(self) -> int:
        return EARLIEST if self._auto_offset_reset == "earliest" else LATEST

    def _reset_positions(self) -> None:
        """Applies auto_offset_reset to partitions without a (valid) position, in one round
        of ListOffsets: a partition whose leader does not answer now (none known, unreachable,
        NOT_LEADER..., timed out) keeps no position and is tried again after a backoff, on
        fresh metadata, while the others are read."""
        tps = [tp for tp, pos in self._positions.items() if pos is None]
        if not tps:
            return
        self._require_reset_policy(tps)
        now = time.monotonic()
        due = self._resets.due(tps, now)
        if not due:
            return
        timestamp = self._reset_timestamp()
        got = try_list_offsets(self._metadata, self._pool, dict.fromkeys(due, timestamp), min(self._request_timeout_s, LOOKUP_TIMEOUT_S_MAX),
                               self._retry_backoff_s, self._isolation_level)
        self._apply_offsets(got.answers, timestamp)
        fatal = next((why for why in got.failures.values() if not why.retriable), None)
        if fatal is not None:
            raise fatal
        now = time.monotonic()
        for tp, why in got.failures.items():
            if self._resets.failed(tp, now):
                log.warning("offset reset unanswered; reading the other partitions meanwhile and retrying", topic=tp[0], partition=tp[1],
                            auto_offset_reset=self._auto_offset_reset, error=str(why), retry_in_s=round(self._resets.retry_in(tp, now), 3))

    def _positions_by_leader(self, skip, leader_wait_s: float = 0.0) -> dict[str, dict[TopicPartition, int]]:
        """Positioned partitions (but those ``skip(tp)`` names) grouped by leader address,
        leaving out leaders we back off from; refreshes metadata first when it is stale.

        With ``leader_wait_s`` (what is left of a poll), partitions whose leader failed are
        waited for with a Metadata long poll: the broker answers as soon as it knows of the new
        leader, instead of this consumer asking again a backoff later (docs/protocol.md)."""
        metadata = self._metadata
        since_refresh_ms = time.monotonic() * 1000 - metadata.last_refresh_ms
        awaited = self._leaders_awaited() if leader_wait_s > 0 else {}
        if (awaited and since_refresh_ms >= LEADER_WATCH_INTERVAL_MIN_MS) or (
                metadata.stale and since_refresh_ms >= self._retry_backoff_s * 1000):
            request = leader_watch(metadata, awaited, int(min(leader_wait_s * 1000, LEADER_WATCH_WAIT_MS))) if awaited else None
            try:
                refresh_sync(metadata, self._pool.stub, self._request_timeout_s, request)
            except KraftlogError:
                metadata.last_refresh_ms = time.monotonic() * 1000  # back off; fetches wait for leaders
        self._validate_positions(skip)
        now = time.monotonic()
        groups: dict[str, dict[TopicPartition, int]] = {}
        for tp, position in self._positions.items():
            if position is None or skip(tp) or self._validation_due(tp):
                continue
            leader = metadata.leader(tp)
            if leader is None:
                self._pending_error = metadata.topic_failure(tp[0]) or self._pending_error  # e.g. not authorized to describe it
                metadata.invalidate()
                continue
            if self._backoff_until.get(leader.address, 0.0) > now:
                continue
            groups.setdefault(leader.address, {})[tp] = position
        return groups

    def _leaders_awaited(self) -> dict[TopicPartition, int]:
        """Positioned partitions whose leader, as far as metadata knows, is one this consumer
        backs off from after a failed call, with that leader's epoch."""
        now = time.monotonic()
        awaited = {}
        for tp, position in self._positions.items():
            leader = self._metadata.leader(tp) if position is not None else None
            if leader is not None and self._backoff_until.get(leader.address, 0.0) > now:
                awaited[tp] = leader.leader_epoch
        return awaited

    def _resume_point(self, tp: TopicPartition) -> Position | None:
        """Where reading ``tp`` continues (past its buffered data) and the leader epoch of the
        record before it; None when that epoch is unknown (nothing read since a seek)."""
        held = self._buffered.get(tp)
        if held is not None:
            last = held.batches[-1].header
            return Position(last.last_offset + 1, last.leader_epoch)
        epoch, position = self._last_epochs.get(tp), self._positions.get(tp)
        return None if epoch is None or position is None else Position(position, epoch)

    def _validation_due(self, tp: TopicPartition) -> bool:
        """KIP-320: the position has not been checked against the log of the current leader."""
        current = self._metadata.leader_epoch(tp)
        return current >= 0 and self._validated_at.get(tp) != current and self._resume_point(tp) is not None

    def _validate_positions(self, skip) -> None:
        """Asks the leaders where the epoch of each unchecked position's last record ends
        (one OffsetForLeaderEpoch per leader) and applies what `check_position` decides."""
        due = {tp: (self._resume_point(tp), self._metadata.leader_epoch(tp))
               for tp in self._positions if not skip(tp) and self._validation_due(tp)}
        if not due:
            return
        try:
            got = try_epoch_end_offsets(self._metadata, self._pool, {tp: point.last_epoch for tp, (point, _) in due.items()},
                                        min(self._request_timeout_s, LOOKUP_TIMEOUT_S_MAX), self._retry_backoff_s)
        except KraftlogError as err:
            self._pending_error = err  # one that waiting will not cure
            return
        for tp, answer in got.answers.items():  # the unanswered stay unchecked, asked again next round
            point, epoch = due[tp]
            self._validated_at[tp] = epoch
            diverged = check_position(point, answer)
            if diverged is not None:
                self._truncated(tp, point, diverged)

    def _truncated(self, tp: TopicPartition, point: Position, diverged: Diverged) -> None:
        """The log was truncated below ``point``: never skip or re-read silently."""
        position = self._positions[tp]
        self._buffered.pop(tp, None)
        self._cancel_streams({tp})
        if diverged.offset is not None and diverged.offset >= position:
            return  # only records fetched but not yet handed out diverged: fetch again from the position
        fields = {"topic": tp[0], "partition": tp[1], "position": position, "last_epoch": point.last_epoch,
                  "divergent_offset": diverged.offset, "leader_epoch": self._metadata.leader_epoch(tp)}
        if self._auto_offset_reset == "none":
            self._validated_at.pop(tp, None)  # stays unchecked: every poll raises until the application seeks
            self._pending_error = LogTruncationError(tp, Position(position, self._last_epochs.get(tp, point.last_epoch)), diverged)
            return
        if diverged.offset is None:
            log.warning("log truncation detected; the divergence point is unknown, resetting by auto_offset_reset", **fields,
                        auto_offset_reset=self._auto_offset_reset)
            self._positions[tp] = None
            self._last_epochs.pop(tp, None)
        else:
            log.warning("log truncation detected; continuing from the first divergent offset", **fields)
            self._positions[tp] = diverged.offset
            self._last_epochs[tp] = diverged.epoch

    def _send_fetches(self, leader_wait_s: float = 0.0) -> None:
        """Sends one fetch to each leader broker that has none outstanding and has assigned
        partitions with a position and no buffered data (stream mode: opens streams); may wait
        up to ``leader_wait_s`` for the new leader of a partition whose leader failed."""
        if self._streams is not None:
            self._open_streams(leader_wait_s)
            return
        groups = self._positions_by_leader(lambda tp: tp in self._buffered, leader_wait_s)
        for address, positions in groups.items():
            if address in self._in_flight:
                continue
            future = self._pool.stub(address).Fetch.future(
                self._fetch_request(positions),
                timeout=self._fetch_max_wait_ms / 1000.0 + self._request_timeout_s,
            )
            self._in_flight[address] = (future, positions)
            future.add_done_callback(lambda _f, a=address: self._completions.put(a))

    def _fetch_request(self, positions: dict[TopicPartition, int]) -> broker_pb2.FetchRequest:
        topics: dict[str, broker_pb2.FetchTopic] = {}
        for (topic, partition), offset in positions.items():
            entry = topics.get(topic)
            if entry is None:
                entry = topics[topic] = broker_pb2.FetchTopic(topic=topic)
            entry.partitions.append(
                broker_pb2.FetchPartition(
                    partition=partition,
                    fetch_offset=offset,
                    partition_max_bytes=self._max_partition_fetch_bytes,
                    current_leader_epoch=self._metadata.leader_epoch((topic, partition)),
                )
            )
        return broker_pb2.FetchRequest(
            max_wait_ms=self._fetch_max_wait_ms,
            min_bytes=self._fetch_min_bytes,
            max_bytes=self._fetch_max_bytes,
            topics=list(topics.values()),
            format=broker_pb2.BATCHES,
            client_id=self._client_id,
            isolation_level=self._isolation_level,
        )

    def _open_streams(self, leader_wait_s: float = 0.0) -> None:
        """One stream per leader for the partitions no stream serves, from where each stands
        (past what is buffered for it)."""
        streaming = self._streams.streaming()
        now = time.monotonic()
        groups = self._positions_by_leader(lambda tp: tp in streaming or self._resting_until.get(tp, 0.0) > now, leader_wait_s)
        for address, positions in groups.items():
            for tp in positions:
                if tp in self._buffered:
                    positions[tp] = self._buffered[tp].batches[-1].header.last_offset + 1
            epochs = {tp: self._metadata.leader_epoch(tp) for tp in positions}
            self._streams.open(address, positions, epochs)

    def _cancel_streams(self, tps: set[TopicPartition] | None) -> None:
        """Stream mode: a seek or reassignment makes the streams of ``tps`` (all: None) stale."""
        if self._streams is not None:
            self._streams.cancel(tps)

    def _collect_stream_events(self, wait_s: float) -> None:
        """Processes what streams delivered, waiting up to `wait_s` for the first."""
        if not self._streams:
            if wait_s > 0:
                time.sleep(min(wait_s, self._retry_backoff_s))  # no stream: leaders unknown or backing off
            return
        streaming = self._streams.streaming()
        if any(position is not None and tp not in streaming for tp, position in self._positions.items()):
            wait_s = min(wait_s, self._retry_backoff_s)  # a partition waits for a new stream: come back to open it
        wait = wait_s
        for _ in range(256):  # bounded: granting credits lets more arrive meanwhile
            event = self._streams.next_event(wait) if self._streams is not None else None  # None: fell back to Fetch
            if event is None:
                return
            self._handle_stream_event(event)
            wait = 0.0

    def _handle_stream_event(self, event: StreamEvent) -> None:
        stream, message = event.stream, event.message
        if message is None:  # the stream is over; its partitions get a new one
            if event.error is not None and event.error.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._streams.cancel(None)  # a broker from before Consume existed: poll with Fetch from now on
                self._streams = None
            elif event.error is not None:
                self._rpc_failed(event.error, stream.address)
            return
        with_data = False
        for entry in message.partitions:
            tp = (entry.topic, entry.partition)
            assert stream.next_offsets.get(tp) == entry.fetch_offset, (tp, stream.next_offsets.get(tp), entry.fetch_offset)
            data = entry.batches  # each read of a bytes field copies it (megabytes): read it once
            if entry.error_code == ErrorCode.NONE:
                stream.next_offsets[tp] = entry.next_offset
                with_data = with_data or bool(data)
            else:  # the partition's last entry on this stream
                del stream.next_offsets[tp]
                self._resting_until[tp] = time.monotonic() + self._retry_backoff_s
            if self._positions.get(tp) is not None:
                self._handle_partition(tp, entry.fetch_offset, entry, data, message.node_endpoints)
        if with_data:
            stream.grant()

    def _rpc_failed(self, err: grpc.RpcError, address: str) -> None:
        """A call to ``address`` failed: remember a fatal error, back off from a retriable one."""
        error = from_rpc_error(err, address)
        if not error.retriable:
            self._pending_error = error
        self._metadata.invalidate()
        self._backoff_until[address] = time.monotonic() + self._retry_backoff_s

    def _collect_completions(self, wait_s: float) -> None:
        """Processes finished fetches, waiting up to `wait_s` for the first if none is done."""
        if self._streams is not None:
            self._collect_stream_events(wait_s)
            return
        if not self._in_flight:
            if wait_s > 0:  # nothing to wait on: leaders unknown or backing off (a throttle ends when it ends)
                now = time.monotonic()
                backoff_ends = [until - now for until in self._backoff_until.values() if until > now]
                time.sleep(min(wait_s, self._retry_backoff_s, *backoff_ends))
            return
        try:
            address = self._completions.get(timeout=wait_s) if wait_s > 0 else self._completions.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle_fetch(address)
            try:
                address = self._completions.get_nowait()
            except queue.Empty:
                return

    def _handle_fetch(self, address: str) -> None:
        entry = self._in_flight.pop(address, None)
        if entry is None:
            return  # cancelled by close()
        future, positions = entry
        try:
            response = future.result()
        except grpc.RpcError as err:
            self._rpc_failed(err, address)
            return
        if response.throttle_time_ms > 0:  # over a quota (docs/quotas.md): no fetch to this broker meanwhile
            self._backoff_until[address] = time.monotonic() + response.throttle_time_ms / 1000.0
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition)
                sent = positions.get(tp)
                if sent is None or self._positions.get(tp) != sent:
                    continue  # seek or reassignment since the fetch was sent: stale data
                self._handle_partition(tp, sent, answer, answer.batches, response.node_endpoints)

    def _handle_partition(
        self, tp: TopicPartition, fetch_offset: int, answer: broker_pb2.FetchPartitionResponse | broker_pb2.ConsumePartitionData,
        data: bytes, endpoints,
    ) -> None:
        """One partition's answer; ``data`` is its ``batches``, read once by the caller (each
        read of a protobuf bytes field copies it)."""
        if answer.error_code == ErrorCode.NONE:
            self._high_watermarks[tp] = answer.high_watermark
            self._log_start_offsets[tp] = answer.log_start_offset
            if data:
                try:
                    decoded = list(record_batch.decode_batches(data))
                except record_batch.CorruptBatchError as err:
                    self._pending_error = KraftlogError(ErrorCode.CORRUPT_MESSAGE, f"{tp[0]}-{tp[1]} at offset {fetch_offset}: {err}")
                    return
                aborted = aborted_of(answer)
                batches = [
                    cut_batch(b, fetch_offset)
                    for b in decoded
                    if b.header.last_offset >= fetch_offset and not b.header.is_control  # control: txn markers
                    and not (aborted and b.header.is_transactional and in_aborted(aborted, b.header.producer_id, b.header.base_offset))
                ]
                held = self._buffered.get(tp)
                end = decoded[-1].header.next_offset if decoded else fetch_offset
                end_epoch = decoded[-1].header.leader_epoch if decoded else -1
                if held is not None:  # stream mode: the next message before poll took the last
                    held.batches.extend(batches)
                    if end > held.end:
                        self._buffered[tp] = held._replace(end=end, end_epoch=end_epoch)
                elif batches:
                    self._buffered[tp] = _Fetched(fetch_offset, batches, end, end_epoch)
                elif decoded and end > fetch_offset:  # only markers or aborted records: pass them
                    self._positions[tp] = end
                    self._last_epochs[tp] = end_epoch
            return
        error = from_error_code(answer.error_code, answer.error_message, f"{tp[0]}-{tp[1]} at offset {fetch_offset}")
        if error.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self._auto_offset_reset == "none":
                self._pending_error = error
            else:
                self._positions[tp] = None
        elif error.retriable:
            if error.refresh_metadata:
                hint = answer.current_leader if answer.HasField("current_leader") else None
                self._metadata.apply_leader_hint(tp, hint, endpoints)
        else:
            self._pending_error = error

    def _raise_pending(self) -> None:
        error, self._pending_error = self._pending_error, None
        if error is not None:
            raise error

    def _take_buffered(self, max_records: int | None) -> dict[TopicPartition, list[record_batch.DecodedBatch]]:
        """Hands out what is buffered, at most ``max_records`` records (None: everything), and
        advances positions past it; the rest stays buffered for the next poll."""
        taken = {}
        left = max_records
        for tp, fetched in list(self._buffered.items()):
            if left is not None and left <= 0:
                break
            if left is None:
                head, rest = fetched.batches, []
            else:
                head, rest = split_batches(fetched.batches, left)
                left -= sum(b.header.record_count for b in head)
            taken[tp] = head
            last = head[-1].header
            del self._buffered[tp]
            if rest:  # last in line: the next poll starts with the other partitions
                self._buffered[tp] = fetched._replace(batches=rest)
                self._positions[tp], self._last_epochs[tp] = last.last_offset + 1, last.leader_epoch
                continue
            if fetched.end > last.last_offset + 1:  # markers or aborted batches after the records: a stream sends nothing again
                self._positions[tp], self._last_epochs[tp] = fetched.end, fetched.end_epoch
            else:
                self._positions[tp], self._last_epochs[tp] = last.last_offset + 1, last.leader_epoch
        return taken


def aborted_of(answer: broker_pb2.FetchPartitionResponse | broker_pb2.ConsumePartitionData) -> list[AbortedTxn]:
    """The aborted transactions a read_committed answer lists (none under read_uncommitted)."""
    return [AbortedTxn(t.first_offset, t.last_offset, t.producer_id) for t in answer.aborted_transactions]


def cut_batch(batch: record_batch.DecodedBatch, start_offset: int) -> record_batch.DecodedBatch:
    """The part of a decoded batch at or after `start_offset` (the batch itself if whole)."""
    if batch.header.base_offset >= start_offset:
        return batch  # decided from the header: the offsets column is not built
    return _sliced(batch, bisect.bisect_left(batch.offsets, start_offset), None)


def split_batches(batches: list[record_batch.DecodedBatch], count: int) -> tuple[list[record_batch.DecodedBatch], list[record_batch.DecodedBatch]]:
    """The first ``count`` records of ``batches`` and the rest; a batch that straddles the
    cut is cut in two."""
    head: list[record_batch.DecodedBatch] = []
    for i, batch in enumerate(batches):
        n = batch.header.record_count
        if n == count:
            return head + [batch], batches[i + 1:]
        if n > count:
            return head + [_sliced(batch, 0, count)], [_sliced(batch, count, None)] + batches[i + 1:]
        head.append(batch)
        count -= n
    return head, []


def _sliced(batch: record_batch.DecodedBatch, start: int, stop: int | None) -> record_batch.DecodedBatch:
    """The records ``start:stop`` of a batch, its header describing them (its crc no longer matches)."""
    kept = batch.offsets[start:stop]
    header = batch.header._replace(base_offset=kept[0], last_offset_delta=kept[-1] - kept[0], record_count=len(kept))
    return record_batch.DecodedBatch(
        header, kept, batch.timestamps[start:stop], batch.keys[start:stop], batch.values[start:stop], batch.headers[start:stop]
    )


def _records(tp: TopicPartition, batches: list[record_batch.DecodedBatch]) -> list[ConsumerRecord]:
    """ConsumerRecords of one partition's polled batches."""
    topic, partition = tp
    records: list[ConsumerRecord] = []
    for batch in batches:
        timestamp_type = batch.header.timestamp_type
        records.extend(
            ConsumerRecord(topic, partition, o, k, v, h, t, timestamp_type)
            for o, k, v, h, t in zip(batch.offsets, batch.keys, batch.values, batch.headers, batch.timestamps)
        )
    return records
