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
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(timeout_s, 0.0), _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
