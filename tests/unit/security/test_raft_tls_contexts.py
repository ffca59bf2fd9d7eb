"""The Raft TLS relay's certificates (metadata_quorum/raft_tls.py) are read again when a file
changed: a new connection after a rotation uses the new certificate, and a half-finished
rotation keeps the last good one."""

from __future__ import annotations

import shutil
from pathlib import Path

from metadata_quorum.raft_tls import raft_tls_files
from server_common.tls import SslContexts
from server_common.tls_certs import common_name, write_cluster_identities


def _identity(directory: Path, name: str) -> Path:
    write_cluster_identities(directory, [name])
    return directory


def _served_name(contexts: SslContexts) -> str:
    """The CN of the certificate the server context presents (through a throwaway handshake)."""
    import socket
    import ssl
    import threading

    server_context, client_context = contexts.current()
    listener = socket.create_server(("127.0.0.1", 0))
    names: list[str] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with server_context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with socket.create_connection(listener.getsockname()) as raw, client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        names.append(dict(x[0] for x in tls.getpeercert()["subject"])["commonName"])
        tls.sendall(b"x")
    thread.join(5)
    listener.close()
    return names[0]


def test_a_rotated_certificate_is_used_for_the_next_connection(tmp_path: Path) -> None:
    live = _identity(tmp_path / "live", "controller-1")
    files = raft_tls_files(live / "controller-1.crt", live / "controller-1.key", live / "ca.crt")
    contexts = SslContexts(files, "--raft-tls")
    assert _served_name(contexts) == "controller-1"

    rotated = _identity(tmp_path / "rotated", "controller-1-rotated")
    for source, target in (("controller-1-rotated.crt", "controller-1.crt"), ("controller-1-rotated.key", "controller-1.key"), ("ca.crt", "ca.crt")):
        shutil.copyfile(rotated / source, live / target)
    assert common_name((live / "controller-1.crt").read_bytes()) == "controller-1-rotated"
    assert _served_name(contexts) == "controller-1-rotated"

    half = _identity(tmp_path / "half", "controller-1-half")
    shutil.copyfile(half / "controller-1-half.crt", live / "controller-1.crt")  # the new certificate, the old key
    assert _served_name(contexts) == "controller-1-rotated"  # the last good pair stays
