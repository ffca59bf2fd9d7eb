"""A loop from ``thread_loop`` stays quiet about gRPC's cross-loop wake-ups and reports
everything else, as the default handler does."""

from __future__ import annotations

import asyncio
import logging

import pytest

from server_common.aio_loops import thread_loop


class PollerCompletionQueue:
    """Named as gRPC's poller is, so the loop's handle for its callback reads the same."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _handle_events(self) -> None:
        raise self.error


def _reports(loop: asyncio.AbstractEventLoop, callback, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The error records the asyncio logger wrote while ``loop`` ran ``callback`` once."""
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.call_soon(callback)
        loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    return [r.getMessage() for r in caplog.records if r.name == "asyncio"]


@pytest.mark.parametrize("error", [RuntimeError("Event loop is closed"), BlockingIOError(11, "Resource temporarily unavailable")])
def test_gRPC_events_of_another_loop_are_not_reported(error: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    assert _reports(thread_loop(), PollerCompletionQueue(error)._handle_events, caplog) == []
    # negative control: a default loop prints exactly these as errors
    assert _reports(asyncio.new_event_loop(), PollerCompletionQueue(error)._handle_events, caplog) != []


def test_other_errors_are_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    other = PollerCompletionQueue(RuntimeError("something else went wrong"))._handle_events
    assert _reports(thread_loop(), other, caplog) != []

    def unrelated() -> None:
        raise RuntimeError("Event loop is closed")

    assert _reports(thread_loop(), unrelated, caplog) != []
