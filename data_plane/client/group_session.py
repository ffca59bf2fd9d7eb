"""A group consumer's membership at work: the heartbeat thread, reconciliation in the poll
thread, and offset commits.

The heartbeat thread only talks: it sends what ``GroupMembership`` asks (at the interval the
coordinator names, at once when something changed) and feeds back the answers. Everything
that touches the consumer's partitions happens in the application's thread, inside
``poll``: stopping a revoked partition, committing its position, the callbacks, fetching the
committed offsets of a new one. That keeps callbacks where the application expects them
(as Kafka does) and means a slow application delays its own rebalance, never corrupts it.

Commits (sync, async and automatic) go through one worker thread in order, so a later
commit never lands before an earlier one and committed offsets never move backwards.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import structlog

from data_plane.client.errors import KraftlogError, from_error_code
from data_plane.client.group_coordinator_link import CoordinatorLink, coordinator_channels, raise_commit_errors
from data_plane.client.group_membership import (
    FENCING_CODES, Action, GroupMembership, MemberState, Reconciliation, Subscription, offset_commit_request, to_topic_partitions,
)
from data_plane.client.metadata_cache import MetadataCache, TopicPartition
from kraftlog_proto import group_pb2
from server_common.client_security import ClientSecurity
from server_common.errors import ErrorCode

log = structlog.get_logger("kraftlog.client.group")

PartitionsCallback = Callable[[set[TopicPartition]], None]
LEAVE_TIMEOUT_S_MAX = 5.0
# The longest wait between two OffsetFetch asks while a partition's offset is in a transaction.
UNSTABLE_BACKOFF_S_MAX = 1.0


class CommittedOffset(NamedTuple):
    """A group's committed position of a partition: the next offset to read, the leader epoch
    of the record before it (KIP-320; -1 unknown) and the committer's metadata string."""

    offset: int
    leader_epoch: int
    metadata: str


@dataclass(frozen=True)
class OwnedPartitions:
    """What a group session does to its consumer's partitions, and all it does: the consumer
    hands these (its own methods and its live map of leader epochs) to the session, which
    therefore needs nothing else of the consumer (and group_session.py does not import
    consumer.py)."""

    assignment: Callable[[], set[TopicPartition]]
    set_assignment: Callable[[Iterable[TopicPartition]], None]
    drop_fetched: Callable[[Iterable[TopicPartition]], None]  # stop fetching these and forget what was fetched
    committable_positions: Callable[[], dict[TopicPartition, int]]
    seek_committed: Callable[[TopicPartition, int, int], None]  # (tp, offset, leader epoch)
    last_epochs: Mapping[TopicPartition, int]  # the leader epoch of the record before each position


class _Commit(NamedTuple):
    """One OffsetCommit to send: the request, what it commits, and the member's fence count
    when it was made (`GroupSession._recommit`)."""

    request: group_pb2.OffsetCommitRequest
    committed: dict[TopicPartition, CommittedOffset]
    fence_count: int


