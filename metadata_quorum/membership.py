"""Adding and removing controllers, at the active controller (KIP-853's add-controller and
remove-controller on pysyncobj's dynamic membership).

Adding: the directory registers the new controller as an observer; the observer (started
with ``--join``, a pysyncobj read-only node receiving the log) announces through the log
that it has caught up; only then does the directory name it a voter, upon which it restarts
its Raft node as a voter, and pysyncobj's voter set grow (one change; its commit needs the
newcomer's acknowledgement when a voter is down, as when replacing a dead one). A controller that never catches up never votes, so a slow or dead newcomer cannot
stall commits.

Removing: the directory drops the controller first (it stops serving reads and never
campaigns again, but keeps voting until it is out), then pysyncobj's voter set shrinks. The
active controller does not remove itself: it hands leadership to a caught-up voter and
answers NOT_CONTROLLER naming it, and the client retries there.

One change at a time: a lock here, and pysyncobj refuses a second change before the first
has committed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from metadata_quorum.active_controller import ActiveController
from metadata_quorum.controller_directory import OBSERVER, VOTER, ControllerDirectory, add_problem, remove_problem
from metadata_quorum.endpoints import Voter
from server_common.errors import ErrorCode

CATCH_UP_TIMEOUT_S = 30.0
POLL_S = 0.02


@dataclass(frozen=True)
class ChangeOutcome:
    error_code: int
    error_message: str = ""


class QuorumMembership:
    def __init__(self, controller: ActiveController) -> None:
        self.controller = controller
        self.node = controller.node
        self._lock = asyncio.Lock()
        self._log = structlog.get_logger("controller").bind(controller_id=self.node.voter.node_id)

    async def add(self, new: Voter, catch_up_timeout_s: float = CATCH_UP_TIMEOUT_S) -> ChangeOutcome:
        async with self._lock:
            if not await self.controller.await_active():
                return ChangeOutcome(ErrorCode.NOT_CONTROLLER, self.controller.not_controller_message())
            directory = self.node.directory
            problem = add_problem(directory, new, self.node.raft_voter_addresses())
            if problem is not None:
                return ChangeOutcome(ErrorCode.INVALID_REQUEST, problem)
            if directory.role_of(new.node_id) != VOTER:
                if directory.role_of(new.node_id) != OBSERVER:
                    outcome = await self._commit_directory(directory.with_observer(new))
                    if outcome is not None:
                        return outcome
                    self._log.info("controller registered as an observer", new_controller_id=new.node_id, raft_address=new.raft_address)
                outcome = await self._await_caught_up(new, catch_up_timeout_s)
                if outcome is not None:
                    return outcome
                # The directory first: the observer restarts its Raft node as a voter (isolated
                # until pysyncobj's voter set names it), then the voter set, whose commit needs
                # the newcomer's acknowledgement when a voter is down.
                outcome = await self._commit_directory(self.node.directory.promoted(new.node_id))
                if outcome is not None:
                    return outcome
            result = await self.node.change_voters(new.raft_address, add=True, timeout_s=catch_up_timeout_s)
            if result.error_code != ErrorCode.NONE:
                return ChangeOutcome(result.error_code, f"making controller {new.node_id} a voter failed: {result.error_message}; "
                                                        "add it again to resume")
            self._log.info("controller added to the voters", new_controller_id=new.node_id, voters=[v.node_id for v in self.node.voters])
            return ChangeOutcome(ErrorCode.NONE)

    async def _await_caught_up(self, new: Voter, timeout_s: float) -> ChangeOutcome | None:
        """Wait until observer ``new`` has announced through the log that it caught up."""
        deadline = time.monotonic() + timeout_s
        while new.node_id not in self.node.caught_up_observers:
            if time.monotonic() > deadline:
                return ChangeOutcome(ErrorCode.REQUEST_TIMED_OUT, (
                    f"controller {new.node_id} is registered as an observer but has not caught up with the metadata log within "
                    f"{timeout_s:.0f} s; start it (`kraftlog controller --node-id {new.node_id} --quorum "
                    f"{','.join(f'{v.node_id}@{v.raft_address}:{v.grpc_port}' for v in self.node.voters)} --join "
                    f"{new.raft_address}:{new.grpc_port} --cluster-id ...`), then add it again; it votes only once caught up"))
            if not self.node.is_leader():
                return ChangeOutcome(ErrorCode.NOT_CONTROLLER, self.controller.not_controller_message())
            await asyncio.sleep(POLL_S)
        return None

    async def remove(self, node_id: int) -> ChangeOutcome:
        async with self._lock:
            if not await self.controller.await_active():
                return ChangeOutcome(ErrorCode.NOT_CONTROLLER, self.controller.not_controller_message())
            directory = self.node.directory
            problem = remove_problem(directory, node_id)
            if problem is not None:
                return ChangeOutcome(ErrorCode.INVALID_REQUEST, problem)
            if node_id == self.node.voter.node_id:
                return await self._hand_over()
            leaving = directory.member(node_id)
            was_voter = directory.role_of(node_id) == VOTER
            outcome = await self._commit_directory(directory.without(node_id))
            if outcome is not None:
                return outcome
            if was_voter:
                await self._await_heard_of_removal(leaving)
                result = await self.node.change_voters(leaving.raft_address, add=False)
                if result.error_code != ErrorCode.NONE:
                    return ChangeOutcome(result.error_code, f"removing controller {node_id} from the voters failed: {result.error_message}; "
                                                            "remove it again")
            self._log.info("controller removed from the quorum", removed_controller_id=node_id, voters=[v.node_id for v in self.node.voters])
            return ChangeOutcome(ErrorCode.NONE)

    async def _await_heard_of_removal(self, leaving: Voter) -> None:
        """Wait (if it is reachable) until the leaving voter has the entry removing it from the
        directory and knows it committed: it then never campaigns again. Otherwise, when the
        voter set shrinks and this leader drops its connection, it would take that for the
        leader's death, elect itself early and, still a voter in its own eyes and the others'
        until they hear of the change, might win and undo it. An entry after the directory's,
        matched by it, carries a commit index that covers the directory's."""
        if (await self.node.propose([])).error_code != ErrorCode.NONE:
            return
        target = self.node.status()["commit_idx"]
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while time.monotonic() < deadline:
            status = self.node.status()
            if status.get(f"partner_node_status_server_{leaving.raft_address}") != 2:
                return  # down or cut off: it hears nothing, and once out of the voter set nobody listens to it
            if status.get(f"match_idx_server_{leaving.raft_address}", -1) >= target:
                await asyncio.sleep(2 * POLL_S)  # it applies the entry at its next tick
                return
            await asyncio.sleep(POLL_S / 4)

    async def _hand_over(self) -> ChangeOutcome:
        me = self.node.voter.node_id
        if not await self.node.hand_over_leadership():
            return ChangeOutcome(ErrorCode.REQUEST_TIMED_OUT, f"controller {me} is the active controller and no other voter has caught up to "
                                                           "take over; retry in a moment")
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.node.is_leader() or self.node.connected_leader_id() < 0:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_S)
        self._log.info("handed leadership over before being removed", new_leader=self.node.leader_id())
        return ChangeOutcome(ErrorCode.NOT_CONTROLLER, f"controller {me} handed the active role over to be removed; "
                                                    f"{self.controller.not_controller_message()}")

    async def _commit_directory(self, directory: ControllerDirectory) -> ChangeOutcome | None:
        result = await self.node.propose_directory(directory)
        if result.error_code != ErrorCode.NONE:
            return ChangeOutcome(result.error_code, result.error_message)
        return None
