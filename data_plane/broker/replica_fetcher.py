"""The follower side of replication: one long-lived ReplicaFetch stream per leader broker.

Kafka runs one fetcher thread per (follower, leader) broker pair carrying every partition
the two share; here each pair is one asyncio task holding one bidirectional gRPC stream, and
the stream is a fetch session (Kafka's KIP-227; the leader's side is `fetch_session.py`). The
first round names every partition the pair shares (fetch offset = local LEO, last fetched
epoch = the epoch of the last local record, the leader epoch we follow); afterwards a round
names only what changed, and what the follower core says to name (`FollowerSession`): an idle
pair exchanges one empty request and one empty answer per leader wait, and a round looks
only at the partitions that may have changed. Each answer is held back by the leader until
data arrives or its wait expires.

What each partition's answer means is decided by the pure follower core
(`data_plane/replication/follower.py`: stale answers dropped, records appended and the HW
moved, a diverging epoch truncated by KIP-279's rule, OFFSET_OUT_OF_RANGE handled as Kafka
does, errors backed off); this module only builds the request, carries the decision out
through the replica manager (`append_as_follower`, `truncate_follower`,
`restart_follower_at`) and fetches again. The negative controls of the follower side are
rules the fetchers are built with (`fetcher_rules`), not checks in the fetch path.

A replica must never stop replicating in silence, so every wait is bounded and explained:
a metadata change that creates replicas or moves leaders hands each such partition to the
fetcher of its new leader, which looks at just that one (a fetcher that lost one looks at
every partition it holds, so its session lets it go; `ReplicaFetcherManager.sync`); a
replica whose ISR changed or whose local log went offline wakes its fetcher to look at just
that partition (`ReplicaFetcherManager.recheck`): nothing else changes what a round sends, so
there is no periodic look at every partition (with 50,000 replicas a broker spent two fifths
of its idle time in one every 5 s); a round with nothing to send looks again within
`fetch_round.IDLE_RECHECK_S`; a partition held back is logged with the reason (and again
when it is fetched again); a stream whose answer does not come within the leader's wait
plus `ANSWER_GRACE_S` is treated as broken and reopened; a diverging answer that changes
nothing locally backs the partition off with a warning instead of spinning.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import grpc
import structlog

from data_plane.broker.config import BrokerConfig, Durability, UnsafeBehaviour
from data_plane.partition_errors import PartitionError
from data_plane.broker.fetch_round import RoundPlan, plan_round, skip_changes
from data_plane.broker.partition import Partition
from data_plane.broker.replica_manager import ReplicaManager, TopicPartition
from data_plane.record_batch import first_base_offset
from data_plane.replication.divergence import DivergingEpoch
from data_plane.replication.follower import (
    Append,
    BackOff,
    FetchPosition,
    FollowerCore,
    FollowerDecision,
    FollowerLog,
    FollowerSession,
    Ignore,
    LeaderAnswer,
    RestartAt,
    SetHighWatermark,
    Truncate,
    apply_stale_answers,
)
from kraftlog_proto import broker_pb2, broker_pb2_grpc
from server_common.channel_pool import open_aio_channel
from server_common.errors import from_wire_code

log = structlog.get_logger("broker.fetcher")

RECONNECT_BACKOFF_S = 0.1
# How much longer than its own long-poll wait a leader may take to answer before the stream
# counts as broken (a leader that lost the stream's request, or a half-open connection).
ANSWER_GRACE_S = 5.0


# How long ``ReplicaFetcherManager.stop`` waits for its fetchers to end after asking them to
# stop; a fetcher still running then is abandoned with an error (the broker must still exit).
STOP_TIMEOUT_S = 5.0


@dataclass
class LeaderFetcher:
    """The stream from this broker to one leader broker: a fetch session (`FollowerSession`)."""

    leader_id: int
    address: str
    manager: "ReplicaFetcherManager"
    partitions: set[TopicPartition] = field(default_factory=set)
    backoff_until: dict[TopicPartition, float] = field(default_factory=dict)
    skipped: dict[TopicPartition, str] = field(default_factory=dict)  # held back, as last logged
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None
    session: FollowerSession[TopicPartition] = field(default_factory=FollowerSession)
    rescan: bool = True  # look at every partition in the next round (metadata changed)
    replicas_seen: dict[TopicPartition, Partition] = field(default_factory=dict)  # the replica each name was
    recheck: set[TopicPartition] = field(default_factory=set)  # look at these in the next round (ISR changed, log offline)
    stopped: bool = False  # set once by `stop`; every loop checks it, so a swallowed cancel cannot keep it running

    def stop(self) -> None:
        """Ask this fetcher to end: the flag ends every loop, the cancel ends the wait it is in."""
        self.stopped = True
        self.wake.set()
        if self.task is not None:
            self.task.cancel()

    async def run(self) -> None:
        while not self.stopped:
            try:
                await self._stream()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                if self.stopped:
                    return  # the stream was cancelled because this fetcher is stopping
                self.manager.log.info("replica fetch stream broke; reconnecting", leader=self.leader_id,
                                      address=self.address, code=exc.code().name)
            except ConnectionError as exc:
                self.manager.log.warning("replica fetch stream broke; reconnecting", leader=self.leader_id,
                                         address=self.address, reason=str(exc))
            except Exception:  # a fetcher must outlive any single bad answer
                self.manager.log.exception("replica fetcher failed; restarting it", leader=self.leader_id)
            await self._pause(RECONNECT_BACKOFF_S)

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` or until metadata changes what this fetcher does."""
        self.wake.clear()
        if self.stopped:
            return
        try:  # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a cancel that races the wake
            async with asyncio.timeout(seconds):
                await self.wake.wait()
        except TimeoutError:
            pass

    async def _stream(self) -> None:
        config = self.manager.config
        options = [("grpc.max_receive_message_length", config.request_max_bytes)]
        answer_timeout_s = config.replica_fetch_wait_max_ms / 1000 + ANSWER_GRACE_S
        self.session = FollowerSession()  # a new stream is a new session: it starts with a full list
        async with open_aio_channel(self.address, config.peer_credentials(), options) as channel:
            call = broker_pb2_grpc.BrokerStub(channel).ReplicaFetch()
            while not self.stopped:
                request, idle_s = self._request()
                if request is None:
                    await self._pause(idle_s)
                    continue
                try:
                    async with asyncio.timeout(answer_timeout_s):
                        await call.write(request)
                        response = await call.read()
                except TimeoutError:
                    call.cancel()
                    raise ConnectionError(f"leader {self.leader_id} did not answer within {answer_timeout_s:.1f}s") from None
                if self.stopped:
                    call.cancel()
                    return  # an answer that raced the stop is not applied
                if response is grpc.aio.EOF:
                    raise ConnectionError(f"leader {self.leader_id} closed the replica fetch stream")
                appended = self._apply(response)
                if appended and config.durability == Durability.FSYNC:
                    # The next fetch reports what this round made durable: the leader's HW waits for it.
                    await self.manager.replicas.follower_commit.request(appended)

    def _examine(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Partition | str]:
        """Each partition's local replica, or why it cannot be fetched from this leader now. A
        replica that is not the one seen before under its name (the topic was recreated)
        starts the session over: the leader must look it up again."""
        examined = {tp: self.manager.follower_or_reason(tp, self.leader_id) for tp in tps}
        for tp, partition in examined.items():
            if isinstance(partition, Partition) and self.replicas_seen.setdefault(tp, partition) is not partition:
                self.replicas_seen[tp] = partition
                self.session = FollowerSession()
        return examined

    def _request(self) -> tuple[broker_pb2.ReplicaFetchRequest | None, float]:
        """This round's request (None when the session has nothing to hold or ask), and how
        long to wait before the next round if there is none.

        A round looks only at the partitions that may have changed: those the session asks
        about (`FollowerSession.to_examine`), those whose backoff ended and those rechecked;
        every partition when the session is new, metadata changed or one looked at left the
        session."""
        now = time.monotonic()
        ended = {tp for tp, t in self.backoff_until.items() if t <= now}
        self.backoff_until = {tp: t for tp, t in self.backoff_until.items() if t > now and tp in self.partitions}
        complete = self.rescan or self.session.is_new
        examined = self._examine(self.partitions if complete else (self.session.to_examine() | ended | self.recheck) & self.partitions)
        self.recheck = set()
        if not complete and (self.session.is_new or any(isinstance(p, str) and self.session.leaves(tp) for tp, p in examined.items())):
            complete = True
            examined = self._examine(self.partitions)
        if complete:
            self.rescan = False
            self.replicas_seen = {tp: p for tp, p in self.replicas_seen.items() if tp in self.partitions}
        plan = plan_round({tp: p if isinstance(p, str) else None for tp, p in examined.items()}, self.backoff_until, now)
        self._log_skips(examined.keys(), plan)
        followers = {tp: p for tp, p in examined.items() if isinstance(p, Partition)}
        config = self.manager.config
        broker_id = config.broker_id
        planned = self.session.plan(
            {tp: position(p, config.durability == Durability.FSYNC) for tp, p in followers.items()},
            waiting=followers.keys() - set(plan.send),
            out_of_isr={tp for tp, p in followers.items() if broker_id not in p.state.isr},
            complete=complete,
        )
        if not planned.partitions and not self.session.holds_any():
            return None, plan.idle_s
        request = broker_pb2.ReplicaFetchRequest(
            replica_id=broker_id,
            broker_epoch=self.manager.broker_epoch(),
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=1,
            max_bytes=config.replica_fetch_max_bytes,
            incremental=not planned.full,
        )
        for tp, at in planned.partitions:
            asked = request.partitions.add(
                topic=tp[0], partition=tp[1], fetch_offset=at.fetch_offset, last_fetched_epoch=at.last_fetched_epoch,
                current_leader_epoch=at.leader_epoch, log_start_offset=followers[tp].log_start_offset,
            )
            if at.durable_offset >= 0:
                asked.durable_offset = at.durable_offset
        return request, plan.idle_s

    def _log_skips(self, examined: Iterable[TopicPartition], plan: RoundPlan) -> None:
        """Say when a partition stops being fetched, why, and when it is fetched again."""
        before = {tp: self.skipped.pop(tp) for tp in examined if tp in self.skipped}
        held, resumed = skip_changes(before, plan)
        for tp, reason in held.items():
            self.manager.log.info("replica fetch holding a partition back", topic=tp[0], partition=tp[1],
                                  leader=self.leader_id, reason=reason)
        for tp in resumed:
            self.manager.log.info("replica fetch resumed", topic=tp[0], partition=tp[1], leader=self.leader_id)
        self.skipped = {tp: r for tp, r in self.skipped.items() if tp in self.partitions} | plan.skipped

    def _apply(self, response: broker_pb2.ReplicaFetchResponse) -> list[Partition]:
        """Ask the follower core what each partition's answer means, and carry that out; the
        replicas that appended records."""
        appended: list[Partition] = []
        for answer in response.partitions:
            tp = (answer.topic, answer.partition)
            asked = self.session.held(tp)
            if asked is None:
                continue  # not in this session (a full list dropped it since)
            partition = self.manager.follower_or_reason(tp, self.leader_id)
            if isinstance(partition, str):
                self.session.answered(tp, None)
                continue
            decision = self.manager.rules.core.decide(follower_log(partition), leader_answer(answer, asked))
            try:
                self._carry_out(partition, decision)
                if isinstance(decision, (Append, SetHighWatermark)):  # a served answer: follow DeleteRecords
                    self.manager.replicas.follow_log_start(partition, answer.log_start_offset)
                    # and the leader serves the partition now: a backoff it refused earlier
                    # (a new leader whose metadata lagged this broker's) ends, so the next request
                    # names it; unnamed, the leader holds that request up to replica.fetch.wait.max.ms
                    self.backoff_until.pop(tp, None)
                if isinstance(decision, Append):
                    appended.append(partition)
            except PartitionError as exc:  # the local log went offline; the replica manager logged it
                self.manager.log.error("follower append failed", topic=tp[0], partition=tp[1], error=str(exc))
                decision = None
            self.session.answered(tp, decision)
        return appended

    def _carry_out(self, partition: Partition, decision: FollowerDecision) -> None:
        replicas = self.manager.replicas
        match decision:
            case Append(records=records):
                replicas.append_as_follower(partition, records)
                partition.high_watermark = decision.high_watermark_after(partition.log_end_offset)
            case SetHighWatermark(high_watermark):
                partition.high_watermark = high_watermark
            case Truncate(offset, reason):
                replicas.truncate_follower(partition, offset, f"leader {self.leader_id}: {reason}")
            case RestartAt(offset, reason):
                self.manager.log.info("follower log starts over", topic=partition.topic, partition=partition.partition,
                                      leader=self.leader_id, leader_epoch=partition.state.leader_epoch, reason=reason)
                replicas.restart_follower_at(partition, offset)
            case BackOff(backoff_ms, reason, warn):
                self.backoff_until[(partition.topic, partition.partition)] = time.monotonic() + backoff_ms / 1000
                say = self.manager.log.warning if warn else self.manager.log.info
                say("replica fetch backing off", topic=partition.topic, partition=partition.partition,
                    leader=self.leader_id, leader_epoch=partition.state.leader_epoch, reason=reason,
                    backoff_ms=backoff_ms, log_end_offset=partition.log_end_offset,
                    last_epoch=partition.latest_epoch)
            case Ignore():
                pass  # leadership or the log moved while the answer was in flight


