"""The active-controller role: who may write, in what order, and the in-memory broker sessions.

The Raft leader becomes the active controller only after an entry of its own term has been
applied (its image then holds everything committed before), and it then gives every broker a
full session before fencing anyone. Writes are decided one at a time under a lock on the
freshest local image, so decisions rarely go stale; the compare-and-set checks where entries
are applied catch the rest. A decision of several entries (a large topic creation) holds the
lock until its last entry, and one that fails half way has its invisible leftovers dropped.

Liveness is judged apart from writes: a heartbeat counts when it arrives (``note_heartbeat``),
not when the write lock lets it through, and time during which this process was stalled is
credited to every broker's session (``_account_stall``).

Periodic duties: fence brokers whose sessions expired, and (with
``auto.leader.rebalance.enable``) move leaderships back to preferred replicas every
``leader.imbalance.check.interval.seconds``, counted from activation so that brokers have
come back into ISRs before a new controller moves anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

import structlog

from metadata_quorum.broker_decisions import broker_problem, expired_broker_fencing
from metadata_quorum.broker_heartbeats import BrokerHeartbeatManager
from metadata_quorum.controller_options import DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S
from metadata_quorum.decision import Decision
from metadata_quorum.election import PARTITION_CHANGES_PER_ENTRY_MAX, rebalance_leaders
from metadata_quorum.image import MetadataImage
from metadata_quorum.raft_node import ControllerRaftNode, EntryResult
from metadata_quorum.topic_admin import abandon_pending_topics
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode

R = TypeVar("R")

LEADERSHIP_POLL_S = 0.02  # how soon a Raft leader whose activation failed tries again
# The role loop sleeps until pysyncobj reports a role change (`ControllerRaftNode.role_changed`),
# or until the active controller's next duty; it looked every LEADERSHIP_POLL_S on every
# controller before, and those 50 wake-ups a second were most of what an idle controller spent
# (docs/performance.md). A follower's timeout only bounds a missed wake-up.
FOLLOWER_ROLE_WAIT_S = 1.0
FENCE_CHECK_INTERVAL_S = 0.1
ACTIVATION_WAIT_S = 2.0
ELECTION_POLL_S = 0.005
STALL_CHECK_S = 0.1
# Waking later than this counts as a stall of the controller (see _watch_stalls).
STALL_TOLERANCE_MS = 250


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class WriteOutcome(Generic[R]):
    """error_code NONE: ``decision`` is final (its records, if any, committed at ``first_offset``)."""

    error_code: int
    error_message: str
    decision: Decision[R] | None = None
    first_offset: int = -1


class ActiveController:
    def __init__(
        self,
        node: ControllerRaftNode,
        session_timeout_ms: int,
        auto_leader_rebalance: bool = True,
        leader_imbalance_check_interval_s: float = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S,
    ) -> None:
        assert leader_imbalance_check_interval_s > 0
        self.node = node
        self.heartbeats = BrokerHeartbeatManager(session_timeout_ms)
        self.auto_leader_rebalance = auto_leader_rebalance
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        self._last_fence_check = 0.0
        self._last_balance_check = 0.0
        self._write_lock = asyncio.Lock()
        self._active_term: int | None = None
        self._activated = asyncio.Event()
        self._last_awake_ms = monotonic_ms()
        self._log = structlog.get_logger("controller").bind(controller_id=node.voter.node_id)

    @property
    def is_active(self) -> bool:
        return self._active_term is not None

    def hint(self) -> pb.ActiveControllerHint:
        leader = self.node.leader_id()
        voter = next((v for v in self.node.voters if v.node_id == leader), None)
        if voter is None:
            return pb.ActiveControllerHint(controller_id=-1)
        return pb.ActiveControllerHint(controller_id=voter.node_id, host=voter.host, port=voter.grpc_port)

    def not_controller_message(self) -> str:
        me = self.node.voter.node_id
        hint = self.hint()
        if hint.controller_id == me:
            return f"controller {me} won the election and is catching up; retry against it in a moment"
        if hint.controller_id < 0:
            return f"controller {me} is not the active controller and no leader is known (an election is running); retry in a moment"
        return f"controller {me} is not the active controller; retry against controller {hint.controller_id} at {hint.host}:{hint.port}"

    async def write(self, decide: Callable[[MetadataImage], Decision[R]]) -> WriteOutcome[R]:
        """Decide on the current image and commit the decision's entries, one after another
        under the write lock (so no other decision sees the image between them)."""
        if not await self.await_active():
            return WriteOutcome(ErrorCode.NOT_CONTROLLER, self.not_controller_message())
        async with self._write_lock:
            if not self.is_active:
                return WriteOutcome(ErrorCode.NOT_CONTROLLER, self.not_controller_message())
            decision = decide(self.node.image)
            for happened in decision.happened:  # decisions are pure: what they did is logged here
                getattr(self._log, happened.level)(happened.event, **happened.fields)
            if not decision.records:
                return WriteOutcome(ErrorCode.NONE, "", decision)
            first_offset = -1
            term = self._active_term
            for i, entry in enumerate(decision.entries()):
                if i and not self._still_in(term):  # leadership moved meanwhile: the new term abandons what was begun
                    result = EntryResult(ErrorCode.NOT_CONTROLLER, f"leadership changed after {i} of the decision's entries")
                    break
                result: EntryResult = await self.node.propose(entry)
                if result.error_code != ErrorCode.NONE:
                    break
                first_offset = result.first_offset if first_offset < 0 else first_offset
            if result.error_code != ErrorCode.NONE and self.node.image.pending_partitions and self.node.is_leader():
                await self._abandon_pending_topics()
        if result.error_code == ErrorCode.NOT_CONTROLLER:
            return WriteOutcome(ErrorCode.NOT_CONTROLLER, f"{result.error_message}; {self.not_controller_message()}")
        return WriteOutcome(result.error_code, result.error_message, decision, first_offset)

    def _still_in(self, term: int) -> bool:
        """Whether the Raft term a write began in is still this controller's. The role loop
        notices a new term only at its next look (up to FENCE_CHECK_INTERVAL_S later): if
        leadership went to another controller and came back meanwhile, that controller's
        activation dropped the creation's first entries, and a write that went on would end in
        a TopicRecord missing them. So the write also asks Raft itself before each entry after
        the first."""
        return self._active_term == term and self.node.term() == term

    async def _abandon_pending_topics(self) -> None:
        """Drop half-committed topic creations. Called holding the write lock: only a decision
        that holds it creates them, so none is in progress here (a creation still committing
        its entries would otherwise lose its first partitions and fail at its TopicRecord
        with "would miss partitions")."""
        decision = abandon_pending_topics(self.node.image)
        result = await self.node.propose(decision.records)
        if result.error_code == ErrorCode.NONE:
            self._log.warning("abandoned unfinished topic creations", topics=decision.response, metadata_offset=result.first_offset)
        else:
            self._log.warning("could not abandon unfinished topic creations; the next active controller will", error=result.error_message)

    def note_heartbeat(self, broker_id: int, broker_epoch: int) -> None:
        """A heartbeat arrived: the broker is alive now, whatever the write that answers it
        waits for (a long entry, a queue of writes). Liveness is never decided behind writes."""
        if self.is_active and broker_problem(self.node.image, broker_id, broker_epoch) is None:
            self.heartbeats.touch(broker_id, monotonic_ms())

    async def await_active(self) -> bool:
        """Whether this controller is (or within ACTIVATION_WAIT_S becomes) the active one.
        While no leader is known, or the known one's connection is down (it may be dead), the
        request waits for the election instead of being refused at once: the caller then
        learns the new leader from the NOT_CONTROLLER hint and goes there directly, instead of
        retrying blind with growing backoff through the election."""
        if self.is_active:
            return True
        deadline = time.monotonic() + ACTIVATION_WAIT_S
        while self.node.connected_leader_id() < 0 and time.monotonic() < deadline:
            await asyncio.sleep(ELECTION_POLL_S)
        if not self.node.is_leader():
            return False
        try:
            await asyncio.wait_for(self._activated.wait(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            return False
        return self.is_active

    async def run(self) -> None:
        """Follow Raft leadership forever: activate, run the periodic duties, step down."""
        watchdog = asyncio.create_task(self._watch_stalls())
        try:
            await self._follow_leadership()
        finally:
            watchdog.cancel()

    async def _follow_leadership(self) -> None:
        while True:
            self.node.role_changed.clear()  # before looking: a change from here on wakes the wait below
            try:
                if not self.node.is_leader():
                    self._step_down()
                elif self._active_term != self.node.term():
                    self._step_down()
                    await self._activate(self.node.term())
                else:
                    await self._periodic_duties(time.monotonic())
            except Exception:  # the role loop must outlive any one bad step: log loudly, step down, go on
                self._log.exception("active controller step failed")
                self._step_down()
            await self.node.role_changed.wait(self._role_wait_s())

    def _role_wait_s(self) -> float:
        """How long the role loop may sleep when no role change wakes it."""
        if self._active_term is not None:
            return FENCE_CHECK_INTERVAL_S  # the next duty: `_periodic_duties` checks the sessions at this pace
        return LEADERSHIP_POLL_S if self.node.is_leader() else FOLLOWER_ROLE_WAIT_S

    async def _watch_stalls(self) -> None:
        """Wake every STALL_CHECK_S so that a stall is noticed even when nothing else runs."""
        while True:
            await asyncio.sleep(STALL_CHECK_S)
            self._account_stall()

    def _account_stall(self) -> None:
        """The watchdog should have woken within STALL_CHECK_S of the last check; if it is
        much later, the process (event loop, GIL, machine) was stalled and heartbeats could
        not be processed either, so that time is credited to every broker's session. Called
        by the watchdog and right before any fencing decision, whichever runs first after a
        stall."""
        now_ms = monotonic_ms()
        late_ms = now_ms - self._last_awake_ms - int(STALL_CHECK_S * 1000)
        self._last_awake_ms = now_ms
        if late_ms > STALL_TOLERANCE_MS and self.is_active:
            self.heartbeats.credit_stall(late_ms, now_ms)
            self._log.warning("controller was stalled; broker sessions extended", stall_ms=late_ms)

    async def _periodic_duties(self, now: float) -> None:
        if now - self._last_fence_check >= FENCE_CHECK_INTERVAL_S:
            self._last_fence_check = now
            await self._fence_expired()
        if self.auto_leader_rebalance and now - self._last_balance_check >= self.leader_imbalance_check_interval_s:
            self._last_balance_check = now
            await self._rebalance_leaders()

    def _step_down(self) -> None:
        if self._active_term is not None:
            self._log.info("no longer the active controller", term=self._active_term, leader=self.node.leader_id())
        self._active_term = None
        self._activated.clear()

    async def _activate(self, term: int) -> None:
        started = time.monotonic()
        result = await self.node.propose([])  # applied here => every earlier committed entry is too
        if result.error_code != ErrorCode.NONE or not self.node.is_leader() or self.node.term() != term:
            return
        async with self._write_lock:  # a write begun in an earlier term stops at its next entry
            if self.node.image.pending_partitions:  # a creation the previous controller did not finish
                await self._abandon_pending_topics()
        image = self.node.image
        self.heartbeats.start_grace(image.brokers, monotonic_ms())
        self._last_balance_check = time.monotonic()
        self._active_term = term
        self._activated.set()
        self._log.info(
            "became the active controller",
            term=term,
            metadata_offset=image.offset,
            brokers=len(image.brokers),
            catch_up_ms=round((time.monotonic() - started) * 1000, 1),
            session_grace_ms=self.heartbeats.session_timeout_ms,
            auto_leader_rebalance=self.auto_leader_rebalance,
            leader_imbalance_check_interval_s=self.leader_imbalance_check_interval_s,
        )

    async def _fence_expired(self) -> None:
        while True:
            outcome = await self.write(self._decide_fencing)
            if outcome.decision is None or outcome.decision.response is None:
                return
            broker_id = outcome.decision.response
            if outcome.error_code != ErrorCode.NONE:
                self._log.warning("fencing failed; will retry", broker_id=broker_id, error=outcome.error_message)
                return
            self._log.info("broker fenced", broker_id=broker_id, metadata_offset=outcome.first_offset)

    def _decide_fencing(self, image: MetadataImage) -> Decision[int | None]:
        self._account_stall()
        return expired_broker_fencing(image, self.heartbeats, monotonic_ms())

    async def _rebalance_leaders(self) -> None:
        """Preferred leader elections, one bounded entry at a time, until none is left."""
        while True:
            outcome = await self.write(rebalance_leaders)
            if outcome.error_code != ErrorCode.NONE or outcome.decision is None:
                self._log.warning("automatic leader rebalance failed; will retry", error=outcome.error_message)
                return
            moved = outcome.decision.response
            if moved:
                self._log.info("leaders moved back to preferred replicas", partitions=moved, metadata_offset=outcome.first_offset)
            if moved < PARTITION_CHANGES_PER_ENTRY_MAX:
                return
