"""The producer's memory budget: `send` blocks here instead of letting buffers grow without end.

Bytes are reserved per record before it enters the accumulator and released when its batch
completes (delivered or failed), so the total held by unsent and in-flight records never
exceeds `capacity_bytes`. A caller that cannot get room within its wait gets
BUFFER_EXHAUSTED, the producer's signal that brokers are slower than the application.
"""

from __future__ import annotations

import threading
import time

from data_plane.client.errors import KraftlogError


class BufferMemory:
    """A counting budget of bytes with blocking reservation."""

    def __init__(self, capacity_bytes: int) -> None:
        assert capacity_bytes > 0, capacity_bytes
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self.waiters = 0  # > 0 tells the sender to drain eagerly: someone is blocked
        self._cond = threading.Condition()

    def reserve(self, size_bytes: int, wait_s: float) -> None:
        """Takes `size_bytes`, waiting up to `wait_s` for completions to free room."""
        if size_bytes > self.capacity_bytes:
            raise KraftlogError(
                "MESSAGE_TOO_LARGE",
                f"a record of {size_bytes} bytes cannot fit in buffer_memory={self.capacity_bytes}",
            )
        with self._cond:
            if self.used_bytes + size_bytes <= self.capacity_bytes:
                self.used_bytes += size_bytes
                return
            deadline = time.monotonic() + wait_s
            self.waiters += 1
            try:
                while self.used_bytes + size_bytes > self.capacity_bytes:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise KraftlogError(
                            "BUFFER_EXHAUSTED",
                            f"{self.used_bytes} of {self.capacity_bytes} bytes in use after waiting {wait_s:.1f}s",
                            retriable=True,
                        )
                    self._cond.wait(remaining)
                self.used_bytes += size_bytes
            finally:
                self.waiters -= 1

    def release(self, size_bytes: int) -> None:
        """Returns bytes of a completed batch and wakes blocked senders."""
        with self._cond:
            self.used_bytes -= size_bytes
            assert self.used_bytes >= 0, self.used_bytes
            if self.waiters:
                self._cond.notify_all()
