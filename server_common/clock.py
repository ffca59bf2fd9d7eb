"""The wall clock brokers and controllers read: ``time.time()`` plus an offset a test
harness can change on one running process, to make that node's clock skewed or jump.

Wall time is what a node stamps on records (LogAppendTime, the time index, segment roll and
retention ages) and what the broker's replica lag and delayed-produce deadlines compare
against. Durations that must never go backwards use ``time.monotonic()`` and do not come
through here: a skewed clock is a fault the node must survive, not one it makes on its own
timers.

The offset lives in a file named by the environment variable ``KRAFTLOG_CLOCK_OFFSET_FILE``
(the chaos harness sets it per node): one integer, milliseconds, absent or empty meaning 0.
The file is looked at no more than every ``POLL_INTERVAL_S`` (on the caller's thread: a
``stat`` call, reading only when its modification time changed), so a hot path pays for a
monotonic clock read almost always. Without the variable the offset is always 0 and nothing
is polled.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

OFFSET_FILE_ENV = "KRAFTLOG_CLOCK_OFFSET_FILE"
POLL_INTERVAL_S = 0.1


def parse_offset_ms(text: str) -> int:
    """The offset a file holds: an integer number of milliseconds, blank meaning 0. Anything
    else is a ValueError naming what to write instead."""
    text = text.strip()
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"clock offset file holds {text!r}: write an integer number of milliseconds (e.g. -30000) or nothing") from None


class OffsetClock:
    """Wall time shifted by the offset in ``offset_file`` (None: never shifted)."""

    def __init__(self, offset_file: Path | None, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.offset_file = offset_file
        self._wall = wall
        self._monotonic = monotonic
        self._offset_ms = 0
        self._mtime_ns: int | None = None
        self._next_poll = 0.0
        self._lock = threading.Lock()

    def offset_ms(self) -> int:
        """The offset in force now (re-read from the file when it changed, at most every
        POLL_INTERVAL_S). A file that cannot be parsed keeps the previous offset: the clock
        must keep answering."""
        if self.offset_file is None:
            return 0
        now = self._monotonic()
        if now < self._next_poll:
            return self._offset_ms
        with self._lock:
            self._next_poll = now + POLL_INTERVAL_S
            try:
                mtime_ns = self.offset_file.stat().st_mtime_ns
            except FileNotFoundError:
                self._offset_ms, self._mtime_ns = 0, None
                return 0
            if mtime_ns != self._mtime_ns:
                try:
                    self._offset_ms = parse_offset_ms(self.offset_file.read_text())
                    self._mtime_ns = mtime_ns
                except (OSError, ValueError):
                    pass  # half-written or bad: try again at the next poll
        return self._offset_ms

    def time(self) -> float:
        """Seconds since the epoch, as ``time.time()``, shifted."""
        return self._wall() + self.offset_ms() / 1000

    def now_ms(self) -> int:
        """Milliseconds since the epoch, shifted."""
        return int(self.time() * 1000)


def write_offset(offset_file: Path, offset_ms: int) -> None:
    """Sets a node's offset (atomically, so the node never reads half a number)."""
    tmp = offset_file.with_name(offset_file.name + ".tmp")
    tmp.write_text(f"{offset_ms}\n")
    os.replace(tmp, offset_file)


def _from_environment() -> OffsetClock:
    path = os.environ.get(OFFSET_FILE_ENV)
    return OffsetClock(Path(path) if path else None)


CLOCK = _from_environment()


def now_ms() -> int:
    """The node's wall clock in milliseconds since the epoch (see the module docstring)."""
    return CLOCK.now_ms()


def wall_time() -> float:
    """The node's wall clock in seconds since the epoch."""
    return CLOCK.time()
