"""Waking long-polling fetches when a partition changes, at a cost per fetch round that does
not grow with tasks: a fetch over thousands of partitions registers one future with each
partition it reads (a set insertion), instead of starting one task per partition.

A fetch registers before it reads, so a change that lands between its read and its wait
still wakes it. A follower's fetch session instead watches each partition it holds for as long
as it holds it (`watch`): one call per change, nothing per round.

`fire` runs on every append and HW move, so it stays cheap: a set swap, then one call per
waiting fetch and per watching session."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Callable, Iterable, Iterator

from server_common.nudge import wait_or_resolve


class Wakeups:
    """The futures of the fetches waiting for one partition's next change, and the fetch
    sessions watching it."""

    __slots__ = ("_waiting", "_watchers")

    def __init__(self) -> None:
        self._waiting: set[asyncio.Future] = set()
        self._watchers: set[Callable[[], None]] = set()

    def fire(self) -> None:
        """Wake every fetch waiting here (each re-checks its own condition) and tell every
        watcher."""
        waiting, self._waiting = self._waiting, set()
        for future in waiting:
            if not future.done():
                future.set_result(None)
        for watcher in self._watchers:
            watcher()

    def watch(self, watcher: Callable[[], None]) -> None:
        """Call ``watcher`` on every change until `unwatch` (it must not watch or unwatch
        from inside the call)."""
        self._watchers.add(watcher)

    def unwatch(self, watcher: Callable[[], None]) -> None:
        self._watchers.discard(watcher)

    def register(self, future: asyncio.Future) -> None:
        self._waiting.add(future)

    def unregister(self, future: asyncio.Future) -> None:
        self._waiting.discard(future)


@contextlib.contextmanager
def woken_by(sources: Iterable[Wakeups]) -> Iterator[asyncio.Future]:
    """One future, done when any of ``sources`` fires while the block runs."""
    future = asyncio.get_running_loop().create_future()
    registered = list(sources)
    for source in registered:
        source.register(future)
    try:
        yield future
    finally:
        for source in registered:
            source.unregister(future)


async def wait_until_woken(future: asyncio.Future, timeout_s: float) -> None:
    """Wait for ``future`` or the timeout, whichever comes first (the caller re-checks).

    The caller owns ``future`` (a fresh one per wait), so the timeout may complete it: one
    timer and one await, without the task and the extra future `asyncio.wait` and
    `asyncio.wait_for` make, which a woken fetch would otherwise pay on its way to the
    follower or consumer."""
    assert timeout_s >= 0, timeout_s
    await wait_or_resolve(future, timeout_s)


async def settled(futures: list[asyncio.Future], timeout_s: float, timed_out: object) -> None:
    """Wait until every future is done, resolving those still pending at the timeout with
    ``timed_out``. Each future is awaited itself (one wake-up when it resolves, where
    `asyncio.wait` adds a future and a callback in between); the futures must be the
    caller's, as a parked acks=all produce's are (its resolver skips a done one)."""
    assert timeout_s >= 0, timeout_s
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    for future in futures:
        await wait_or_resolve(future, max(deadline - loop.time(), 0.0), timed_out)
