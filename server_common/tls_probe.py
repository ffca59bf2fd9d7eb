"""Why a connection failed, when TLS is the reason, in words that say what to configure.

gRPC reports every failed TLS set-up the same way to the side that did not cause it
("UNAVAILABLE: Socket closed"): a plaintext client at a TLS port, a client without the
certificate a mutual-TLS server requires, a certificate from another CA. After such a
failure the client probes the address once with Python's ``ssl`` module, with its own
settings, and reads what the server actually said (a TLS alert, a plaintext answer, a
certificate it does not trust). ``classify`` turns that outcome into advice; ``probe`` is
the only I/O. Called only on a failure path, never per request.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

PROBE_TIMEOUT_S = 1.0
CONFIG_HINT = "the client config (--command-config FILE, KRAFTLOG_CLIENT_CONFIG, or security= in code)"

# Outcomes of a probe.
SERVES_TLS = "serves-tls"  # a TLS handshake succeeded (seen by a plaintext client)
PLAINTEXT_SERVER = "plaintext-server"  # the port answered but not with TLS
CERT_REQUIRED = "cert-required"  # the server wants a client certificate and got none
CERT_REFUSED = "cert-refused"  # the server does not trust the client's certificate
SERVER_UNTRUSTED = "server-untrusted"  # the client does not trust the server's certificate
ACCEPTED = "accepted"  # TLS worked: the failure was something else
UNREACHABLE = "unreachable"  # nothing to learn: no TCP connection


def classify(address: str, outcome: str, client_tls: bool, detail: str = "") -> str | None:
    """The advice for a probe's ``outcome``; None when TLS is not the problem."""
    if outcome == SERVES_TLS and not client_tls:
        return (f"{address} requires TLS but this client connects in plaintext: set ca_file (and cert_file/key_file when the "
                f"cluster requires client certificates) in {CONFIG_HINT}")
    if outcome == PLAINTEXT_SERVER and client_tls:
        return f"{address} serves plaintext but this client uses TLS: remove ca_file/cert_file/key_file from {CONFIG_HINT}, or turn TLS on at the server"
    if outcome == CERT_REQUIRED:
        return f"{address} requires a client certificate (mutual TLS): set cert_file and key_file, signed by the cluster's CA, in {CONFIG_HINT}"
    if outcome == CERT_REFUSED:
        return f"{address} refused this client's certificate ({detail}): use a certificate signed by the cluster's CA in {CONFIG_HINT}"
    if outcome == SERVER_UNTRUSTED:
        return f"{address} presented a certificate this client does not trust ({detail}): set ca_file to the CA that signed the cluster's certificates in {CONFIG_HINT}"
    return None


def probe(address: str, ca_file: Path | None, cert_file: Path | None, key_file: Path | None, client_tls: bool,
          timeout_s: float = PROBE_TIMEOUT_S) -> tuple[str, str]:
    """(outcome, detail) of one TLS handshake with ``address`` ("host:port"). A plaintext
    client probes without verifying anything: it only asks whether the port speaks TLS."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.set_alpn_protocols(["h2"])
    if client_tls:
        if ca_file is not None:
            context.load_verify_locations(cafile=str(ca_file))
        if cert_file is not None and key_file is not None:
            context.load_cert_chain(str(cert_file), str(key_file))
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        raw = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        return UNREACHABLE, str(exc)
    try:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            if not client_tls:
                return SERVES_TLS, ""
            try:
                # TLS 1.3 servers judge the client's certificate after the handshake: read the
                # verdict. An accepting gRPC server sends its HTTP/2 settings; a refusing one
                # sends an alert or just closes.
                answer = tls.recv(1)
            except TimeoutError:
                answer = b"-"
            if answer:
                return ACCEPTED, ""
            if cert_file is None:
                return CERT_REQUIRED, "the server closed the connection after the handshake"
            return CERT_REFUSED, "the server closed the connection after the handshake"
    except ssl.SSLCertVerificationError as exc:
        return SERVER_UNTRUSTED, exc.verify_message or exc.reason or str(exc)
    except ssl.SSLError as exc:
        reason = exc.reason or ""
        if "CERTIFICATE_REQUIRED" in reason:
            return CERT_REQUIRED, reason
        if any(word in reason for word in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "DECRYPT_ERROR")):
            return CERT_REFUSED, reason
        return PLAINTEXT_SERVER, reason or str(exc)
    except TimeoutError:  # a paused or overloaded server: nothing learnt
        return UNREACHABLE, "no answer to the TLS handshake"
    except OSError as exc:
        # A plaintext HTTP/2 server answers a ClientHello by closing (or with frames ssl cannot parse).
        return PLAINTEXT_SERVER, str(exc) or type(exc).__name__
    finally:
        raw.close()


def may_be_tls(details: str) -> bool:
    """Whether a gRPC UNAVAILABLE's details leave TLS as a possible cause (a refused TCP
    connection or a timeout do not: there is no server to probe, or no time to)."""
    return not any(word in details for word in ("Connection refused", "Deadline", "No route", "DNS resolution failed"))


def explain(address: str, ca_file: Path | None, cert_file: Path | None, key_file: Path | None, client_tls: bool) -> str | None:
    """Advice when TLS explains a failed connection to ``address``, else None."""
    outcome, detail = probe(address, ca_file, cert_file, key_file, client_tls)
    return classify(address, outcome, client_tls, detail)
