"""Which asyncio event loop a process runs: the standard one, or uvloop (libuv) where asked.

grpc.aio runs on either (its poller hands completions to whichever loop runs the call). The
choice is a process option (`--event-loop` on brokers and controllers) so the two can be
measured side by side; docs/performance.md has the figures behind the default.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("asyncio", "uvloop")


def add_event_loop_argument(parser: argparse.ArgumentParser) -> None:
    """``--event-loop``, as brokers and controllers take it."""
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="uvloop",
                        help="the asyncio event loop this process runs: uvloop (libuv; lower latency per message) or "
                             "asyncio (the standard library's) (default: %(default)s; docs/performance.md)")


def run_loop(main: Coroutine[Any, Any, T], kind: str = "asyncio") -> T:
    """``asyncio.run(main)`` on the event loop ``kind`` names."""
    if kind not in EVENT_LOOPS:
        main.close()
        raise ValueError(f"unknown event loop {kind!r}: choose one of {', '.join(EVENT_LOOPS)}")
    if kind == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
