"""The userspace link emulator (chaos/link_emulator.py, chaos/netns_emulated.py) with real
namespaces, TUN interfaces and TCP: a delay rule makes every round trip at least that long,
removing it brings them back under it, and a cut stops the traffic. Needs root and
/dev/net/tun; skipped with the reason otherwise."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from chaos import netns
from chaos.netns import Shaping
from chaos.netns_emulated import EmulatedFabric, emulator_unavailable_reason
from server_common.waiting import wait_for

PORT = 7007
ECHO = "import socket, sys\ns = socket.create_server((sys.argv[1], int(sys.argv[2])))\nwhile True:\n    c, _ = s.accept()\n    while d := c.recv(100):\n        c.sendall(d)\n    c.close()\n"


@pytest.fixture
def fabric() -> Iterator[EmulatedFabric]:
    reason = emulator_unavailable_reason()
    if reason:
        pytest.skip(reason)
    made = EmulatedFabric.create(["a", "b"])
    server = subprocess.Popen(netns.in_namespace(made.namespace("a"), [sys.executable, "-c", ECHO, made.address("a"), str(PORT)]))
    try:
        wait_for(lambda: socket.create_connection((made.address("a"), PORT), timeout=1).close() or True, 10, "the echo server in a's namespace")
        yield made
    finally:
        server.kill()
        server.wait(10)
        made.destroy()


def round_trips_ms(address: str, count: int = 10) -> list[float]:
    with socket.create_connection((address, PORT), timeout=5) as conn:
        times = []
        for _ in range(count):
            started = time.monotonic()
            conn.sendall(b"x")
            assert conn.recv(10) == b"x"
            times.append((time.monotonic() - started) * 1000)
        return times


def test_a_delay_holds_every_round_trip_and_a_cut_stops_traffic(fabric: EmulatedFabric) -> None:
    address = fabric.address("a")
    rule = fabric.shape("a", "clients", Shaping(delay_ms=100, jitter_ms=20))
    delayed = round_trips_ms(address)
    assert min(delayed) >= 100, delayed  # a lower bound: load can only add to it
    fabric.remove(rule)
    assert min(round_trips_ms(address)) < 100  # the control: without the rule, faster
    fabric.cut_inbound("a")
    with pytest.raises(OSError):
        socket.create_connection((address, PORT), timeout=1)
    fabric.heal_all()
    assert round_trips_ms(address, 1)
    leftovers = [line for line in netns._run(["ip", "netns", "list"]).stdout.splitlines() if line.startswith(fabric.tag)]
    assert len(leftovers) == 2  # a's and b's, until destroy
