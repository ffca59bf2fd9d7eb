"""Nudge: an Event-like wake-up for one waiter, woken in one loop iteration."""

from __future__ import annotations

import asyncio

from server_common.nudge import Nudge


def test_a_set_nudge_does_not_wait_and_a_cleared_one_waits_for_its_timeout() -> None:
    async def main() -> None:
        nudge = Nudge()
        nudge.set()
        await nudge.wait(3600)  # returns at once: already set
        nudge.clear()
        assert not nudge.is_set()
        await nudge.wait(0.001)  # nothing sets it: the timer ends the wait
        assert not nudge.is_set()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_set_wakes_the_waiter_on_the_next_loop_iteration() -> None:
    async def main() -> None:
        nudge = Nudge()
        loop = asyncio.get_running_loop()
        iterations = 0

        def count() -> None:
            nonlocal iterations
            iterations += 1
            if not waiter.done():
                loop.call_soon(count)

        waiter = loop.create_task(nudge.wait(3600))
        await asyncio.sleep(0)  # the waiter parks
        nudge.set()
        loop.call_soon(count)
        await waiter
        assert nudge.is_set() and iterations <= 2, iterations

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_loop_that_sets_its_own_nudge_still_lets_other_callbacks_run() -> None:
    async def main() -> None:
        nudge = Nudge()
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        for _ in range(1000):
            if ran.is_set():
                return
            nudge.set()  # as a sender pass whose tasks wake it again
            await nudge.wait(3600)
        raise AssertionError("the waiting loop never let a scheduled callback run")

    asyncio.run(asyncio.wait_for(main(), 60))
