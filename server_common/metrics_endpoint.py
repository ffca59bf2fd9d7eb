"""The /metrics endpoint of brokers and controllers: Prometheus's WSGI app behind an HTTP
server of our own, with the node's TLS when it has one.

A metrics scrape names every topic and partition with its traffic, size and replicas, so on a
node that serves TLS it is served with the node's certificate and asks what the node's gRPC
listener asks: with ``--tls-client-auth required`` a client certificate signed by the CA
(mutual TLS; any certificate of the CA may scrape), with ``none`` none. Plain HTTP on such a
port fails in the TLS handshake.

prometheus_client's own ``start_http_server(certfile=...)`` wraps the listening socket, so
every handshake runs on the one thread that accepts connections: a client that opens a TCP
connection and sends nothing would stop every scrape. Here the accepting thread only accepts;
each connection's handshake runs on that connection's own thread, bounded by
``CONNECTION_TIMEOUT_S``, with the contexts of ``SslContexts`` (a rotated certificate is used
for the next connection, as by the gRPC listener).
"""

from __future__ import annotations

import socket
import ssl
import threading
from socketserver import ThreadingMixIn
from typing import Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, make_wsgi_app

from server_common.tls import ServerTls, SslContexts

CONNECTION_TIMEOUT_S = 10.0  # a handshake, a request or a socket write that takes longer ends the connection


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per scrape."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


class _MetricsServer(ThreadingMixIn, WSGIServer):
    """One thread per connection; with ``contexts``, TLS set up on that thread."""

    daemon_threads = True
    contexts: SslContexts | None = None
    refused: Counter | None = None

    def finish_request(self, request: socket.socket, client_address) -> None:  # type: ignore[override]
        request.settimeout(CONNECTION_TIMEOUT_S)
        if self.contexts is None:
            super().finish_request(request, client_address)
            return
        server_context, _ = self.contexts.current()
        try:
            connection = server_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):  # plain HTTP, no or a foreign client certificate, a stalled handshake
            if self.refused is not None:
                self.refused.inc()
            return
        with connection:
            super().finish_request(connection, client_address)


def _address_family(host: str, port: int) -> socket.AddressFamily:
    family, *_ = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return family


def connections_refused(registry: CollectorRegistry) -> Counter:
    """The endpoint's own counter (in the node's registry from the start, so it is listed
    whether or not the node has TLS; only TLS refuses anything)."""
    return Counter("kraftlog_metrics_connections_refused", "Connections to this /metrics endpoint that failed the TLS "
                   "handshake: plain HTTP, no client certificate or one from another CA, or too slow", registry=registry)


def serve_metrics(registry: CollectorRegistry, host: str, port: int, tls: ServerTls | None = None,
                  refused: Counter | None = None) -> Callable[[], None]:
    """Serve ``registry`` at http(s)://host:port/metrics from a daemon thread; returns the stop
    function. ``tls``: the node's listener settings (None: plain HTTP); ``refused``: counts the
    failed handshakes (``connections_refused``). A port in use is a clear SystemExit, like the
    gRPC listeners'."""
    server_class = type("MetricsServer", (_MetricsServer,), {
        "address_family": _address_family(host, port), "contexts": SslContexts(tls, "--metrics-port") if tls else None, "refused": refused})
    try:
        server = make_server(host, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler)
    except OSError as exc:
        raise SystemExit(f"cannot serve metrics on {host}:{port} ({exc}): pick another --metrics-port or 0 to turn metrics off") from None
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
