"""The leader's side of a follower's ReplicaFetch stream: one fetch session per stream, in
the spirit of Kafka's incremental fetch sessions (KIP-227).

The follower opens the stream with every partition it fetches from this leader (a full
request) and afterwards names only the partitions whose position changed or that it asks
about again (`data_plane/replication/follower.py`, `FollowerSession`). The session keeps the
position of every partition it holds and watches each of those partitions (`Wakeups.watch`),
so a round costs what changed, never what the session holds:

- a round serves the partitions the request names, plus those that changed here since they
  were last served (an append, a HW move, a leadership change), plus those whose records did
  not fit in the last answer; each one goes through `FetchServing.serve_follower`, so the
  follower's progress, the HW and the ISR move exactly as for a fetch that named it. A HW
  (or log start) move alone, on a partition whose follower already has every record, is not
  served again and wakes nothing: the answer the round gives next carries the values of that
  moment (`note_high_watermark`). Every acks=all write moves the HW once, in the round of the
  follower whose acknowledgement completed it, and serving that partition again there and in
  every other follower's held round cost two passes through the leader core and a wake-up
  per write, for no message;
- the answer carries every partition the request named, and of the others only those with
  something new: records, a diverging epoch, an error, or a HW or log start other than the
  one last answered;
- like any fetch it is a long poll: with no records, divergence or error to give it waits
  for the next change of a held partition, at most the request's wait.

Push: while a request is held, an append to a held partition whose follower is caught up
(it asks at the log end it was last served, in the leader epoch of this replica) builds that
partition's answer in the appending task itself (`HeldPartition.__call__`, `FetchSession.push`):
the records are the bytes the append just stamped (the log's tail), the answer waits in the
session's outbox and the held round hands it to gRPC as it is, serving and reading nothing.
Appends that come while it waits (before the stream's task runs) are added to the same answer,
so under load one message still carries every batch appended meanwhile. The follower's next
request is its acknowledgement, served like any fetch through `FetchServing.serve_follower`
and the leader core. A follower that is not caught up (behind, restarted, truncated, or a
leader epoch behind) is served by fetching, as before, and is pushed to again once its request
reaches the log end. grpc.aio writes only from a coroutine and one at a time per stream, so
the stream's own task still hands the answer over: that wake-up is the one hop left.

What a follower acknowledges counts only up to what it can hold: where it first asked in this
session (in its leader epoch), or the end of the records sent to it since
(`HeldPartition.sent_to`, given to the core as `FollowerFetch.acknowledgeable`).

A partition the session holds but does not serve in a round is still fetched, in Kafka's
sense: the follower asks again at the same position every round. The leader core learns this
through the session's lease (`HeldPartition.vouched_until_ms`), read only when its log end
moves past the follower (`partition_state.LeaderPartitionState._note_sessions_caught_up`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, AsyncIterator, Callable

from data_plane.partition_errors import PartitionError, to_wire
from data_plane.broker.partition import Partition
from data_plane.record_batch import iter_headers
from data_plane.requests import ReplicaFetchItem, ReplicaFetchResult
from data_plane.replication.partition_state import FollowerFetch
from kraftlog_proto import broker_pb2
from server_common.nudge import Nudge

if TYPE_CHECKING:
    from data_plane.broker.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]

# How long a session expects a partition it was told about (`expect`), and the longest poll
# while it does: a follower that learns of its new leader a little after this broker answers
# within a few ms, one that never comes (its replica is offline) costs a few hundred short rounds.
EXPECT_S = 2.0
EXPECTING_POLL_S = 0.01


class HeldPartition:
    """One partition a session holds: the position the follower last named, what this leader
    last answered, the partition being watched, and the lease the leader core reads. Calling
    it (it is its partition's watcher) pushes what was just appended, or marks the partition
    changed for the next round."""

    __slots__ = ("tp", "session", "item", "answered", "watched", "released_ms", "served_end", "sent_to")

    def __init__(self, tp: TopicPartition, session: FetchSession, item: ReplicaFetchItem) -> None:
        self.tp = tp
        self.session = session
        self.item = item
        self.answered: tuple[int, int] | None = None  # (HW, log start) last answered
        self.watched: Partition | None = None
        self.released_ms: int | None = None
        self.served_end = -1  # our log end when last served records to the end (-1: not so)
        self.sent_to = item.fetch_offset  # the furthest offset the follower can hold from this session

    def __call__(self) -> None:
        session = self.session
        if not session.push(self) and not session.note_high_watermark(self):
            session.mark_changed(self.tp)

    def renew(self, item: ReplicaFetchItem) -> None:
        """The follower named the partition again. In a new leader epoch what it can
        acknowledge starts over where it asks (it may have fetched from another leader)."""
        if item.current_leader_epoch != self.item.current_leader_epoch:
            self.sent_to = item.fetch_offset
        self.item = item

    def sent(self, result: ReplicaFetchResult, unsent: bool) -> None:
        """``result`` (served by the round) goes to the follower: it may now hold every record
        in it, and when it got records up to our log end it is caught up asking there."""
        served = not result.failed and result.diverging is None and not unsent
        self.served_end = result.log_end_offset if served else -1
        if result.data:
            self.sent_to = max(self.sent_to, result.log_end_offset if not unsent else records_end(result.data))

    def vouched_until_ms(self) -> int:
        """The session's last round that still held this partition."""
        return self.session.last_round_ms if self.released_ms is None else self.released_ms

    def watch(self, partition: Partition | None) -> None:
        """Watch ``partition`` (the replica now under this name) instead of the one before."""
        if partition is self.watched:
            return
        if self.watched is not None:
            self.watched.append_waiter().unwatch(self)
        self.watched = partition
        if partition is not None:
            partition.append_waiter().watch(self)

    def release(self, last_round_ms: int) -> None:
        self.watch(None)
        self.released_ms = last_round_ms


class FetchSession:
    """One follower's ReplicaFetch stream on this leader."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas
        self.held: dict[TopicPartition, HeldPartition] = {}
        self.last_round_ms = 0
        self._changed: set[TopicPartition] = set()  # changed here since last served
        self._unsent: set[TopicPartition] = set()  # records left out of the last answer
        self._expected: dict[TopicPartition, float] = {}  # partitions this leader now leads, until the follower names them
        self._cut_short = False  # answer the round being held now (a partition was just expected)
        self._holding = False  # a round waits: an append may push into its answer
        self._pushed: dict[TopicPartition, ReplicaFetchResult] = {}  # the held round's answers, built by appends
        self._hw_moved: set[TopicPartition] = set()  # only the HW or log start moved: refreshed when answering
        self._push_room = 0  # bytes the held round's answer has left
        self._wake = Nudge()

    def expect(self, tp: TopicPartition) -> None:
        """This broker now leads ``tp`` and the follower does not hold it here yet: answer the
        held poll now and keep polls short until the follower names it (fetch_session_registry.py)."""
        if tp not in self.held:
            self._expected[tp] = time.monotonic() + EXPECT_S
            self._cut_short = True
            self._wake.set()

    def _expecting(self, now: float) -> bool:
        self._expected = {tp: until for tp, until in self._expected.items() if until > now and tp not in self.held}
        return bool(self._expected)

    def mark_changed(self, tp: TopicPartition) -> None:
        self._changed.add(tp)
        self._wake.set()

    def push(self, held: HeldPartition) -> bool:
        """Called by an append (or any change) to ``held``'s partition, in the appending task:
        while a round is held and the follower asks at the log end it was last served, in
        this replica's leader epoch, put the records appended since into the held round's
        answer (adding to one already waiting there). False when this is no push: the round
        serves the change itself."""
        partition = held.watched
        if not self._holding or partition is None or not partition.is_leader:
            return False
        pushed = self._pushed.get(held.tp)
        start, end = held.served_end, partition.log_end_offset
        if pushed is None and held.item.fetch_offset != start:
            return False  # behind, truncated, restarted or not served yet: it fetches
        if start < 0 or end <= start or self._push_room <= 0 or held.item.current_leader_epoch != partition.state.leader_epoch:
            return False
        try:
            data = partition.read(start, self._push_room, end)  # the append's own bytes, from the log's tail
        except PartitionError:
            return False  # the round serves it and answers the error
        if pushed is None:
            pushed = self._pushed[held.tp] = ReplicaFetchResult(held.tp[0], held.tp[1], data=data)
        else:
            pushed.data += data
        self._push_room -= len(data)
        pushed.high_watermark, pushed.log_start_offset = partition.high_watermark, partition.log_start_offset
        pushed.log_end_offset = end
        unsent = records_end(data) < end
        held.served_end = -1 if unsent else end  # where the next append's push starts (-1: none, fetch the rest)
        if unsent:
            self._unsent.add(held.tp)
        self._wake.set()
        return True

    def note_high_watermark(self, held: HeldPartition) -> bool:
        """Called by a change to ``held``'s partition that `push` did not take: when the
        follower already has every record (it was last served or pushed up to the log end, in
        this replica's leader epoch, and the log is online), only the HW or the log start can
        have moved. Nothing needs serving for that and no answer is due for it: the round
        answering next carries the values of that moment (`_refresh_high_watermarks`), as a
        re-serve would have, without waking the held round or going through the leader core
        again. False for any other change: the round serves it."""
        partition = _led_as_asked(held)
        if partition is None or held.served_end != partition.log_end_offset:
            return False
        self._hw_moved.add(held.tp)
        return True

    def _refresh_high_watermarks(self, answers: dict[TopicPartition, ReplicaFetchResult]) -> None:
        """Put the current HW and log start into this round's answers of the partitions whose
        HW alone moved since they were served (`note_high_watermark`); one not answered yet
        gets an answer of its own when they differ from what the follower was last told."""
        moved, self._hw_moved = self._hw_moved, set()
        for tp in moved:
            held = self.held.get(tp)
            partition = _led_as_asked(held) if held is not None else None
            if partition is None:
                continue  # a later change was served in full: its answer stands
            now = (partition.high_watermark, partition.log_start_offset)
            result = answers.get(tp)
            if result is None:
                if held.answered == now:
                    continue
                result = answers[tp] = ReplicaFetchResult(tp[0], tp[1], log_end_offset=held.served_end)
            elif result.failed or result.diverging is not None:
                continue
            result.high_watermark, result.log_start_offset = now

    def close(self) -> None:
        """The stream ended: stop watching. The leases stay as they are, frozen at the last
        round (the follower stopped asking then)."""
        for held in self.held.values():
            held.watch(None)

    def _take(self, full: bool, items: list[ReplicaFetchItem], now_ms: int) -> set[TopicPartition]:
        """Hold what the request names (a full request: only that); the names, to answer."""
        named = {(i.topic, i.partition): i for i in items}
        if full:
            for tp in [tp for tp in self.held if tp not in named]:
                self.held.pop(tp).release(self.last_round_ms)
                self._changed.discard(tp)
                self._unsent.discard(tp)
        self.last_round_ms = now_ms
        for tp, item in named.items():
            held = self.held.get(tp)
            if held is None:
                self.held[tp] = HeldPartition(tp, self, item)
            else:
                held.renew(item)
        return set(named)

    async def round(self, replica_id: int, broker_epoch: int, max_wait_ms: int, max_bytes: int, full: bool,
                    items: list[ReplicaFetchItem]) -> list[ReplicaFetchResult]:
        """One request's answer (see the module docstring)."""
        assert max_wait_ms >= 0 and max_bytes > 0, (max_wait_ms, max_bytes)
        replicas = self._replicas
        named = self._take(full, items, replicas.clock_ms())
        started = time.monotonic()
        deadline = started + min(max_wait_ms, replicas.config.fetch_max_wait_ms_cap) / 1000
        if self._expected and self._expecting(started):
            deadline = min(deadline, started + EXPECTING_POLL_S)
        answers: dict[TopicPartition, ReplicaFetchResult] = {}
        due = named | self._unsent
        self._unsent = set()
        total = 0
        while True:
            self._wake.clear()
            due |= self._changed
            self._changed = set()
            pushed, self._pushed = self._pushed, {}
            answer_now = bool(pushed)
            for tp, result in pushed.items():
                held = self.held.get(tp)
                if held is not None and tp not in due:  # a change since the push is served in full below instead
                    held.sent_to = max(held.sent_to, records_end(result.data))
                    answers[tp] = result
                    total += len(result.data)
            now_ms = replicas.clock_ms()
            broker = replicas.broker_status(replica_id)
            for tp in sorted(due):
                held = self.held.get(tp)
                if held is None:
                    continue
                item = held.item
                fetch = FollowerFetch(replica_id, broker_epoch, item.current_leader_epoch, item.fetch_offset,
                                      item.last_fetched_epoch, session=held, durable_offset=item.durable_offset,
                                      acknowledgeable=held.sent_to)
                result, partition, unsent = replicas.reads.serve_follower(tp[0], tp[1], fetch, broker, max_bytes - total, now_ms)
                held.watch(partition)
                held.sent(result, unsent)
                if unsent:
                    self._unsent.add(tp)
                total += len(result.data)
                urgent = bool(result.data) or result.diverging is not None or result.failed
                answer_now |= urgent
                if urgent or tp in named or held.answered != (result.high_watermark, result.log_start_offset):
                    answers[tp] = result
            due = set()
            remaining = deadline - time.monotonic()
            answer_now |= self._cut_short
            self._cut_short = False
            if answer_now or self._unsent or remaining <= 0:
                break
            self._holding, self._push_room = True, max_bytes - total
            try:
                await self._wake.wait(remaining)
            finally:
                self._holding = False
        if self._hw_moved:
            self._refresh_high_watermarks(answers)
        for tp, result in answers.items():
            held = self.held.get(tp)
            if held is not None and not result.failed:
                held.answered = (result.high_watermark, result.log_start_offset)
        return list(answers.values())


def _led_as_asked(held: HeldPartition) -> Partition | None:
    """``held``'s partition while this replica leads it, online, in the leader epoch the
    follower asks in; else None."""
    partition = held.watched
    if (partition is None or not partition.is_leader or partition.offline_reason is not None
            or held.item.current_leader_epoch != partition.state.leader_epoch):
        return None
    return partition


async def serve_stream(replicas: ReplicaManager, requests: AsyncIterator[broker_pb2.ReplicaFetchRequest],
                       items_of: Callable[[broker_pb2.ReplicaFetchRequest], list[ReplicaFetchItem]]) -> AsyncIterator[broker_pb2.ReplicaFetchResponse]:
    """One follower broker's ReplicaFetch stream: each request gets exactly one answer, in order.
    ``items_of`` validates a request and lists its partitions (the service's, so every RPC's
    validation lives in one module); what it raises ends the stream."""
    session = FetchSession(replicas)
    config = replicas.config
    replica_id: int | None = None
    try:
        async for request in requests:
            items = items_of(request)
            if replica_id is None:
                replica_id = request.replica_id
                replicas.fetch_sessions.add(replica_id, session)
            max_bytes = min(request.max_bytes or config.replica_fetch_max_bytes, config.request_max_bytes // 2)
            results = await session.round(request.replica_id, request.broker_epoch, request.max_wait_ms, max_bytes,
                                          not request.incremental, items)
            yield to_response(results)
    finally:
        session.close()
        if replica_id is not None:
            replicas.fetch_sessions.remove(replica_id, session)


def records_end(data: bytes) -> int:
    """The offset after the last record of whole batches ``data``."""
    *_, (_, last) = iter_headers(data)
    return last.next_offset


def to_response(results: list[ReplicaFetchResult]) -> broker_pb2.ReplicaFetchResponse:
    response = broker_pb2.ReplicaFetchResponse()
    for r in results:
        out = response.partitions.add(
            topic=r.topic, partition=r.partition, high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
            log_end_offset=r.log_end_offset, batches=r.data, **to_wire(r.error),
        )
        if r.diverging is not None:
            out.diverging_epoch.epoch = r.diverging.epoch
            out.diverging_epoch.end_offset = r.diverging.end_offset
    return response