class GroupSession:
    """The group side of one Consumer."""

    def __init__(
        self, partitions: OwnedPartitions, security: ClientSecurity, metadata: MetadataCache, group_id: str, *,
        instance_id: str, client_id: str, enable_auto_commit: bool,
        auto_commit_interval_ms: int, rebalance_timeout_ms: int, assignor: str, request_timeout_s: float,
        retry_backoff_s: float, session_timeout_ms: int, require_stable: bool = False,
    ) -> None:
        if auto_commit_interval_ms <= 0:
            raise ValueError("auto_commit_interval_ms must be positive")
        self._partitions = partitions
        self._core = GroupMembership(
            group_id, uuid.uuid4().hex, instance_id=instance_id, client_id=client_id,
            rebalance_timeout_ms=rebalance_timeout_ms, assignor=assignor, session_timeout_ms=session_timeout_ms,
        )
        self._lock = threading.Lock()
        self._heartbeat_answered = threading.Condition(self._lock)  # `_recommit` waits for a newer epoch on it
        self._wake = threading.Event()
        self._pool = coordinator_channels(security, client_id)
        self.link = CoordinatorLink(group_id, metadata, self._pool, request_timeout_s, retry_backoff_s)
        self._retry_backoff_s = retry_backoff_s
        self._require_stable = require_stable
        self._request_timeout_s = request_timeout_s
        self._auto_commit = enable_auto_commit
        self._auto_commit_interval_s = auto_commit_interval_ms / 1000.0
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        self._auto_commit_future: Future | None = None
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"commit-{group_id}")
        self._on_assigned: PartitionsCallback | None = None
        self._on_revoked: PartitionsCallback | None = None
        self._on_lost: PartitionsCallback | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.group_id = group_id

    # ------------------------------------------------------------ what the consumer calls

    @property
    def member_id(self) -> str:
        return self._core.member_id

    @property
    def member_epoch(self) -> int:
        return self._core.member_epoch

    @property
    def state(self) -> MemberState:
        return self._core.state

    def owned(self) -> frozenset[TopicPartition]:
        with self._lock:
            return self._core.owned

    def subscribe(
        self, subscription: Subscription, on_assigned: PartitionsCallback | None, on_revoked: PartitionsCallback | None,
        on_lost: PartitionsCallback | None,
    ) -> None:
        self._on_assigned, self._on_revoked, self._on_lost = on_assigned, on_revoked, on_lost
        with self._lock:
            self._core.subscribe(subscription)
        if self._thread is None:
            self._thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{self.group_id}", daemon=True)
            self._thread.start()
        self._wake.set()

    def reconciliation_due(self) -> bool:
        """Whether the poll thread has a reconciliation to carry out (poll stops waiting)."""
        with self._lock:
            return self._core.reconciliation_due()

    def on_poll(self) -> None:
        """Called by every poll before it hands out records: raises a fatal group error,
        carries out a pending reconciliation, and commits automatically when due."""
        with self._lock:
            fatal = self._core.fatal_error
        if fatal is not None:
            raise from_error_code(fatal[0], fatal[1], f"group {self.group_id!r} member {self.member_id}")
        self._reconcile()
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            if self._auto_commit_future is None or self._auto_commit_future.done():
                self._auto_commit_future = self.commit_async(None, self._log_commit_failure)
            self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s

    def commit_async(
        self, offsets: dict[TopicPartition, int] | None, callback: Callable[[dict[TopicPartition, CommittedOffset], Exception | None], None] | None,
    ) -> Future:
        """Queues a commit of ``offsets`` (default: every owned partition's position); the
        future holds what was committed or the error; ``callback`` gets both."""
        commit = self._commit_request(offsets)
        future = self._committer.submit(self._send_commit, commit)
        if callback is not None:
            future.add_done_callback(lambda f: callback(commit.committed, f.exception()))
        return future

    def commit(self, offsets: dict[TopicPartition, int] | None) -> dict[TopicPartition, CommittedOffset]:
        """Commits and waits; raises KraftlogError when the coordinator refuses."""
        return self.commit_async(offsets, None).result()

    def committed(self, tps: Iterable[TopicPartition], timeout_s: float | None = None) -> dict[TopicPartition, CommittedOffset | None]:
        """The group's committed offsets of ``tps`` (None: nothing committed). With
        ``require_stable`` (a read_committed consumer) a partition whose offset is in an open
        transaction (UNSTABLE_OFFSET_COMMIT) is asked again, with backoff, until the
        transaction ends or ``timeout_s`` (default: the request timeout) passes: starting from
        an offset an abort drops would re-read records, or skip them if it commits."""
        result: dict[TopicPartition, CommittedOffset | None] = {tp: None for tp in tps}
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        backoff_s = self._retry_backoff_s
        wanted = list(result)
        while True:
            request = group_pb2.OffsetFetchRequest(group_id=self.group_id, topics=to_topic_partitions(wanted),
                                                   require_stable=self._require_stable)
            answer = self.link.call("OffsetFetch", request, max(deadline - time.monotonic(), 0.001))
            if answer.error_code != ErrorCode.NONE:
                raise from_error_code(answer.error_code, answer.error_message, f"OffsetFetch of group {self.group_id!r}")
            unstable: list[tuple[TopicPartition, KraftlogError]] = []
            for topic in answer.topics:
                for p in topic.partitions:
                    tp = (topic.topic, p.partition)
                    if p.error_code != ErrorCode.NONE:
                        error = from_error_code(p.error_code, p.error_message, f"OffsetFetch of group {self.group_id!r} {tp[0]}-{tp[1]}")
                        if p.error_code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                            raise error
                        unstable.append((tp, error))
                    elif tp in result and p.committed_offset >= 0:
                        result[tp] = CommittedOffset(p.committed_offset, p.committed_leader_epoch, p.metadata)
            if not unstable:
                return result
            if time.monotonic() + backoff_s >= deadline:
                raise unstable[0][1]
            wanted = [tp for tp, _ in unstable]
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, UNSTABLE_BACKOFF_S_MAX)

    def close(self) -> None:
        """Commits (with auto-commit), revokes everything owned (callback included), waits for
        queued commits, leaves the group at once and stops the threads. Errors are logged:
        close never raises."""
        if self._stopped:
            return
        try:
            with self._lock:
                rec = self._core.release_all()
            if rec is not None:
                self._carry_out(rec, self._auto_commit)
                with self._lock:
                    self._core.reconciled(rec)
        except Exception as err:  # noqa: BLE001 - close must finish and leave the group
            log.warning("group_close_revoke_failed", group=self.group_id, member=self.member_id, error=str(err))
        self._committer.shutdown(wait=True)  # queued async commits land while the member is still in the group
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self._request_timeout_s)
        self._leave()
        self._pool.close()

    # ------------------------------------------------------------ reconciliation (poll thread)

    def _reconcile(self) -> None:
        with self._lock:
            rec = self._core.next_reconciliation()
        if rec is None:
            return
        try:
            self._carry_out(rec, self._auto_commit)
        except BaseException:
            with self._lock:
                self._core.abandon(rec)
            raise
        with self._lock:
            self._core.reconciled(rec)
        self._wake.set()

    def _carry_out(self, rec: Reconciliation, commit: bool) -> None:
        """Revoke first (stop fetching, commit unless lost, callback, release), then assign
        (committed offsets as positions, callback). The committed offsets are fetched before
        anything changes, so a failure leaves the consumer as it was and the next poll retries."""
        partitions = self._partitions
        committed = self.committed(rec.assign) if rec.assign else {}
        if rec.revoke:
            partitions.drop_fetched(rec.revoke)
            if rec.lost:
                callback = self._on_lost or self._on_revoked
            else:
                callback = self._on_revoked
                if commit:
                    try:
                        self.commit({tp: pos for tp, pos in partitions.committable_positions().items() if tp in rec.revoke})
                    except KraftlogError as err:
                        log.warning("group_revoke_commit_failed", group=self.group_id, member=self.member_id, error=str(err))
            if callback is not None:
                callback(set(rec.revoke))
        keep = set(partitions.assignment()) - rec.revoke
        partitions.set_assignment(keep | rec.assign)
        for tp in rec.assign:
            found = committed.get(tp)
            if found is not None:
                partitions.seek_committed(tp, found.offset, found.leader_epoch)
        log.info(
            "group_reconciled", group=self.group_id, member=self.member_id, epoch=self.member_epoch,
            revoked=sorted(rec.revoke), assigned=sorted(rec.assign), lost=rec.lost,
        )
        if rec.assign and self._on_assigned is not None:
            self._on_assigned(set(rec.assign))

    # ------------------------------------------------------------ commits (commit thread)

    def _commit_request(self, offsets: dict[TopicPartition, int] | None) -> _Commit:
        positions = self._partitions.committable_positions() if offsets is None else dict(offsets)
        epochs = self._partitions.last_epochs
        committed = {tp: CommittedOffset(pos, epochs.get(tp, -1), "") for tp, pos in positions.items()}
        with self._lock:
            member_id, epoch, fence_count = self._core.member_id, self._core.member_epoch, self._core.fence_count
        return _Commit(self._offset_commit(member_id, epoch, committed), committed, fence_count)

    def _offset_commit(self, member_id: str, epoch: int, committed: dict[TopicPartition, CommittedOffset]) -> group_pb2.OffsetCommitRequest:
        return offset_commit_request(self.group_id, member_id, epoch, {tp: (c.offset, c.leader_epoch) for tp, c in committed.items()})

    def _send_commit(self, commit: _Commit) -> dict[TopicPartition, CommittedOffset]:
        """Sends one commit. A STALE_MEMBER_EPOCH refusal raced an assignment change: the
        coordinator gave the member a newer epoch (in a heartbeat answer, which reaches this
        member too) after the request was made. The commit goes again with that epoch, for the
        partitions the member still owns (they stay its until it reports them revoked, so their
        positions are still its to commit), as Kafka's consumer does; within request_timeout_ms.
        Not after a fence: the member lost its partitions, and their next owners may have read
        on and committed further. A revocation of this member's own cannot pass meanwhile: its
        commit waits behind this one on the commit thread. Without the retry a commit at
        close, or the last auto-commit before a revocation, could be lost to a rebalance
        elsewhere in the group, and the next owner would read again what this member had
        already read."""
        if not commit.committed:
            return commit.committed
        deadline = time.monotonic() + self._request_timeout_s
        while True:
            answer = self.link.call("OffsetCommit", commit.request)
            if answer.error_code != ErrorCode.STALE_MEMBER_EPOCH:
                break
            again = self._recommit(commit, deadline)
            if again is None:
                break
            commit = again
        request = commit.request
        where = f"OffsetCommit of group {self.group_id!r} (member {request.member_id} epoch {request.member_epoch})"
        if answer.error_code in FENCING_CODES or answer.error_code == ErrorCode.STALE_MEMBER_EPOCH:
            where += "; the member's partitions moved to another member, whose commits now count"
        raise_commit_errors(answer, where)
        return commit.committed

    def _recommit(self, commit: _Commit, deadline: float) -> _Commit | None:
        """The commit again at the member's newer epoch, once its heartbeat has learnt one, for
        the partitions it still owns; None when there is none by ``deadline``, the member was
        fenced since the commit was made, or it owns none of them any more."""
        core, asked = self._core, commit.request
        with self._lock:  # the heartbeat answer with the newer epoch is usually on its way already
            self._heartbeat_answered.wait_for(
                lambda: core.fence_count != commit.fence_count or core.member_epoch != asked.member_epoch,
                timeout=max(deadline - time.monotonic(), 0.0))
            member_id, epoch, owned = core.member_id, core.member_epoch, core.owned
            fenced = core.fence_count != commit.fence_count
        if fenced or member_id != asked.member_id or epoch <= asked.member_epoch:
            return None
        kept = {tp: c for tp, c in commit.committed.items() if tp in owned}
        return _Commit(self._offset_commit(member_id, epoch, kept), kept, commit.fence_count) if kept else None

    def _log_commit_failure(self, committed: dict, error: Exception | None) -> None:
        if error is not None:
            log.warning("group_auto_commit_failed", group=self.group_id, member=self.member_id, partitions=len(committed), error=str(error))

    # ------------------------------------------------------------ heartbeats (heartbeat thread)

    def _heartbeat_loop(self) -> None:
        next_at = 0.0
        while not self._stopped:
            with self._lock:
                wanted = self._core.wants_heartbeat()
                due_now = self._core.heartbeat_due_now()
                interval_s = self._core.heartbeat_interval_ms / 1000.0
            now = time.monotonic()
            if not wanted or (not due_now and now < next_at):
                self._wake.wait(timeout=max(next_at - now, 0.0) if wanted else interval_s)
                self._wake.clear()
                continue
            try:
                next_at = time.monotonic() + self._heartbeat_once(interval_s)
            except Exception as err:  # noqa: BLE001 - a bug here must surface from poll, not end heartbeats silently
                log.error("group_heartbeat_thread_failed", group=self.group_id, member=self.member_id, error=repr(err))
                with self._lock:
                    self._core.fail(ErrorCode.UNKNOWN_SERVER_ERROR, repr(err))
                return

    def _heartbeat_once(self, interval_s: float) -> float:
        """Sends one heartbeat; returns how long to wait before the next."""
        with self._lock:
            if not self._core.wants_heartbeat() or self._core.state == MemberState.LEAVING:
                return 0.0
            request = self._core.heartbeat_request()
        try:
            answer = self.link.call_once("ConsumerGroupHeartbeat", request, min(self._request_timeout_s, max(interval_s * 2, 1.0)))
        except KraftlogError as err:
            log.info("group_heartbeat_failed", group=self.group_id, member=self.member_id, error=str(err))
            with self._lock:
                if not err.retriable:
                    self._core.fail(ErrorCode.UNKNOWN_SERVER_ERROR, str(err))
                elif self._core.session_lost(time.monotonic() * 1000):
                    log.warning("group_session_lost", group=self.group_id, member=self.member_id,
                                session_timeout_ms=self._core.session_timeout_ms, error=str(err))
                self._heartbeat_answered.notify_all()
            return self._retry_backoff_s
        with self._lock:
            before = (self._core.member_epoch, self._core.state)
            action = self._core.on_heartbeat_answer(request, answer)
            if answer.error_code == ErrorCode.NONE:
                self._core.heartbeat_succeeded(time.monotonic() * 1000)
            elif action in (Action.FIND_COORDINATOR, Action.RETRY_LATER) and self._core.session_lost(time.monotonic() * 1000):
                log.warning("group_session_lost", group=self.group_id, member=self.member_id,
                            session_timeout_ms=self._core.session_timeout_ms, error=answer.error_code)
            after = (self._core.member_epoch, self._core.state)
            self._heartbeat_answered.notify_all()
        if before != after or answer.has_assignment or answer.error_code != ErrorCode.NONE:
            log.info(
                "group_heartbeat", group=self.group_id, member=self.member_id, coordinator=self.link.coordinator_id,
                epoch=after[0], state=after[1].value, error=answer.error_code, assignment=answer.has_assignment,
            )
        if action == Action.FIND_COORDINATOR:
            self.link.forget()
            return self._retry_backoff_s
        if action == Action.RETRY_LATER:
            return self._retry_backoff_s
        return 0.0 if self._core.heartbeat_due_now() else self._core.heartbeat_interval_ms / 1000.0

    def _leave(self) -> None:
        """Sends the leave heartbeat (epoch -1; -2 for a static member) from the closing thread."""
        with self._lock:
            self._core.leave()
            if self._core.state != MemberState.LEAVING:
                return  # never joined, or fatal
            request = self._core.heartbeat_request()
        deadline = time.monotonic() + min(self._request_timeout_s, LEAVE_TIMEOUT_S_MAX)
        while time.monotonic() < deadline:
            try:
                answer = self.link.call_once("ConsumerGroupHeartbeat", request, max(deadline - time.monotonic(), 0.01))
            except KraftlogError as err:
                log.info("group_leave_failed", group=self.group_id, member=self.member_id, error=str(err))
                time.sleep(self._retry_backoff_s)
                continue
            with self._lock:
                action = self._core.on_heartbeat_answer(request, answer)
            if action == Action.CONTINUE:
                log.info("group_left", group=self.group_id, member=self.member_id)
                return
            if action == Action.FIND_COORDINATOR:
                self.link.forget()
            time.sleep(self._retry_backoff_s)
