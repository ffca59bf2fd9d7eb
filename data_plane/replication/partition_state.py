"""One partition's replication state on its leader: HW, ISR, follower progress, delayed produces.

A pure core in etcd-raft's style: no sockets, threads, clocks or files. The
broker's asyncio shell feeds it events (`on_leader_append`, `on_follower_fetch`, `on_tick`,
`on_alter_partition_result`, `on_partition_change`, `on_config_change`,
`add_delayed_produce`) with the time as
`now_ms`, and carries out the `LeaderDecisions` it gets back: publish the new HW, send the
AlterPartition proposal, answer the completed produces. One instance lives for one leader
epoch; a new epoch (even with the same leader) is a new instance, and the old one `resign`s.

Rules implemented (docs/architecture.md, "Replication"; Kafka `Partition.scala`):

- HW = min LEO over the ISR, and a leader's HW never goes down
  (`maybeIncrementLeaderHW`). While an AlterPartition is in flight the HW counts the
  *maximal* ISR, committed ISR ∪ proposed ISR (KIP-497): an expansion counts the new member
  at once (waiting for more replicas is always safe) and a shrink keeps counting the member
  being removed until the controller has committed its removal (if the proposal fails, that
  member may still be in the ISR the controller elects from).
- A follower joins the ISR when its LEO >= HW and >= the start offset of the leader's
  current epoch (`isFollowerInSync`) and its broker is registered, unfenced, not shutting
  down and fetching on its current broker epoch (KIP-903, `isReplicaIsrEligible`).
- A follower leaves the ISR when it has not been caught up to the leader's LEO for
  `replica_lag_time_max_ms` (`isFollowerOutOfSync`, `Replica.updateFetchState`).
- One AlterPartition at a time, based on the partition epoch we hold; the change exists only
  once the controller has committed it.
- acks=all needs |ISR| >= min.insync.replicas before the append (NOT_ENOUGH_REPLICAS,
  nothing appended) and completes once HW passes the batch; if the ISR fell below
  min.insync.replicas meanwhile, the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND
  (`checkEnoughReplicasReachOffset`). Expired waits answer REQUEST_TIMED_OUT; losing
  leadership answers NOT_LEADER_OR_FOLLOWER. Both mean "outcome unknown" to the client.
- A fetch whose logs diverge does not update the follower's progress: its LEO counts only
  once its log matches ours (Kafka skips `updateFollowerFetchState` on a diverging epoch).
- Durable acknowledgements (``--durability fsync``, `durable_offset` given at election): the
  HW counts, instead of LEOs, the offsets each replica reported durable (fsynced): the
  leader's own (`on_leader_synced`) and each follower's, carried in its fetch
  (`FollowerFetch.durable_offset`). So an acks=all produce completes only once every member
  of the (maximal) ISR has fsynced it, and consumers never read what a power failure of every
  replica could take back. ISR membership still follows LEOs (durability is not liveness).
- Fetch sessions: a follower's fetch may come through a session (`FollowerFetch.session`)
  that goes on asking at the same position in every round without naming the partition.
  When our LEO moves past a follower that was at it, the follower counts as caught up until
  the session's last round that still held the partition (`FetchSessionLease`), as if it had
  fetched at our LEO in each of those rounds (Kafka sees one fetch per round instead).
- Push: a session that pushes appended records to a follower tells how far the follower can
  hold records from it (`FollowerFetch.acknowledgeable`); a fetch offset past that (or past our
  log start, where a follower that restarts at it begins) counts only up to it, so a follower
  acknowledging records it never received moves neither the HW nor its ISR standing.
"""

from dataclasses import dataclass, field
from typing import Hashable, Protocol, Sequence

from data_plane.replication.divergence import FetchCheck, FetchRejected, ServeFrom, check_follower_fetch
from data_plane.replication.epoch_history import EpochEntry, EpochHistory, check_history
from server_common.errors import ErrorCode
from data_plane.replication.fetch_validation import check_leader_epoch

UNKNOWN_OFFSET = -1
ACKS_NONE, ACKS_LEADER, ACKS_ALL = 0, 1, -1


@dataclass(frozen=True)
class BrokerStatus:
    """What the metadata image says about a follower's broker (the shell looks it up)."""

    broker_epoch: int
    fenced: bool
    in_controlled_shutdown: bool


class FetchSessionLease(Protocol):
    """A fetch session's word about one partition it holds (`data_plane/broker/fetch_session.py`)."""

    def vouched_until_ms(self) -> int:
        """The time of the session's last round that still held the partition: the follower
        asked again, at the position of its last fetch, in every round until then."""
        ...


