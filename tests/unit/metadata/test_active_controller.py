"""The active controller on a single-voter quorum (loopback, no other processes): a decision
of several entries that fails half way leaves nothing visible, and a newly active controller
drops the invisible leftovers of a creation its predecessor did not finish."""

from __future__ import annotations

import asyncio
from pathlib import Path

from metadata_quorum import active_controller
from metadata_quorum import records as r
from metadata_quorum.active_controller import ActiveController
from metadata_quorum.decision import Decision
from metadata_quorum.topic_admin import abandon_pending_topics
from server_common.errors import ErrorCode
from server_common.nudge import Nudge
from server_common.waiting import async_wait_for
from tests.unit.metadata.test_raft_node import _started, _voter

PENDING = [r.PartitionRecord("id-new", p, (1,), (1,), 1, 0, 0) for p in range(3)]


async def _active(node) -> tuple[ActiveController, asyncio.Task]:
    controller = ActiveController(node, session_timeout_ms=9000)
    task = asyncio.create_task(controller.run())
    await async_wait_for(lambda: controller.is_active, 10, "the controller to activate")
    return controller, task


def test_a_split_write_failing_half_way_leaves_nothing_visible(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await _started(_voter(), tmp_path)
        controller, task = await _active(node)
        assert (await node.propose([r.TopicRecord("a", "id-a")])).error_code == 0
        decision = Decision((*PENDING, r.TopicRecord("a", "id-new")), None, entry_starts=(len(PENDING),))
        outcome = await controller.write(lambda image: decision)
        assert outcome.error_code != 0 and "already exists" in outcome.error_message
        assert not node.image.pending_partitions
        assert node.image.topics["a"].topic_id == "id-a" and not node.image.topics["a"].partitions
        task.cancel()
        node.destroy()

    asyncio.run(scenario())


def test_a_new_active_controller_drops_an_unfinished_creation(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await _started(_voter(), tmp_path)
        assert (await node.propose(PENDING)).error_code == 0  # a predecessor's first entry
        assert set(node.image.pending_partitions) == {"id-new"}
        _, task = await _active(node)
        assert not node.image.pending_partitions and not node.image.topics
        task.cancel()
        node.destroy()

    asyncio.run(scenario())


def _queued_on(lock: asyncio.Lock) -> bool:
    """Whether some task waits for ``lock`` (asyncio keeps its waiters in ``_waiters``)."""
    return bool(getattr(lock, "_waiters", None))


async def _until(condition, timeout_s: float) -> None:
    """Yield to the loop until ``condition()`` holds; fail after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def test_a_creation_cut_by_a_new_term_stops_and_is_dropped_whole(tmp_path: Path) -> None:
    """Leadership moves away and back while a creation commits its entries: the write stops
    at its next entry and the new term drops what it began. Never does the new term's
    cleanup run between the write's entries, which made its TopicRecord fail with "would
    miss partitions" (a half-created topic)."""

    async def scenario() -> None:
        node = await _started(_voter(), tmp_path)
        controller, task = await _active(node)
        entries = [PENDING[:1], PENDING[1:2], [*PENDING[2:], r.TopicRecord("a", "id-new")]]
        decision = Decision(tuple(rec for entry in entries for rec in entry), None, entry_starts=(1, 2))
        propose = node.propose
        activations: list[asyncio.Task] = []

        async def propose_then_lose_leadership(records, *args, **kwargs):
            result = await propose(records, *args, **kwargs)
            if not activations:  # after the first entry: a new term begins on this same node
                controller._step_down()
                activations.append(asyncio.create_task(controller._activate(node.term())))
                # The new term runs as far as it can while the write is mid-way: to its end
                # if it does not wait for the write lock, else (rightly) until it queues on it.
                await _until(lambda: activations[0].done() or _queued_on(controller._write_lock), 10)
            return result

        node.propose = propose_then_lose_leadership
        outcome = await controller.write(lambda image: decision)
        node.propose = propose
        await asyncio.gather(*activations)
        assert outcome.error_code != 0
        assert "would miss partitions" not in outcome.error_message
        assert not node.image.pending_partitions and "a" not in node.image.topics
        task.cancel()
        node.destroy()

    asyncio.run(scenario())


def test_a_term_the_role_loop_has_not_seen_yet_stops_a_creation_too(tmp_path: Path) -> None:
    """Leadership goes to another controller and comes back between two entries of a
    creation, faster than the role loop looks: the other controller's activation dropped the
    first entry, and the write must stop at its next entry (NOT_CONTROLLER, which clients
    retry) instead of ending in a TopicRecord that misses partitions."""

    async def scenario() -> None:
        node = await _started(_voter(), tmp_path)
        controller, task = await _active(node)
        entries = [PENDING[:1], PENDING[1:2], [*PENDING[2:], r.TopicRecord("a", "id-new")]]
        decision = Decision(tuple(rec for entry in entries for rec in entry), None, entry_starts=(1, 2))
        propose, term = node.propose, node.term
        terms: list[int] = []

        async def propose_then_lose_and_regain_leadership(records, *args, **kwargs):
            result = await propose(records, *args, **kwargs)
            if not terms:  # after the first entry: another term came and went, unseen by the role loop
                assert (await propose(abandon_pending_topics(node.image).records)).error_code == 0
                terms.append(term() + 2)
                node.term = lambda: terms[0]
            return result

        node.propose = propose_then_lose_and_regain_leadership
        outcome = await controller.write(lambda image: decision)
        node.propose, node.term = propose, term
        assert outcome.error_code == ErrorCode.NOT_CONTROLLER, outcome.error_message
        assert "would miss partitions" not in outcome.error_message
        assert "a" not in node.image.topics and not node.image.pending_partitions
        task.cancel()
        node.destroy()

    asyncio.run(scenario())


class _Follower:
    """A controller node that is not the Raft leader; counts how often the role loop looks."""

    def __init__(self) -> None:
        self.voter = _voter()
        self.role_changed = Nudge()
        self.looks = 0

    def is_leader(self) -> bool:
        self.looks += 1
        return False


def test_a_follower_looks_at_its_role_only_when_it_changes(tmp_path: Path, monkeypatch) -> None:
    """A controller that is not the leader sleeps until pysyncobj reports a role change instead
    of looking every LEADERSHIP_POLL_S (50 wake-ups a second on every idle follower)."""
    monkeypatch.setattr(active_controller, "FOLLOWER_ROLE_WAIT_S", 30.0)  # only the nudge can wake it here

    async def scenario() -> None:
        node = _Follower()
        task = asyncio.create_task(ActiveController(node, session_timeout_ms=9000).run())
        await async_wait_for(lambda: node.looks > 0, 10, "the role loop to look once")
        await asyncio.sleep(20 * active_controller.LEADERSHIP_POLL_S)  # an observation window: no look without a change
        looks = node.looks
        assert looks <= 2, f"the role loop looked {looks} times with no role change"
        node.role_changed.set()
        await async_wait_for(lambda: node.looks > looks, 10, "the role loop to look again after a role change")
        task.cancel()

    asyncio.run(scenario())
