"""Event loops for ``grpc.aio`` in threads of their own (the producer's sender runs one).

gRPC's asyncio layer has one completion queue per process, and every loop that has used
``grpc.aio`` listens on its notification socket (grpc/grpc#23377). So when a process runs
several such loops, as a process with several producers does, a loop can be woken for an
event of another loop's call: reading a byte another loop already took raises
``BlockingIOError``, and an event of a call whose loop has since closed (a producer that
closed while gRPC still had its call's completion queued) raises "Event loop is closed".
Neither loses anything (the event's own loop either got it or is gone), but the loop's
default handler prints each as an error traceback; grpc/grpc#36096 proposes the same
filter inside gRPC.
"""

from __future__ import annotations

import asyncio
from typing import Any

_POLLER_CALLBACK = "PollerCompletionQueue._handle_events"


def thread_loop() -> asyncio.AbstractEventLoop:
    """A new event loop (uvloop: less CPU per gRPC message than the standard loop,
    docs/performance.md) that does not report gRPC's cross-loop wake-ups as errors."""
    import uvloop

    loop = uvloop.new_event_loop()
    loop.set_exception_handler(report_unless_cross_loop_wakeup)
    return loop


def report_unless_cross_loop_wakeup(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's default report, except for gRPC's poller callback failing because the event
    was another loop's (``BlockingIOError``) or its loop has closed (``RuntimeError``)."""
    error = context.get("exception")
    cross_loop = isinstance(error, BlockingIOError) or (isinstance(error, RuntimeError) and "Event loop is closed" in str(error))
    if cross_loop and _POLLER_CALLBACK in repr(context.get("handle")):
        return
    loop.default_exception_handler(context)
