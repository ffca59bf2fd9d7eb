"""Mutual TLS on the Raft links between controllers (``--raft-tls``).

pysyncobj speaks plain TCP (its optional shared-secret encryption aside) and cannot be handed
an SSL context, so each controller relays its Raft connections through TLS itself:

- pysyncobj listens on a loopback port of its own (``bind_address``) instead of the voter's
  Raft address; the relay listens on the Raft address with TLS, demands a client certificate
  signed by the CA, and forwards each accepted connection to pysyncobj's port;
- for each other voter the relay listens on a loopback port that pysyncobj dials instead of the
  voter (``routes``), and carries each connection to that voter's Raft address (or its
  ``--raft-peer-address`` override, e.g. a proxy) over TLS, presenting this controller's
  certificate and checking the voter's against the CA and its address.

So every byte between two controllers is TLS, both ends are authenticated by certificate,
and pysyncobj's identities (``host:raft_port`` of each voter) do not change. The files are
the node's ``--tls-*`` files, read again for each new connection when one changed, so a
rotated certificate is used without a restart (open connections keep theirs). A peer's
certificate must also name a controller (``--raft-principals``, by default
``User:controller-<id>`` for each voter): a client certificate from the same CA, even an
administrator's, is not a voter. The loopback ports (pysyncobj's listener and the relay's
ports for pysyncobj) admit only connections from this process (``loopback_peers``), so
another local process can neither reach pysyncobj past TLS nor borrow this controller's
certificate; keep the shared secret (``--raft-secret-file``) on as well, as a second lock.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import structlog

from metadata_quorum.endpoints import Voter
from metadata_quorum.loopback_peers import from_this_process
from server_common.tls import ServerTls, SslContexts, TlsConfigError

LOOPBACK = "127.0.0.1"
COPY_BYTES = 64 * 1024
HANDSHAKE_TIMEOUT_S = 5.0

log = structlog.get_logger("raft_tls")


def free_loopback_port() -> int:
    """A port nothing listens on now, for pysyncobj's own listener."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def peer_principal(writer: asyncio.StreamWriter) -> str:
    """``User:<certificate CN>`` of the TLS peer (as the gRPC listeners name principals)."""
    cert = writer.get_extra_info("peercert") or {}
    names = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    return f"User:{names[0]}" if names else "User:ANONYMOUS"


class RaftTlsRelay:
    """The relay of one controller; `start` before creating the Raft node."""

    def __init__(self, me: Voter, voters: list[Voter], tls: ServerTls, voter_principals: frozenset[str],
                 peer_overrides: dict[int, tuple[str, int]]) -> None:
        self.me = me
        self.peers = [v for v in voters if v.node_id != me.node_id]
        self._contexts = SslContexts(tls, "--raft-tls")
        self._voter_principals = voter_principals
        self._targets = {v.node_id: peer_overrides.get(v.node_id, (v.host, v.raft_port)) for v in self.peers}
        self.bind_address = f"{LOOPBACK}:{free_loopback_port()}"
        self.routes: dict[int, tuple[str, int]] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._log = log.bind(controller_id=me.node_id)

    async def start(self) -> None:
        self._servers.append(await asyncio.start_server(self._inbound, self.me.host, self.me.raft_port))
        for peer in self.peers:
            server = await asyncio.start_server(lambda r, w, p=peer: self._outbound(r, w, p), LOOPBACK, 0)
            self._servers.append(server)
            self.routes[peer.node_id] = (LOOPBACK, server.sockets[0].getsockname()[1])
        self._log.info("Raft links over mutual TLS", raft_address=self.me.raft_address, raft_bind_address=self.bind_address,
                       peers={v.node_id: f"{h}:{p}" for v, (h, p) in zip(self.peers, self._targets.values())},
                       routes={node_id: port for node_id, (_, port) in self.routes.items()},
                       voter_principals=sorted(self._voter_principals))

    def close(self) -> None:
        for server in self._servers:
            server.close()

    async def _inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A peer dialed our Raft address: TLS with its certificate, then on to pysyncobj."""
        server_context, _ = self._contexts.current()
        peer = writer.get_extra_info("peername")
        try:
            await writer.start_tls(server_context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (ssl.SSLError, OSError, asyncio.TimeoutError) as exc:
            self._log.warning("Raft TLS connection refused", peer=str(peer), error=str(exc) or type(exc).__name__,
                              hint="a voter must present a certificate signed by --tls-ca-file")
            writer.close()
            return
        principal = peer_principal(writer)
        if principal not in self._voter_principals:
            self._log.warning("Raft TLS connection refused: the certificate names no controller", peer=str(peer), principal=principal,
                              hint="only the controllers' certificates may reach a Raft port: list their names in --raft-principals")
            writer.close()
            return
        host, port = self.bind_address.rsplit(":", 1)
        await self._pipe(reader, writer, lambda: asyncio.open_connection(host, int(port)), f"inbound from {principal}")

    async def _outbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Voter) -> None:
        """pysyncobj dialed a peer: carry the connection to it over TLS."""
        if not from_this_process(writer.get_extra_info("sockname")[:2], writer.get_extra_info("peername")[:2]):
            self._log.warning("Raft relay connection refused: not from this controller's process", peer=str(writer.get_extra_info("peername")),
                              link=f"outbound to controller {peer.node_id}")
            writer.close()
            return
        _, client_context = self._contexts.current()
        host, port = self._targets[peer.node_id]
        await self._pipe(reader, writer, lambda: asyncio.open_connection(
            host, port, ssl=client_context, server_hostname=peer.host, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S),
            f"outbound to controller {peer.node_id}")

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connect, what: str) -> None:
        try:
            far_reader, far_writer = await connect()
        except ssl.SSLError as exc:  # the other end's certificate, or ours, was refused
            self._log.warning("Raft TLS connection refused", link=what, error=str(exc),
                              hint="every voter needs a certificate signed by the CA of --tls-ca-file, for its Raft host")
            writer.close()
            return
        except (OSError, asyncio.TimeoutError) as exc:  # the voter is down or restarting: pysyncobj dials again
            self._log.debug("Raft link not established", link=what, error=str(exc) or type(exc).__name__)
            writer.close()
            return
        await asyncio.gather(_copy(reader, far_writer), _copy(far_reader, writer))


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from ``reader`` to ``writer`` until either side ends; then both ends close."""
    try:
        while data := await reader.read(COPY_BYTES):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def raft_tls_files(cert_file: Path | None, key_file: Path | None, ca_file: Path | None) -> ServerTls:
    """The node's TLS files as the relay's settings; refuses what cannot work."""
    if cert_file is None or key_file is None or ca_file is None:
        raise TlsConfigError("--raft-tls uses the node's --tls-cert-file, --tls-key-file and --tls-ca-file: pass all three")
    return ServerTls(cert_file, key_file, ca_file, "required")
