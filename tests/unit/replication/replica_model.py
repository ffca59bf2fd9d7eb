"""A tiny in-memory cluster for one partition, driven through the pure replication core.

Each replica's log is a list of (epoch, value) from its log start offset, plus its epoch
history and HW. A single controller (this class) elects leaders and commits AlterPartition
proposals. The leader's HW, ISR proposals and fetch answers come from
`LeaderPartitionState`; every follower decision (append and HW, truncation by diverging
epoch, OFFSET_OUT_OF_RANGE, back-off) comes from the shipping follower core,
`data_plane.replication.follower.FollowerCore`, which this model only carries out as the
broker's fetcher does. Deliberately wrong modes exist only so tests can prove the checker
catches what they break:

- `truncation="high_watermark"`: the pre-KIP-101 rule. Fetches carry no epoch, a replica
  truncates to its own HW on restart and on becoming follower; a follower ahead of the
  leader then gets OFFSET_OUT_OF_RANGE and, with no epoch to compare, the follower core cuts
  it to the leader's log end.
- `truncation="pre_kip279"`: KIP-101 without KIP-279. The follower asks for the end of its
  latest epoch; a leader that never had that epoch answers with the start of its next newer
  epoch, and the follower truncates to min(that, own log end).
- `truncation="no_restart"`: the leader-epoch rules, but a follower told to start over at
  the leader's log start (it fell behind retention) keeps its log instead.
"""

from dataclasses import dataclass, field
from typing import Literal

from data_plane.replication.divergence import (
    DivergingEpoch,
    FetchCheck,
    FetchRejected,
    ServeFrom,
)
from data_plane.replication.epoch_history import (
    NO_EPOCH,
    EpochHistory,
    assign_epoch,
    latest_epoch,
    truncate_from_end,
)
from server_common.errors import ErrorCode
from data_plane.replication.follower import (
    Append,
    BackOff,
    FollowerCore,
    FollowerLog,
    LeaderAnswer,
    RestartAt,
    SetHighWatermark,
    Truncate,
)
from data_plane.replication.partition_state import (
    AlterPartitionCommitted,
    AlterPartitionRefused,
    BrokerStatus,
    FollowerFetch,
    IsrProposal,
    LeaderDecisions,
    LeaderPartitionState,
)

TruncationRule = Literal["leader_epoch", "high_watermark", "pre_kip279", "no_restart"]
Record = tuple[int, str]
LAG_TIME_MAX_MS = 100
FOLLOWER_CORE = FollowerCore()


