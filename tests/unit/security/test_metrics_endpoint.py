"""The /metrics endpoint with a node's TLS (server_common/metrics_endpoint.py): mutual TLS when
the node requires client certificates, refusals counted, and a client that opens a connection
and never says anything does not hold back the next scrape (each handshake runs on its
connection's thread, not on the one that accepts)."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from server_common.metrics_endpoint import connections_refused, serve_metrics
from server_common.tls import ServerTls
from server_common.tls_certs import write_cluster_identities


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=5, context=context) as answer:
        return answer.read().decode()


def test_mutual_tls_metrics_refuse_plain_http_and_strangers_and_a_silent_client_blocks_no_one(tmp_path: Path) -> None:
    write_cluster_identities(tmp_path, ["broker-1"])
    registry = CollectorRegistry()
    Counter("kraftlog_example", "an example", registry=registry).inc()
    port = _free_port()
    stop = serve_metrics(registry, "127.0.0.1", port,
                         ServerTls(tmp_path / "broker-1.crt", tmp_path / "broker-1.key", tmp_path / "ca.crt", "required"), connections_refused(registry))
    url = f"https://127.0.0.1:{port}/metrics"
    try:
        with pytest.raises((ConnectionError, urllib.error.URLError)):
            _get(f"http://127.0.0.1:{port}/metrics")
        trusting = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        with pytest.raises((ConnectionError, urllib.error.URLError, ssl.SSLError)):
            _get(url, trusting)  # the server's certificate is trusted, but this client shows none
        with socket.create_connection(("127.0.0.1", port)):  # opens, sends nothing, stays open
            admin = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            admin.load_cert_chain(tmp_path / "admin.crt", tmp_path / "admin.key")
            text = _get(url, admin)
        assert "kraftlog_example_total 1.0" in text
        assert "kraftlog_metrics_connections_refused_total 2.0" in text
    finally:
        stop()


def test_without_tls_metrics_are_plain_http(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    port = _free_port()
    stop = serve_metrics(registry, "127.0.0.1", port, None, connections_refused(registry))
    try:
        assert "kraftlog_metrics_connections_refused_total 0.0" in _get(f"http://127.0.0.1:{port}/metrics")
    finally:
        stop()
