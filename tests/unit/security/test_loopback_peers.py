"""Telling this process's loopback connections from another process's (metadata_quorum/loopback_peers.py)."""

from __future__ import annotations

import socket
import subprocess
import sys

from metadata_quorum.loopback_peers import fd_from_this_process, proc_address, socket_inode

PROC_NET_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 100 0 0 10 0
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1
"""


def test_the_client_socket_is_found_by_its_two_addresses() -> None:
    assert proc_address(("127.0.0.1", 8080)) == "0100007F:1F90"
    assert socket_inode(PROC_NET_TCP, ("127.0.0.1", 50000), ("127.0.0.1", 8080)) == 222
    assert socket_inode(PROC_NET_TCP, ("127.0.0.1", 50001), ("127.0.0.1", 8080)) is None


def test_a_connection_from_this_process_is_admitted_and_one_from_another_is_not() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = server.accept()
            with accepted:
                assert fd_from_this_process(accepted.fileno())
        child = subprocess.Popen([sys.executable, "-c", f"import socket,sys; s = socket.create_connection(('127.0.0.1', {port})); sys.stdin.read()"],
                                 stdin=subprocess.PIPE)
        try:
            accepted, _ = server.accept()
            with accepted:
                assert not fd_from_this_process(accepted.fileno())
        finally:
            child.communicate(b"")