@dataclass
class Replica:
    replica_id: int
    log: list[Record] = field(default_factory=list)  # offsets log_start_offset, log_start_offset + 1, ...
    log_start_offset: int = 0
    history: EpochHistory = ()
    high_watermark: int = 0
    alive: bool = True
    broker_epoch: int = 1
    anomalies: list[str] = field(default_factory=list)

    @property
    def log_end_offset(self) -> int:
        return self.log_start_offset + len(self.log)

    def records_from(self, offset: int) -> list[Record]:
        assert offset >= self.log_start_offset, (offset, self.log_start_offset)
        return self.log[offset - self.log_start_offset:]

    def record_at(self, offset: int) -> Record | None:
        """The record at ``offset``, None outside [log start, log end)."""
        inside = self.log_start_offset <= offset < self.log_end_offset
        return self.log[offset - self.log_start_offset] if inside else None

    def view(self, leader_epoch: int) -> FollowerLog:
        """What the follower core sees of this replica (the fetcher's `follower_log`)."""
        return FollowerLog(self.log_start_offset, self.log_end_offset, self.history, self.high_watermark, leader_epoch)

    def append(self, epoch: int, value: str) -> None:
        """Append a record; a record older than the log's last epoch is only possible when
        the truncation rule failed, so it is noted (the real epoch cache asserts instead)."""
        newest_record_epoch = max((e for e, _ in self.log), default=NO_EPOCH)
        if epoch < newest_record_epoch:
            self.anomalies.append(f"replica {self.replica_id} appended epoch {epoch} after "
                                  f"epoch {newest_record_epoch}")
        elif epoch != latest_epoch(self.history):
            self.history = assign_epoch(self.history, epoch, self.log_end_offset)
        self.log.append((epoch, value))

    def truncate(self, offset: int) -> None:
        offset = min(offset, self.log_end_offset)
        assert offset >= self.log_start_offset, (offset, self.log_start_offset)
        self.log = self.log[:offset - self.log_start_offset]
        self.history = truncate_from_end(self.history, offset)
        self.high_watermark = min(self.high_watermark, offset)

    def restart_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (the fetcher's `restart_follower_at`)."""
        self.log, self.log_start_offset, self.history, self.high_watermark = [], offset, (), offset

    def delete_before(self, offset: int) -> None:
        """Retention: records below ``offset`` go. The epoch history keeps its older entries
        (harmless here: no question asked of it reaches below the log start)."""
        assert self.log_start_offset <= offset <= self.high_watermark, (offset, self.log_start_offset)
        self.log = self.records_from(offset)
        self.log_start_offset = offset


class Cluster:
    """One partition replicated on `replica_ids`; the first one leads epoch 0."""

    def __init__(self, replica_ids: list[int], truncation: TruncationRule = "leader_epoch") -> None:
        self.truncation = truncation
        self.replicas = {r: Replica(r) for r in replica_ids}
        self.replica_order = list(replica_ids)
        self.isr = frozenset(replica_ids)
        self.leader_id: int | None = None
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.state: LeaderPartitionState | None = None
        self.inflight: IsrProposal | None = None
        self.now_ms = 0
        self.committed: dict[int, tuple[int, str]] = {}
        self.violations: list[str] = []
        self.truncations_below_hw: list[str] = []
        self.stuck: list[str] = []  # back-offs that would not clear by themselves
        self.elect(replica_ids[0])

    # ------------------------------------------------------------------ controller

    def elect(self, new_leader: int, *, unclean: bool = False) -> None:
        """Clean election: the new leader must be alive and in the committed ISR. An unclean
        one (where a topic allows it) takes any live replica, with itself as the ISR."""
        replica = self.replicas[new_leader]
        assert replica.alive and (unclean or new_leader in self.isr), (new_leader, self.isr)
        if unclean:
            self.isr = frozenset({new_leader})
        if self.state is not None:
            self.state.resign()
        self.leader_id = new_leader
        self.leader_epoch += 1
        self.partition_epoch += 1
        self.inflight = None
        replica.history = assign_epoch(replica.history, self.leader_epoch, replica.log_end_offset)
        self.state = LeaderPartitionState(
            leader_id=new_leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            replicas=self.replica_order,
            isr=self.isr,
            leader_history=replica.history,
            log_end_offset=replica.log_end_offset,
            high_watermark=replica.high_watermark,
            min_insync_replicas=1,
            now_ms=self.now_ms,
        )
        if self.truncation == "high_watermark":
            for r in self.replicas.values():
                if r.alive and r.replica_id != new_leader:
                    r.truncate(r.high_watermark)

    def commit_alter_partition(self) -> None:
        """The controller answers the leader's pending AlterPartition."""
        proposal, self.inflight = self.inflight, None
        if proposal is None or self.state is None:
            return
        if (proposal.leader_epoch, proposal.partition_epoch) != (self.leader_epoch, self.partition_epoch):
            self._apply(self.state.on_alter_partition_result(
                AlterPartitionRefused(ErrorCode.INVALID_UPDATE_VERSION), self.now_ms))
            return
        self.partition_epoch += 1
        self.isr = proposal.new_isr
        self._apply(self.state.on_alter_partition_result(
            AlterPartitionCommitted(self.leader_epoch, self.partition_epoch, self.isr), self.now_ms))

    # ------------------------------------------------------------------ brokers

    @property
    def leader(self) -> Replica:
        assert self.leader_id is not None
        return self.replicas[self.leader_id]

    def produce(self, value: str) -> None:
        if self.state is None:
            return
        self.leader.append(self.leader_epoch, value)
        self._apply(self.state.on_leader_append(self.leader.log_end_offset, self.now_ms))

    def tick(self, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        if self.state is not None:
            self._apply(self.state.on_tick(self.now_ms, LAG_TIME_MAX_MS))

    def crash(self, replica_id: int) -> None:
        replica = self.replicas[replica_id]
        replica.alive = False
        if replica_id == self.leader_id:
            assert self.state is not None
            self.state.resign()
            self.state, self.leader_id, self.inflight = None, None, None

    def restart(self, replica_id: int, *, flushed_to: int | None = None) -> None:
        """Restart with a new broker epoch. `flushed_to` models a power failure that loses
        the unflushed tail. Only the pre-KIP-101 mode truncates to the HW on restart."""
        replica = self.replicas[replica_id]
        assert not replica.alive
        replica.alive = True
        replica.broker_epoch += 1
        if flushed_to is not None:
            replica.truncate(flushed_to)
        if self.truncation == "high_watermark":
            replica.truncate(replica.high_watermark)

    def fetch(self, follower_id: int, *, deliver_response: bool = True) -> None:
        """One fetch round trip from a follower to the current leader, its answer decided by
        the shipping follower core."""
        follower = self.replicas[follower_id]
        if self.state is None or not follower.alive or follower_id == self.leader_id:
            return
        leader = self.leader
        view = follower.view(self.leader_epoch)
        last_epoch = view.last_epoch if self.truncation in ("leader_epoch", "no_restart") else NO_EPOCH
        if self.truncation == "pre_kip279" and follower.log:
            follower.truncate(_pre_kip279_end_offset(
                leader.history, leader.log_end_offset, follower.log[-1][0]))
            view = follower.view(self.leader_epoch)
        request = FollowerFetch(
            follower_id, follower.broker_epoch, self.leader_epoch, view.log_end_offset, last_epoch
        )
        status = BrokerStatus(follower.broker_epoch, fenced=False, in_controlled_shutdown=False)
        answer = self.state.on_follower_fetch(request, status, leader.log_start_offset, self.now_ms)
        self._apply(answer.decisions)
        if not deliver_response:
            return
        decision = FOLLOWER_CORE.decide(view, self._answer(view, answer.fetch))
        match decision:
            case Append(records=records):
                for epoch, value in records:
                    follower.append(epoch, value)
                follower.high_watermark = decision.high_watermark_after(follower.log_end_offset)
            case SetHighWatermark(high_watermark):
                follower.high_watermark = high_watermark
            case Truncate(offset):
                self._note_cut_below_hw(follower, decision)
                follower.truncate(offset)
            case RestartAt(offset) if self.truncation != "no_restart":
                self._note_cut_below_hw(follower, decision)
                follower.restart_at(offset)
            case BackOff(warn=True) as stuck:
                self.stuck.append(f"replica {follower_id}: {stuck.reason}")
            case RestartAt() | BackOff():
                pass
            case other:
                raise AssertionError(f"unexpected follower decision {other}")

    def _note_cut_below_hw(self, follower: Replica, cut: Truncate | RestartAt) -> None:
        if cut.offset < follower.high_watermark:
            self.truncations_below_hw.append(
                f"replica {follower.replica_id} cut to {cut.offset} below its HW {follower.high_watermark}: {cut.reason}")

    def _answer(self, asked: FollowerLog, fetch: FetchCheck) -> LeaderAnswer[list[Record]]:
        """The leader's answer as the fetcher hands it to the follower core."""
        assert self.state is not None
        leader = self.leader
        records: list[Record] = []
        error, diverging = ErrorCode.NONE, None
        match fetch:
            case ServeFrom(offset):
                records = leader.records_from(offset)
            case DivergingEpoch():
                diverging = fetch
            case FetchRejected(code):
                error = code
        return LeaderAnswer(
            asked_leader_epoch=self.leader_epoch, asked_fetch_offset=asked.log_end_offset, error=error,
            message="", records=records, high_watermark=self.state.high_watermark,
            log_start_offset=leader.log_start_offset, log_end_offset=leader.log_end_offset, diverging=diverging,
        )

    def delete_records(self, offset: int) -> None:
        """Retention on the leader: records below min(``offset``, HW) go."""
        if self.state is not None:
            leader = self.leader
            leader.delete_before(max(leader.log_start_offset, min(offset, leader.high_watermark)))

    def catch_up(self, rounds: int = 12) -> None:
        """Heal: every replica restarts, fetches until nothing changes, the ISR settles."""
        for replica in self.replicas.values():
            if not replica.alive:
                self.restart(replica.replica_id)
        if self.state is None:
            self.elect(next(r for r in self.replica_order if r in self.isr))
        for _ in range(rounds):
            for replica_id in self.replica_order:
                self.fetch(replica_id)
            self.commit_alter_partition()
            self.tick(1)

    # ------------------------------------------------------------------ checking

    def _apply(self, decisions: LeaderDecisions) -> None:
        if decisions.isr_proposal is not None:
            self.inflight = decisions.isr_proposal
        if decisions.high_watermark is None:
            return
        leader = self.leader
        leader.high_watermark = decisions.high_watermark
        for offset in range(leader.log_start_offset, decisions.high_watermark):
            record = leader.record_at(offset)
            previous = self.committed.setdefault(offset, record)
            if previous != record:
                self.violations.append(
                    f"offset {offset} committed as {previous} and again as {record}")
                self.committed[offset] = record

    def forget_committed_from(self, offset: int) -> None:
        """Excuse committed records a simulated power failure destroyed on the new leader."""
        for o in [o for o in self.committed if o >= offset]:
            del self.committed[o]

    def logs_agree(self) -> bool:
        """Every replica holds the same records from the highest log start on."""
        start = max(r.log_start_offset for r in self.replicas.values())
        return len({tuple(r.records_from(start)) for r in self.replicas.values()}) == 1

    def problems(self) -> list[str]:
        """Everything the replication rules promise and this run broke."""
        found = list(self.violations)
        for replica in self.replicas.values():
            found.extend(replica.anomalies)
        alive = [r for r in self.replicas.values() if r.alive]
        start = max(r.log_start_offset for r in alive)
        reference = alive[0]
        for replica in alive[1:]:
            if replica.records_from(start) != reference.records_from(start):
                found.append(f"replica {replica.replica_id} log {replica.log} differs from "
                             f"replica {reference.replica_id} log {reference.log} from offset {start}")
        for replica in alive:
            for offset, record in sorted(self.committed.items()):
                if offset < replica.log_start_offset:
                    continue  # removed by retention (a log start moves only by retention)
                held = replica.record_at(offset)
                if held != record:
                    found.append(f"replica {replica.replica_id} lost committed {record} at "
                                 f"offset {offset} (holds {held})")
        return found


def _pre_kip279_end_offset(leader_history: EpochHistory, leader_log_end: int, epoch: int) -> int:
    """KIP-101's OffsetsForLeaderEpoch answer before KIP-279: the requested epoch's end if
    the leader had it, else the start of the leader's first newer epoch."""
    newer = [e.start_offset for e in leader_history if e.epoch > epoch]
    return newer[0] if newer else leader_log_end
