"""A broker asked to stop while no controller answers does not wait out its whole
controlled-shutdown timeout: after one session timeout without an answer there is no
controller to move its leaderships, so it goes on with the shutdown."""

from __future__ import annotations

import asyncio
import socket

from data_plane.broker.controller_link import BrokerLifecycleManager


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again once the block ends: connections are refused


def test_no_controller_answering_ends_the_wait_after_a_session_timeout() -> None:
    async def scenario() -> bool:
        link = BrokerLifecycleManager(1, "127.0.0.1", 9092, "", [(1, "127.0.0.1", _closed_port())], lambda: 0,
                                      session_timeout_ms=600, heartbeat_interval_ms=100)
        link._broker_epoch = 7  # registered earlier; the controllers have gone since
        try:
            # the controlled-shutdown timeout is 60 s: the outer 10 s bound fails the test if it is waited out
            return await asyncio.wait_for(link.controlled_shutdown(60.0), 10.0)
        finally:
            await link.stop()

    assert asyncio.run(scenario()) is False
