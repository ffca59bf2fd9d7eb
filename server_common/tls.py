"""TLS for a node's gRPC listener and for every channel a node or client opens.

A listener with TLS uses gRPC's dynamic server credentials: before each new connection is
accepted gRPC asks ``_ReloadingFiles.fetch`` for the certificate configuration, which looks
at the certificate, key and CA files and reloads them when one changed. So replacing the
files (write a new name, rename over the old) rotates the certificate without a restart;
connections already open keep the certificate they were set up with, as in any TLS server.
A half-finished rotation (a new certificate next to the old key) is not loaded: the server
keeps the last good pair and logs why, and picks the new pair up once the key matches.

Client authentication (``--tls-client-auth``): ``none`` asks for no client certificate
(clients then authenticate with credentials, or not at all); ``required`` refuses a
connection without a certificate signed by the CA (mutual TLS). There is no "requested"
(ask, verify if sent, admit without): grpcio's server credentials offer only "require and
verify" or "do not ask", so a third mode would silently be one of those.
"""

from __future__ import annotations

import argparse
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import structlog

CLIENT_AUTH_MODES = ("none", "required")

log = structlog.get_logger("tls")


class TlsConfigError(ValueError):
    """A TLS setting that cannot work; the message says which and how to fix it."""


@dataclass(frozen=True)
class ServerTls:
    """The TLS settings of one listener."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None
    client_auth: str  # one of CLIENT_AUTH_MODES

    def credentials(self) -> grpc.ServerCredentials:
        """Dynamic server credentials that reload the files when they change. Raises
        TlsConfigError when the files cannot be read or do not match now, at start, rather
        than at the first handshake."""
        files = _ReloadingFiles(self)
        initial = files.load()
        return grpc.dynamic_ssl_server_credentials(initial, files.fetch, require_client_authentication=self.client_auth == "required")


class _ReloadingFiles:
    """The listener's certificate configuration, reread when a file's size or mtime changes."""

    def __init__(self, tls: ServerTls) -> None:
        self._tls = tls
        self._lock = threading.Lock()
        self._seen: tuple = ()

    def _paths(self) -> list[Path]:
        return [p for p in (self._tls.cert_file, self._tls.key_file, self._tls.ca_file) if p is not None]

    def _stamp(self) -> tuple:
        return tuple((st.st_mtime_ns, st.st_size, st.st_ino) for st in (os.stat(p) for p in self._paths()))

    def load(self) -> Any:
        """The current files as a certificate configuration (raises TlsConfigError)."""
        with self._lock:
            try:
                stamp = self._stamp()
                cert, key = self._tls.cert_file.read_bytes(), self._tls.key_file.read_bytes()
                ca = self._tls.ca_file.read_bytes() if self._tls.ca_file is not None else None
            except OSError as exc:
                raise TlsConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}; check the --tls-* paths") from None
            check_key_pair(cert, key, self._tls.cert_file, self._tls.key_file)
            self._seen = stamp
        root = ca if self._tls.client_auth != "none" else None
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=root)

    def fetch(self) -> Any | None:
        """gRPC's fetcher: a new configuration when the files changed, else None (keep the
        current one). Never raises: a failed reload keeps the last good certificate."""
        try:
            if self._stamp() == self._seen:
                return None
            config = self.load()
        except (OSError, TlsConfigError) as exc:
            log.warning("TLS files changed but cannot be loaded yet; serving with the previous certificate", error=str(exc))
            return None
        log.info("TLS certificate reloaded", cert_file=str(self._tls.cert_file))
        return config


class SslContexts:
    """Python ``ssl`` contexts (server and client) from a listener's files, for the listeners
    gRPC does not run (the Raft relay, the metrics endpoint); rebuilt for a new connection when
    a file changed, so a rotation reaches them as it reaches gRPC's. The server context asks for
    and verifies a client certificate exactly when the listener's ``client_auth`` is ``required``."""

    def __init__(self, tls: ServerTls, option: str) -> None:
        """``option``: what uses the files, for the messages (``--raft-tls``, ``--metrics-port``)."""
        self._tls = tls
        self._option = option
        self._lock = threading.Lock()
        self._seen: tuple = ()
        self.server, self.client = self._build()

    def _stamp(self) -> tuple:
        paths = [p for p in (self._tls.cert_file, self._tls.key_file, self._tls.ca_file) if p is not None]
        return tuple((st.st_mtime_ns, st.st_size, st.st_ino) for st in (os.stat(p) for p in paths))

    def _build(self) -> tuple[ssl.SSLContext, ssl.SSLContext]:
        stamp = self._stamp()
        server, client = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for context in (server, client):
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            try:
                context.load_cert_chain(self._tls.cert_file, self._tls.key_file)
                if self._tls.ca_file is not None:
                    context.load_verify_locations(cafile=str(self._tls.ca_file))
            except (OSError, ssl.SSLError) as exc:
                raise TlsConfigError(f"{self._option} cannot use {self._tls.cert_file}, {self._tls.key_file} and "
                                     f"{self._tls.ca_file}: {exc}; check the --tls-* files") from None
        server.verify_mode = ssl.CERT_REQUIRED if self._tls.client_auth == "required" else ssl.CERT_NONE
        self._seen = stamp
        return server, client

    def current(self) -> tuple[ssl.SSLContext, ssl.SSLContext]:
        """The contexts for a new connection: rebuilt after a rotation; on a half-finished one
        (a file unreadable or not matching yet) the previous ones, logged."""
        with self._lock:
            try:
                if self._stamp() != self._seen:
                    self.server, self.client = self._build()
                    log.info("TLS certificate reloaded", listener=self._option, cert_file=str(self._tls.cert_file))
            except (OSError, TlsConfigError) as exc:
                log.warning("TLS files changed but cannot be loaded yet; using the previous certificate", listener=self._option, error=str(exc))
            return self.server, self.client


