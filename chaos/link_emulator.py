"""A userspace network between network namespaces, for the delays a kernel without ``netem``
cannot make: every node's namespace (and the clients' root namespace) gets a TUN interface,
and this process moves each IPv4 packet from the sender's TUN to the receiver's, after the
delay, jitter, loss or reordering the rules in force give it (``chaos/link_rules.py``).

    python -m chaos.link_emulator      # driven by chaos/netns_emulated.py over stdin/stdout

The first stdin line is the layout, JSON: ``{"tuns": [{"name", "namespace" (null: the root
namespace), "address": "A.B.C.D/24"}]}``; the process opens each TUN (it holds the file
descriptors: the devices go when it exits), moves it into its namespace, gives it its address
and answers ``ready``. Each later line is a command, answered ``ok ID`` once in force:
``{"op": "add", "id", "source", "destination", "loss", "delay_ms", "jitter_ms", "reorder"}``
or ``{"op": "remove", "id"}``. End of stdin ends the process.

One thread, one ``selectors`` loop: packets due now are written at once, delayed ones wait in
a heap of due times. Measured cost: see docs/chaos.md (Real faults, the link emulator).
"""

from __future__ import annotations

import fcntl
import heapq
import itertools
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from chaos.link_rules import LinkRule, RuleTable

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PACKET_BYTES_MAX = 65535
READS_PER_WAKEUP = 64  # packets read from one TUN before the loop looks at the others


@dataclass
class Tun:
    name: str
    namespace: str | None
    address: str  # without the prefix length
    fd: int


def _ip(namespace: str | None, *argv: str) -> None:
    command = ["ip", *argv] if namespace is None else ["ip", "-n", namespace, *argv]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def open_tun(name: str, namespace: str | None, cidr: str) -> Tun:
    """Creates TUN ``name`` (no packet information header: each read is one IP packet),
    moves it into ``namespace`` and brings it up with ``cidr``."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    if namespace is not None:
        _ip(None, "link", "set", name, "netns", namespace)
    _ip(namespace, "addr", "add", cidr, "dev", name)
    _ip(namespace, "link", "set", name, "up")
    return Tun(name, namespace, cidr.split("/")[0], fd)


def addresses(packet: bytes) -> tuple[str, str] | None:
    """(source, destination) of an IPv4 packet; None for anything else (IPv6 chatter)."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    return socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])


class Emulator:
    """The forwarding loop over a set of TUNs."""

    def __init__(self, tuns: list[Tun], table: RuleTable) -> None:
        self.tuns = tuns
        self.table = table
        self._by_address = {t.address: t for t in tuns}
        self._due: list[tuple[float, int, int, bytes]] = []
        self._seq = itertools.count()

    def forward(self, packet: bytes, now: float) -> None:
        ends = addresses(packet)
        target = self._by_address.get(ends[1]) if ends else None
        if target is None:
            return
        wait_s = self.table.decide(*ends)
        if wait_s is None:
            return
        if wait_s <= 0 and not self._due:
            _write(target.fd, packet)
        else:
            heapq.heappush(self._due, (now + wait_s, next(self._seq), target.fd, packet))

    def release_due(self, now: float) -> float | None:
        """Writes every packet due by ``now``; returns seconds until the next one (None: none)."""
        while self._due and self._due[0][0] <= now:
            _, _, fd, packet = heapq.heappop(self._due)
            _write(fd, packet)
        return max(self._due[0][0] - now, 0.0) if self._due else None

    def read_from(self, tun: Tun) -> None:
        for _ in range(READS_PER_WAKEUP):
            try:
                packet = os.read(tun.fd, PACKET_BYTES_MAX)
            except BlockingIOError:
                return
            self.forward(packet, time.monotonic())


def _write(fd: int, packet: bytes) -> None:
    try:
        os.write(fd, packet)
    except OSError:
        pass  # the receiving interface is gone or full: a lost packet, as on a wire


def apply_command(table: RuleTable, command: dict) -> int:
    """Carries out one control command on ``table``; returns its id."""
    if command["op"] == "add":
        table.add(command["id"], LinkRule(command.get("source"), command.get("destination"), float(command.get("loss", 0.0)),
                                          float(command.get("delay_ms", 0.0)), float(command.get("jitter_ms", 0.0)),
                                          bool(command.get("reorder", False))))
    elif command["op"] == "remove":
        table.remove(command["id"])
    else:
        raise ValueError(f"unknown command {command['op']!r}: add or remove")
    return command["id"]


def main() -> int:
    layout = json.loads(sys.stdin.readline())
    tuns = [open_tun(t["name"], t["namespace"], t["address"]) for t in layout["tuns"]]
    emulator = Emulator(tuns, RuleTable())
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    for tun in tuns:
        selector.register(tun.fd, selectors.EVENT_READ, tun)
    selector.register(sys.stdin, selectors.EVENT_READ, None)
    wait_s: float | None = None
    while True:
        for key, _ in selector.select(wait_s):
            if key.data is not None:
                emulator.read_from(key.data)
                continue
            line = sys.stdin.readline()
            if not line:
                return 0
            print(f"ok {apply_command(emulator.table, json.loads(line))}", flush=True)
        wait_s = emulator.release_due(time.monotonic())


if __name__ == "__main__":
    sys.exit(main())
