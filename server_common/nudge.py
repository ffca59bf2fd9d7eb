"""A wake-up flag for one waiting task, cheaper than ``asyncio.Event`` plus ``asyncio.wait_for``.

On Python 3.11 ``asyncio.wait_for(event.wait(), timeout)`` starts a task for ``event.wait()``
and adds a future between it and the waiter, so a wake-up travels through three loop
iterations before the waiter runs. A loop that waits once per produced record (the
producer's sender) or per replication round pays that on every write; `Nudge` wakes its
waiter in one: a future per wait and a timer beside it (docs/performance.md).
"""

from __future__ import annotations

import asyncio


class Nudge:
    """Set, clear and wait like ``asyncio.Event``, for at most one waiter at a time."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout_s: float) -> None:
        """Return once set, or after ``timeout_s`` (the caller looks at why). Always yields to
        the loop at least once, even when already set: a loop whose own work sets its nudge
        (the sender's tasks do) must still let other callbacks run between its passes, or
        it spins without ever seeing them."""
        assert self._waiter is None, "a Nudge has one waiter"
        if self._set:
            await asyncio.sleep(0)
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await wait_or_resolve(self._waiter, max(timeout_s, 0.0))
        finally:
            self._waiter = None


async def wait_or_resolve(future: asyncio.Future, timeout_s: float, timed_out: object = None) -> None:
    """Await the caller's own ``future``, resolving it with ``timed_out`` if it is still pending
    after ``timeout_s``: one timer and one await, without the task and the extra future that
    ``asyncio.wait_for`` adds. Only for a future nobody else awaits a different answer from."""
    if future.done():
        return
    timer = asyncio.get_running_loop().call_later(timeout_s, _resolve, future, timed_out)
    try:
        await future
    finally:
        timer.cancel()


def _resolve(future: asyncio.Future, value: object) -> None:
    if not future.done():
        future.set_result(value)
