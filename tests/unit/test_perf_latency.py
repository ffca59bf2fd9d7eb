"""`kraftlog perf latency --peer nats` says what to install when the peer's client is missing,
instead of a traceback from deep in the measurement (a clean clone installs no test extra)."""

from __future__ import annotations

import importlib.util

import pytest

from cli import nats_peer


def test_a_missing_nats_client_is_an_error_naming_the_install(monkeypatch) -> None:
    monkeypatch.setattr(nats_peer, "nats_server_path", lambda: "/usr/sbin/nats-server")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nats" else real(name, *a))
    with pytest.raises(FileNotFoundError, match=r"pip install -e '\.\[test\]'"):
        nats_peer.measure_jetstream(10)