@dataclass(frozen=True)
class FollowerFetch:
    """One partition of a follower's replica fetch, as the follower sent it (or, through a
    fetch session, as the session holds it: ``session`` is then the session's lease)."""

    replica_id: int
    broker_epoch: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    session: FetchSessionLease | None = None
    durable_offset: int = UNKNOWN_OFFSET  # the follower's log is fsynced below this (fsync durability only)
    acknowledgeable: int | None = None  # a pushing session's bound on what the follower can hold (None: its word)


@dataclass
class ReplicaProgress:
    """The leader's view of one follower. Mutable, private to the leader state."""

    log_end_offset: int = UNKNOWN_OFFSET
    durable_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = -1
    session: FetchSessionLease | None = None  # the session the last fetch came through


@dataclass(frozen=True)
class IsrProposal:
    """AlterPartition to send to the controller. `added_broker_epochs` carries, per KIP-903,
    the broker epoch each added replica fetched with, so the controller can refuse a replica
    that restarted in between."""

    leader_epoch: int
    partition_epoch: int
    new_isr: frozenset[int]
    added_broker_epochs: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class AlterPartitionCommitted:
    """The controller committed a partition change in answer to our proposal."""

    leader_epoch: int
    partition_epoch: int
    isr: frozenset[int]


@dataclass(frozen=True)
class AlterPartitionRefused:
    """The controller refused (e.g. INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, FENCED_LEADER_EPOCH)
    or the request failed; the proposal is dropped and will be re-derived from fresh state."""

    error: ErrorCode


@dataclass(frozen=True)
class ProduceOutcome:
    """Answer for one delayed acks=all produce, identified by the shell's token."""

    token: Hashable
    error: ErrorCode


@dataclass(frozen=True)
class LeaderDecisions:
    """What the shell must do after an event. `high_watermark` is set only when it moved."""

    high_watermark: int | None = None
    isr_proposal: IsrProposal | None = None
    completed: tuple[ProduceOutcome, ...] = ()


NO_DECISIONS = LeaderDecisions()


@dataclass(frozen=True)
class FetchDecisions:
    """Answer to a follower fetch: how to serve it, plus the leader decisions it caused."""

    fetch: FetchCheck
    decisions: LeaderDecisions = field(default_factory=LeaderDecisions)


@dataclass(frozen=True)
class _DelayedProduce:
    token: Hashable
    required_offset: int
    deadline_ms: int