def position(partition: Partition, durable: bool) -> FetchPosition:
    """Where a local replica fetches from: its log end, its last epoch, the leader epoch it
    follows and, with ``durable`` (``--durability fsync``), how far its log is fsynced."""
    durable_offset = partition.log.durable_offset if durable else -1
    return FetchPosition(partition.log_end_offset, partition.latest_epoch, partition.state.leader_epoch, durable_offset)


def follower_log(partition: Partition) -> FollowerLog:
    """The follower core's view of a local replica."""
    return FollowerLog(
        log_start_offset=partition.log_start_offset, log_end_offset=partition.log_end_offset,
        history=partition.epoch_entries, high_watermark=partition.high_watermark,
        leader_epoch=partition.state.leader_epoch,
    )


def leader_answer(answer: broker_pb2.ReplicaFetchPartitionResponse, asked: FetchPosition) -> LeaderAnswer[bytes]:
    """One partition of a leader's answer as the follower core's plain values."""
    diverging = answer.diverging_epoch if answer.HasField("diverging_epoch") else None
    return LeaderAnswer(
        asked_leader_epoch=asked.leader_epoch, asked_fetch_offset=asked.fetch_offset,
        error=from_wire_code(answer.error_code), message=answer.error_message, records=answer.batches,
        high_watermark=answer.high_watermark, log_start_offset=answer.log_start_offset,
        log_end_offset=answer.log_end_offset,
        diverging=None if diverging is None else DivergingEpoch(diverging.epoch, diverging.end_offset),
        records_base_offset=first_base_offset(answer.batches),
    )


