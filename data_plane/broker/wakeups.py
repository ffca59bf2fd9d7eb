"""Waking long-polling fetches when a partition changes, at a cost per fetch round that does
not grow with tasks: a fetch over thousands of partitions registers one future with each
partition it reads (a set insertion), instead of starting one task per partition.

A fetch registers before it reads, so a change that lands between its read and its wait
still wakes it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Iterable, Iterator


class Wakeups:
    """The futures of the fetches waiting for one partition's next change."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: set[asyncio.Future] = set()

    def fire(self) -> None:
        """Wake every fetch waiting here (each re-checks its own condition)."""
        waiting, self._waiting = self._waiting, set()
        for future in waiting:
            if not future.done():
                future.set_result(None)

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
    """Wait for ``future`` or the timeout, whichever comes first (the caller re-checks)."""
    assert timeout_s >= 0, timeout_s
    await asyncio.wait([future], timeout=timeout_s)
