"""Whether a loopback TCP connection comes from this very process (Linux ``/proc``).

With ``--raft-tls`` pysyncobj and the TLS relay talk over loopback ports in one process:
pysyncobj's own listener, and one relay port per other voter that pysyncobj dials. Anything
else on the machine could dial those ports too: straight to pysyncobj past the TLS check, or
into a relay port that carries its bytes to a peer under this controller's certificate.
pysyncobj only speaks TCP (no Unix socket to protect with file modes), so each side checks
that the socket at the other end of an accepted connection is one of this process's own file
descriptors: ``/proc/net/tcp`` names the socket's inode by its two addresses, and
``/proc/self/fd`` lists the process's sockets by inode.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable

import structlog
from pysyncobj.transport import TCPTransport

PROC_NET_TCP = Path("/proc/net/tcp")
PROC_SELF_FD = Path("/proc/self/fd")

Address = tuple[str, int]


def proc_address(address: Address) -> str:
    """An IPv4 address as ``/proc/net/tcp`` writes it (``127.0.0.1:8080`` → ``0100007F:1F90``)."""
    host, port = address
    return f"{int.from_bytes(socket.inet_aton(host), 'little'):08X}:{port:04X}"


def socket_inode(proc_net_tcp: str, local: Address, remote: Address) -> int | None:
    """The inode of the socket whose own address is ``local`` and whose peer is ``remote``."""
    want = (proc_address(local), proc_address(remote))
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and (fields[1], fields[2]) == want:
            return int(fields[9])
    return None


def _own_socket_inodes() -> set[int]:
    inodes = set()
    for fd in os.listdir(PROC_SELF_FD):
        try:
            target = os.readlink(PROC_SELF_FD / fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def from_this_process(accepted_sockname: Address, accepted_peername: Address) -> bool:
    """Whether the client end of an accepted connection (``accepted_peername`` →
    ``accepted_sockname``) is a socket of this process."""
    try:
        inode = socket_inode(PROC_NET_TCP.read_text(), accepted_peername, accepted_sockname)
        return inode is not None and inode in _own_socket_inodes()
    except OSError:  # no /proc (not Linux): nothing proves the client is ours, so it is not admitted
        return False


def fd_from_this_process(fd: int) -> bool:
    """``from_this_process`` for an accepted socket known by its file descriptor (pysyncobj's)."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        try:
            return from_this_process(sock.getsockname()[:2], sock.getpeername()[:2])
        except OSError:  # the client is already gone
            return False


def admitting_transport(base: type[TCPTransport], admit: Callable[[int], bool], controller_id: int) -> type[TCPTransport]:
    """``base`` (a pysyncobj transport class) that drops, before reading a byte, each incoming
    connection ``admit`` refuses by its socket's file descriptor."""
    refused_log = structlog.get_logger("raft_tls").bind(controller_id=controller_id)

    class AdmittingTransport(base):  # type: ignore[misc, valid-type]
        def _onNewIncomingConnection(self, conn):
            if not admit(conn.fileno()):
                refused_log.warning("Raft connection refused: not from this controller's relay",
                                    hint="with --raft-tls only the relay in the controller's own process may reach pysyncobj's port")
                conn.disconnect()
                return
            super()._onNewIncomingConnection(conn)

    return AdmittingTransport