@dataclass(frozen=True)
class FetcherRules:
    """The rules a broker's fetchers are built with: the follower core, and the partitions
    held back for good with the reason (none, unless a negative control says otherwise)."""

    core: FollowerCore
    held_back: Mapping[TopicPartition, str]


def fetcher_rules(unsafe: UnsafeBehaviour | None, restored: Callable[[], Iterable[TopicPartition]]) -> FetcherRules:
    """The one place the follower side reads ``--unsafe-testing`` (chaos negative controls):

    - ``skip-epoch-fencing``: answers apply even when leadership or the log moved meanwhile;
    - ``stall-fetcher``: the replicas found on disk at start (``restored``), i.e. after a
      restart, are never fetched again (``restored`` is asked only then).
    """
    if unsafe is UnsafeBehaviour.SKIP_EPOCH_FENCING:
        return FetcherRules(FollowerCore(stale_answer=apply_stale_answers), {})
    if unsafe is UnsafeBehaviour.STALL_FETCHER:
        reason = "unsafe testing: stall-fetcher holds back the replicas found on disk at start"
        return FetcherRules(FollowerCore(), {tp: reason for tp in restored()})
    return FetcherRules(FollowerCore(), {})


class ReplicaFetcherManager:
    """Keeps one LeaderFetcher per leader broker, matching who this broker follows."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, broker_epoch) -> None:
        self.config = config
        self.replicas = replicas
        self.broker_epoch = broker_epoch
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.log = log.bind(broker_id=config.broker_id)
        self._running = False
        self.rules = fetcher_rules(config.unsafe, lambda: replicas.logs.partitions())
        replicas.recheck_followers = self.recheck

    def recheck(self, tps: set[TopicPartition]) -> None:
        """These followed partitions changed without a change of leader (their ISR or leader epoch
        changed, or their local log went offline): wake the fetchers that hold them to look at
        just those, not at every partition."""
        for fetcher in self.fetchers.values():
            hit = tps & fetcher.partitions
            if hit:
                fetcher.recheck |= hit
                fetcher.wake.set()

    def follower_or_reason(self, tp: TopicPartition, leader_id: int) -> Partition | str:
        """The local replica of ``tp`` if it still follows ``leader_id`` and is online, else
        why it cannot be fetched from that leader."""
        held_back = self.rules.held_back.get(tp)
        if held_back is not None:
            return held_back
        partition = self.replicas.partitions.get(tp)
        if partition is None:
            return "no local replica"
        if partition.offline_reason is not None:
            return f"local log offline: {partition.offline_reason}"
        if partition.is_leader:
            return f"this broker leads it (leader epoch {partition.state.leader_epoch})"
        if partition.state.leader != leader_id:
            return f"its leader is now broker {partition.state.leader} (leader epoch {partition.state.leader_epoch})"
        if partition.state.leader_epoch < partition.latest_epoch:
            return (f"metadata older than the log (leader epoch {partition.state.leader_epoch} < "
                    f"{partition.latest_epoch} in the log); waiting for newer metadata")
        return partition

    def start(self) -> None:
        self._running = True
        self.sync()

    def sync(self, changed: Iterable[TopicPartition] | None = None) -> None:
        """Called after a metadata change that created replicas or moved leaders: put each
        partition on the fetcher of its leader, and wake the fetchers concerned. ``changed``:
        only these partitions came or changed leader (None: look at every partition, as after a
        broker's address changed or replicas went away). A fetcher that gains a partition looks
        at just that one next round; one that loses a partition does a complete round, so its
        session lets the partition go; the others are left alone (with 50,000 replicas, every
        fetcher looking at every partition once per metadata batch held the ISRs back while
        topics were created)."""
        if not self._running:
            return
        if changed is None:
            self._sync_all()
            return
        touched: set[int] = set()
        for tp in changed:
            leader = self._leader_to_follow(tp)
            for leader_id, fetcher in self.fetchers.items():
                if leader_id != leader and tp in fetcher.partitions:
                    fetcher.partitions.discard(tp)
                    fetcher.backoff_until.pop(tp, None)
                    fetcher.rescan = True
                    touched.add(leader_id)
            if leader is not None and self._fetcher_for(leader, 1) is not None:
                self.fetchers[leader].partitions.add(tp)
                self.fetchers[leader].recheck.add(tp)
                touched.add(leader)
        for leader_id in touched:
            fetcher = self.fetchers[leader_id]
            if fetcher.partitions:
                fetcher.wake.set()
            else:
                self._stop_fetcher(leader_id)

    def _leader_to_follow(self, tp: TopicPartition) -> int | None:
        partition = self.replicas.partitions.get(tp)
        if partition is None or partition.offline_reason is not None:
            return None
        leader = partition.state.leader
        return leader if leader >= 0 and leader != self.config.broker_id else None

    def _fetcher_for(self, leader_id: int, partitions: int) -> LeaderFetcher | None:
        """The fetcher from ``leader_id``, started if there is none; None until its address is known."""
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            address = self.broker_address(leader_id)
            if address is None:
                return None  # the leader's registration has not arrived yet; a later image brings it
            fetcher = self.fetchers[leader_id] = LeaderFetcher(leader_id, address, self)
            fetcher.task = asyncio.get_running_loop().create_task(fetcher.run())
            self.log.info("replica fetcher started", leader=leader_id, address=address, partitions=partitions)
        return fetcher

    def _sync_all(self) -> None:
        wanted: dict[int, set[TopicPartition]] = {}
        for tp in self.replicas.partitions:
            leader = self._leader_to_follow(tp)
            if leader is not None:
                wanted.setdefault(leader, set()).add(tp)
        for leader_id in list(self.fetchers):
            address = self.broker_address(leader_id)
            if leader_id not in wanted or self.fetchers[leader_id].address != address:
                self._stop_fetcher(leader_id)
        for leader_id, tps in wanted.items():
            fetcher = self._fetcher_for(leader_id, len(tps))
            if fetcher is None:
                continue
            if fetcher.partitions != tps:
                fetcher.partitions = tps
                fetcher.backoff_until.clear()
            fetcher.rescan = True
            fetcher.wake.set()

    def broker_address(self, leader_id: int) -> str | None:
        """Where broker ``leader_id`` serves replication (``--peer-address`` first, so tests can
        route a link through a proxy); None until its registration reaches this broker."""
        if leader_id in self.config.peer_addresses:
            host, port = self.config.peer_addresses[leader_id]
            return f"{host}:{port}"
        broker = self.replicas.image.brokers.get(leader_id) if self.replicas.image is not None else None
        return f"{broker.host}:{broker.port}" if broker is not None else None

    def _stop_fetcher(self, leader_id: int) -> None:
        self.fetchers.pop(leader_id).stop()
        self.log.info("replica fetcher stopping", leader=leader_id)

    async def stop(self) -> None:
        """Stop every fetcher and wait for them to end, at most STOP_TIMEOUT_S: the broker's
        shutdown must not hang on a fetcher (a stuck one is named and left behind)."""
        self._running = False
        tasks = {leader_id: f.task for leader_id, f in self.fetchers.items() if f.task is not None}
        for leader_id in list(self.fetchers):
            self._stop_fetcher(leader_id)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks.values(), timeout=STOP_TIMEOUT_S)
        stuck = sorted(leader_id for leader_id, task in tasks.items() if task in pending)
        if stuck:
            self.log.error("replica fetchers did not stop in time; shutting down without them",
                           leaders=stuck, timeout_s=STOP_TIMEOUT_S)
        else:
            self.log.info("replica fetchers stopped", leaders=sorted(tasks))

