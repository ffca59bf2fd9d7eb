"""Waiting for a condition with a deadline, never for a fixed time.

Process supervision (``local_cluster``), the chaos harness and the tests all wait for
something another process does (a port answers, a broker registers, a replica catches up).
A sleep of a guessed length is either too short on a loaded machine or wastes time on an
idle one; these helpers poll until the condition holds and fail with a message naming what
did not happen.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable


class GaveUp(Exception):
    """Raised by a condition when waiting longer cannot help (the process it waits on has
    exited): ``wait_for`` passes it on at once instead of polling to its deadline."""


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05) -> object:
    """Poll ``condition`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except GaveUp:
            raise
        except Exception as exc:  # the condition may fail while a process is still starting
            last_error = exc
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


async def async_wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05) -> object:
    """``wait_for`` for code on an event loop (the loop keeps running between checks)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