def check_key_pair(cert_pem: bytes, key_pem: bytes, cert_file: Path, key_file: Path) -> None:
    """Raises TlsConfigError unless ``key_pem`` is the private key of ``cert_pem``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise TlsConfigError(f"{cert_file} is not a PEM certificate: pass the certificate with --tls-cert-file") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise TlsConfigError(f"{key_file} is not an unencrypted PEM private key: pass the key with --tls-key-file") from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(serialization.Encoding.DER, public) != key.public_key().public_bytes(serialization.Encoding.DER, public):
        raise TlsConfigError(f"{key_file} is not the key of {cert_file}: pass the key the certificate was issued for")


def channel_credentials(ca_file: Path | None, cert_file: Path | None, key_file: Path | None) -> grpc.ChannelCredentials:
    """Client TLS credentials: trust ``ca_file`` (the system's roots when None) and present
    ``cert_file``/``key_file`` when given (mutual TLS)."""
    if (cert_file is None) != (key_file is None):
        raise TlsConfigError("a client certificate needs its key and a key needs its certificate: set both cert_file and key_file, or neither")
    try:
        ca = Path(ca_file).read_bytes() if ca_file is not None else None
        cert = Path(cert_file).read_bytes() if cert_file is not None else None
        key = Path(key_file).read_bytes() if key_file is not None else None
    except OSError as exc:
        raise TlsConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}; check the client config's ca_file, cert_file and key_file") from None
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """The listener options brokers and controllers share."""
    group = parser.add_argument_group("TLS (docs/security.md)")
    group.add_argument("--tls-cert-file", type=Path, help="PEM certificate (chain) this node serves with and presents to its peers; turns TLS on")
    group.add_argument("--tls-key-file", type=Path, help="PEM private key of --tls-cert-file (unencrypted; keep the file mode 0600)")
    group.add_argument("--tls-ca-file", type=Path, help="PEM CA certificate(s) that sign client and peer certificates")
    group.add_argument("--tls-client-auth", choices=CLIENT_AUTH_MODES, default="none",
                       help="none: no client certificate asked; required: mutual TLS, a certificate signed by --tls-ca-file (default: %(default)s)")
    group.add_argument("--require-tls", action="store_true",
                       help="refuse to start without --tls-cert-file/--tls-key-file (a secure deployment never falls back to plaintext)")


def server_tls_from_args(args: argparse.Namespace) -> ServerTls | None:
    """The listener's TLS settings from the options, or None for plaintext. Raises
    TlsConfigError for settings that cannot work, before anything listens."""
    cert, key, ca = args.tls_cert_file, args.tls_key_file, args.tls_ca_file
    if cert is None and key is None:
        if args.require_tls:
            raise TlsConfigError("--require-tls is set but no certificate is: pass --tls-cert-file and --tls-key-file (and --tls-ca-file for mutual TLS)")
        if args.tls_client_auth != "none" or ca is not None:
            raise TlsConfigError("--tls-ca-file/--tls-client-auth need TLS: pass --tls-cert-file and --tls-key-file too")
        return None
    if cert is None or key is None:
        raise TlsConfigError("pass both --tls-cert-file and --tls-key-file (one without the other cannot serve TLS)")
    if args.tls_client_auth != "none" and ca is None:
        raise TlsConfigError(f"--tls-client-auth {args.tls_client_auth} needs --tls-ca-file: the CA that signs the client certificates")
    tls = ServerTls(cert, key, ca, args.tls_client_auth)
    tls.credentials()  # reads and checks the files now
    return tls


def add_port(server: grpc.aio.Server, address: str, tls: ServerTls | None) -> int:
    """Listen on ``address`` with TLS or in plaintext; the bound port (0 on failure)."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.credentials())
