"""A Toxiproxy-compatible TCP fault proxy, because no registry reachable here ships the real one.

It speaks Toxiproxy 2.x's HTTP API (``server.py``) so that the ``toxiproxy-python`` client,
and any other Toxiproxy client, drives it unchanged, and proxies TCP with Toxiproxy's
toxics (``toxics.py``, ``proxy.py``). ``launcher.start_toxiproxy()`` prefers a real
``toxiproxy-server`` on PATH and falls back to ``python -m chaos.toxiproxy``.
"""

from chaos.toxiproxy.launcher import ToxiproxyHandle, start_toxiproxy

__all__ = ["ToxiproxyHandle", "start_toxiproxy"]