class LeaderPartitionState:
    """Replication state of one partition on its leader, for one leader epoch."""

    def __init__(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Sequence[int],
        isr: frozenset[int],
        leader_history: Sequence[EpochEntry],
        log_end_offset: int,
        high_watermark: int,
        min_insync_replicas: int,
        now_ms: int,
        durable_offset: int | None = None,
    ) -> None:
        """Become leader. `leader_history` must already end with (leader_epoch, LEO at
        election), which the shell assigns in the epoch checkpoint first (Kafka's `makeLeader`).
        Followers start with an unknown LEO; those in the ISR count as caught up now, so they
        get a full `replica_lag_time_max_ms` before being shrunk out.

        `leadership_start_offset` is the LEO now, not where `leader_epoch` starts in the log:
        a broker restarted after a crash may lead again in the epoch it led before (the
        metadata it replays says so until its new registration moves the leadership), with
        the HW of its checkpoint, below the HW it had published. Until the HW reaches this
        offset it is not published (see `Partition.check_high_watermark_settled`), and a
        follower must reach it to join the ISR (Kafka's `leaderEpochStartOffsetOpt`, also
        set to the LEO whenever a replica becomes leader).

        `durable_offset` (None: page-cache durability, the HW counts LEOs) is how far the
        leader's log is fsynced now; given, the HW counts durable offsets instead."""
        history = check_history(leader_history, log_end_offset)
        assert history and history[-1].epoch == leader_epoch, (history, leader_epoch)
        assert leader_id in replicas and leader_id in isr, (leader_id, replicas, isr)
        assert isr <= frozenset(replicas), (isr, replicas)
        assert 0 <= high_watermark <= log_end_offset, (high_watermark, log_end_offset)
        assert min_insync_replicas >= 1, min_insync_replicas
        assert durable_offset is None or 0 <= durable_offset <= log_end_offset, (durable_offset, log_end_offset)
        self.leader_id = leader_id
        self.durable_offset = durable_offset
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.pending_isr: IsrProposal | None = None
        self.leader_history: EpochHistory = history
        self.leadership_start_offset = log_end_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = high_watermark
        self.min_insync_replicas = min_insync_replicas
        self.progress = {
            r: ReplicaProgress(last_caught_up_ms=now_ms if r in isr else 0)
            for r in replicas
            if r != leader_id
        }
        self._delayed: list[_DelayedProduce] = []
        self._resigned = False

    # ------------------------------------------------------------------ queries

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The replicas the HW waits for: committed ISR ∪ proposed ISR (KIP-497)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr | self.pending_isr.new_isr

    @property
    def has_delayed_produces(self) -> bool:
        return bool(self._delayed)

    @property
    def followers_caught_up(self) -> bool:
        """Every in-sync follower has the leader's log end: none can start lagging before the
        leader's next event (an append or a fetch), so the ISR sweep can skip this leader."""
        return all(self.progress[r].log_end_offset == self.log_end_offset for r in self.isr if r != self.leader_id)

    def check_produce(self, acks: int) -> ErrorCode:
        """Check a produce before anything is appended (acks was validated at the wire)."""
        assert not self._resigned
        assert acks in (ACKS_NONE, ACKS_LEADER, ACKS_ALL), acks
        if acks == ACKS_ALL and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    # ------------------------------------------------------------------ events

    def on_leader_append(self, log_end_offset: int, now_ms: int) -> LeaderDecisions:
        """The leader appended batches; `log_end_offset` is the last offset + 1."""
        assert not self._resigned
        assert log_end_offset >= self.log_end_offset, (log_end_offset, self.log_end_offset)
        if log_end_offset > self.log_end_offset:
            self._note_sessions_caught_up(now_ms)
        self.log_end_offset = log_end_offset
        return self._advance(now_ms, proposal=None)

    def on_leader_synced(self, durable_offset: int, now_ms: int) -> LeaderDecisions:
        """The leader's log is fsynced below `durable_offset` (fsync durability only)."""
        assert not self._resigned
        assert self.durable_offset is not None, "page-cache durability: the HW counts LEOs"
        assert durable_offset <= self.log_end_offset, (durable_offset, self.log_end_offset)
        self.durable_offset = max(self.durable_offset, durable_offset)
        return self._advance(now_ms, proposal=None)

    def add_delayed_produce(
        self, token: Hashable, required_offset: int, deadline_ms: int, now_ms: int
    ) -> LeaderDecisions:
        """Park an acks=all produce until HW >= `required_offset` (its last offset + 1)."""
        assert not self._resigned
        assert required_offset <= self.log_end_offset, (required_offset, self.log_end_offset)
        self._delayed.append(_DelayedProduce(token, required_offset, deadline_ms))
        return self._advance(now_ms, proposal=None)

    def on_follower_fetch(
        self,
        fetch: FollowerFetch,
        broker: BrokerStatus | None,
        log_start_offset: int,
        now_ms: int,
    ) -> FetchDecisions:
        """A follower fetched. `broker` is None when its broker is not registered.

        Checks the leader epoch, then divergence; only a fetch we can serve moves the
        follower's progress, the ISR and the HW.
        """
        assert not self._resigned
        epoch_error = check_leader_epoch(fetch.current_leader_epoch, self.leader_epoch)
        if epoch_error != ErrorCode.NONE:
            return FetchDecisions(FetchRejected(epoch_error))
        if fetch.replica_id not in self.progress:
            return FetchDecisions(FetchRejected(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        check = check_follower_fetch(
            leader_history=self.leader_history,
            log_start_offset=log_start_offset,
            log_end_offset=self.log_end_offset,
            fetch_offset=fetch.fetch_offset,
            last_fetched_epoch=fetch.last_fetched_epoch,
        )
        if not isinstance(check, ServeFrom):
            return FetchDecisions(check)
        self._update_progress(fetch, self._acknowledged(fetch, log_start_offset), now_ms)
        proposal = self._maybe_expand_isr(fetch.replica_id, broker)
        return FetchDecisions(check, self._advance(now_ms, proposal))

    def on_tick(self, now_ms: int, replica_lag_time_max_ms: int) -> LeaderDecisions:
        """Timer: expire delayed produces and propose removing followers that lag. With no
        produce waiting and no follower to remove, nothing else can have changed since the
        last event (the HW moves only on events), so an idle leader answers at once: the
        timer visits every leader of the broker."""
        assert not self._resigned
        if not self._delayed:
            proposal = self._maybe_shrink_isr(now_ms, replica_lag_time_max_ms)
            return NO_DECISIONS if proposal is None else self._advance(now_ms, proposal)
        expired = tuple(d for d in self._delayed if d.deadline_ms <= now_ms)
        self._delayed = [d for d in self._delayed if d.deadline_ms > now_ms]
        timed_out = tuple(ProduceOutcome(d.token, ErrorCode.REQUEST_TIMED_OUT) for d in expired)
        proposal = self._maybe_shrink_isr(now_ms, replica_lag_time_max_ms)
        decisions = self._advance(now_ms, proposal)
        return LeaderDecisions(
            decisions.high_watermark, decisions.isr_proposal, timed_out + decisions.completed
        )

    def on_alter_partition_result(
        self, result: AlterPartitionCommitted | AlterPartitionRefused, now_ms: int
    ) -> LeaderDecisions:
        """The controller answered our AlterPartition. Either way nothing is pending after.

        An answer arriving after metadata already superseded the proposal is ignored, and so
        is a committed state of another leader epoch (leadership moved meanwhile: the new
        epoch arrives through metadata and replaces this state)."""
        assert not self._resigned
        if self.pending_isr is None:
            return LeaderDecisions()
        self.pending_isr = None
        if (
            isinstance(result, AlterPartitionCommitted)
            and result.leader_epoch == self.leader_epoch
            and result.partition_epoch > self.partition_epoch
        ):
            self._apply_isr(result.partition_epoch, result.isr)
        return self._advance(now_ms, proposal=None)

    def on_partition_change(
        self, *, leader_epoch: int, partition_epoch: int, replicas: Sequence[int],
        isr: frozenset[int], now_ms: int,
    ) -> LeaderDecisions:
        """Metadata committed a change to this partition within our leader epoch (the
        controller fenced a broker out of the ISR, a reassignment added replicas, or our own
        AlterPartition arriving through the metadata log before its response). A newer
        partition epoch supersedes any proposal in flight."""
        assert not self._resigned
        assert leader_epoch == self.leader_epoch, "a new leader epoch needs a new state"
        if partition_epoch <= self.partition_epoch:
            return LeaderDecisions()
        assert self.leader_id in replicas, (self.leader_id, replicas)
        self.replicas = tuple(replicas)
        for r in replicas:
            if r != self.leader_id and r not in self.progress:
                self.progress[r] = ReplicaProgress()
        for r in [r for r in self.progress if r not in replicas]:
            del self.progress[r]
        self.pending_isr = None
        self._apply_isr(partition_epoch, isr)
        return self._advance(now_ms, proposal=None)

    def on_config_change(self, min_insync_replicas: int) -> None:
        """The topic's min.insync.replicas changed: the next acks=all produce and every
        completion from now on count against the new value."""
        assert not self._resigned
        assert min_insync_replicas >= 1, min_insync_replicas
        self.min_insync_replicas = min_insync_replicas

    def resign(self) -> tuple[ProduceOutcome, ...]:
        """Leadership is gone (become follower, new leader epoch, partition deleted): every
        waiting produce fails with NOT_LEADER_OR_FOLLOWER and this state is dead."""
        assert not self._resigned
        self._resigned = True
        failed = tuple(
            ProduceOutcome(d.token, ErrorCode.NOT_LEADER_OR_FOLLOWER) for d in self._delayed
        )
        self._delayed = []
        return failed

    # ------------------------------------------------------------------ helpers

    def _note_sessions_caught_up(self, now_ms: int) -> None:
        """Our LEO is about to move: a follower whose session still asks at our current LEO
        was caught up until the session's last round (at most now). Without this, a follower
        idle at our LEO for longer than `replica_lag_time_max_ms` would be shrunk out of the
        ISR at the first append, before its session could fetch the new records."""
        for progress in self.progress.values():
            if progress.session is not None and progress.log_end_offset == self.log_end_offset:
                vouched_ms = min(now_ms, progress.session.vouched_until_ms())
                progress.last_caught_up_ms = max(progress.last_caught_up_ms, vouched_ms)

    @staticmethod
    def _acknowledged(fetch: FollowerFetch, log_start_offset: int) -> int:
        """The follower's log end as far as we know it can hold it: its fetch offset, capped
        by what a pushing session sent it (a follower restarting at our log start holds
        nothing below it, so that much always counts)."""
        if fetch.acknowledgeable is None:
            return fetch.fetch_offset
        return min(fetch.fetch_offset, max(fetch.acknowledgeable, log_start_offset))

    def _update_progress(self, fetch: FollowerFetch, reached: int, now_ms: int) -> None:
        """Kafka's `Replica.updateFetchState`: a follower is caught up at the time of a fetch
        that reached our LEO, or reached the LEO we had at its previous fetch. ``reached`` is
        the fetch offset as far as it counts (`_acknowledged`)."""
        progress = self.progress[fetch.replica_id]
        if reached >= self.log_end_offset:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif reached >= progress.last_fetch_leader_log_end_offset >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = reached
        progress.durable_offset = min(fetch.durable_offset, reached)
        progress.last_fetch_leader_log_end_offset = self.log_end_offset
        progress.last_fetch_ms = now_ms
        progress.broker_epoch = fetch.broker_epoch
        progress.session = fetch.session

    def _maybe_expand_isr(self, replica_id: int, broker: BrokerStatus | None) -> IsrProposal | None:
        if self.pending_isr is not None or replica_id in self.isr:
            return None
        progress = self.progress[replica_id]
        caught_up = (
            progress.log_end_offset >= self.high_watermark
            and progress.log_end_offset >= self.leadership_start_offset
        )
        eligible = (
            broker is not None
            and not broker.fenced
            and not broker.in_controlled_shutdown
            and broker.broker_epoch == progress.broker_epoch
        )
        if not (caught_up and eligible):
            return None
        return IsrProposal(
            self.leader_epoch,
            self.partition_epoch,
            self.isr | {replica_id},
            ((replica_id, progress.broker_epoch),),
        )

    def _maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
        if self.pending_isr is not None:
            return None
        lagging = frozenset(
            r
            for r in self.isr - {self.leader_id}
            if self.progress[r].log_end_offset != self.log_end_offset
            and now_ms - self.progress[r].last_caught_up_ms > replica_lag_time_max_ms
        )
        if not lagging:
            return None
        return IsrProposal(self.leader_epoch, self.partition_epoch, self.isr - lagging, ())

    def _apply_isr(self, partition_epoch: int, isr: frozenset[int]) -> None:
        assert partition_epoch > self.partition_epoch, "partition epochs never go backwards"
        assert self.leader_id in isr and isr <= frozenset(self.replicas), (isr, self.replicas)
        self.partition_epoch = partition_epoch
        self.isr = frozenset(isr)

    def _advance(self, now_ms: int, proposal: IsrProposal | None) -> LeaderDecisions:
        """Record a new proposal, recompute the HW, complete what it allows."""
        if proposal is not None:
            assert self.pending_isr is None
            self.pending_isr = proposal
        moved = self._maybe_increment_high_watermark()
        completed = self._complete_delayed()
        return LeaderDecisions(self.high_watermark if moved else None, proposal, completed)

    def _maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR, never lowered, and frozen while the committed
        ISR is below min.insync.replicas (KIP-966): a replica that leaves the ISR then holds
        everything up to the HW, which is what makes it an eligible leader replica."""
        if len(self.isr) < self.min_insync_replicas:
            return False
        followers = [self.progress[r] for r in self.maximal_isr if r != self.leader_id]
        if self.durable_offset is None:
            counted = [self.log_end_offset] + [p.log_end_offset for p in followers]
        else:
            counted = [self.durable_offset] + [p.durable_offset for p in followers]
        candidate = min(counted)
        if candidate <= self.high_watermark:
            return False
        assert all(candidate <= leo for leo in [self.log_end_offset] + [p.log_end_offset for p in followers])
        assert candidate <= self.log_end_offset
        self.high_watermark = candidate
        return True

    def _complete_delayed(self) -> tuple[ProduceOutcome, ...]:
        done = [d for d in self._delayed if d.required_offset <= self.high_watermark]
        if not done:
            return ()
        self._delayed = [d for d in self._delayed if d.required_offset > self.high_watermark]
        error = (
            ErrorCode.NONE
            if len(self.isr) >= self.min_insync_replicas
            else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        )
        return tuple(ProduceOutcome(d.token, error) for d in done)


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int, current: int) -> int:
    """A follower's HW after a fetch response: the leader's HW capped by what it holds.

    Never lowered by a response (responses can arrive from a lagging read); truncation is
    the only thing that lowers it, and only to the truncation offset.
    """
    return max(current, min(leader_high_watermark, log_end_offset))
