"""Start a Toxiproxy API server for the chaos harness: the real one if installed, else ours.

``start_toxiproxy()`` runs ``toxiproxy-server`` when it is on PATH (the reference
implementation, Go), otherwise ``python -m chaos.toxiproxy`` from this repository, waits
until ``GET /version`` answers and returns a handle with ``.url``, ``.port``,
``.client()`` and ``.stop()``.

Quirks of the ``toxiproxy-python`` 0.1.1 client that callers must know:

* Host and port live in class attributes of ``toxiproxy.api.APIConsumer``, so they are
  global to the process: ``Toxiproxy.update_api_consumer(host, port)`` (what
  ``handle.client()`` calls) re-points every ``Toxiproxy`` and ``Proxy`` object at once.
  Two servers cannot be driven side by side from one process; call ``handle.client()``
  again before switching. The default is 127.0.0.1:8474.
* ``Toxiproxy.running()`` connects with ``socket.connect_ex((host, port))``: the port must
  be an ``int``, a string fails with TypeError.
* ``Toxiproxy.create()`` first lists all proxies (one extra GET) and raises
  ``ProxyExists`` itself; without ``listen`` it sends ``127.0.0.1:0``, and the returned
  ``Proxy.listen`` holds the port actually bound.
* ``Toxiproxy.populate()`` is done client side (GET, DELETE, POST per proxy), never
  ``POST /populate``; it compares ``listen`` strings literally, so a ``:0`` or
  ``localhost`` listen is destroyed and recreated (losing its toxics) on every call.
* ``Proxy.add_toxic()`` returns None, not the toxic; the stream defaults to
  ``downstream`` and the name to ``<type>_<stream>``. There is no method to update a
  toxic: POST ``/proxies/{p}/toxics/{t}`` with ``requests`` for that.
* ``Proxy.destroy()``/``destroy_toxic()`` return ``bool(response)`` (True on 2xx); 404,
  409 and 400 raise ``NotFound``, ``ProxyExists`` and ``InvalidToxic`` carrying the raw
  body bytes; other errors (500) are not raised at all.
* ``Toxiproxy.version()`` returns the raw body bytes (``b"2.0.0-kraftlog"``), or None when
  nothing listens.
* ``Proxy.disable()``/``enable()`` update only that object's ``enabled``; other ``Proxy``
  objects for the same proxy keep stale fields (fetch again with ``get_proxy``).
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import toxiproxy

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ToxiproxyHandle:
    """A running Toxiproxy API server owned by this process."""

    host: str
    port: int
    process: subprocess.Popen[bytes]
    implementation: str  # "toxiproxy-server" or "chaos.toxiproxy"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self) -> toxiproxy.Toxiproxy:
        """A ``toxiproxy.Toxiproxy`` pointed at this server (re-points the global client).
        The client (and requests under it) load here, not with the module: every ``kraftlog``
        command's parser imports the chaos harness, and only a chaos run needs them."""
        import toxiproxy

        server = toxiproxy.Toxiproxy()
        server.update_api_consumer(self.host, self.port)
        return server

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> ToxiproxyHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_toxiproxy(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    prefer_real: bool = True,
    log_file: IO[bytes] | None = None,
    startup_timeout: float = 10.0,
) -> ToxiproxyHandle:
    """Start a server and wait until it answers ``GET /version``.

    ``port`` 0 picks a free port. ``prefer_real=False`` forces ``chaos.toxiproxy`` even
    when ``toxiproxy-server`` is installed. Server logs go to ``log_file`` (default: this
    process's stderr).
    """
    real = shutil.which("toxiproxy-server") if prefer_real else None
    deadline = time.monotonic() + startup_timeout
    if real:
        port = port or _free_port(host)
        process = subprocess.Popen(
            [real, "-host", host, "-port", str(port)], stdout=log_file, stderr=log_file
        )
        handle = ToxiproxyHandle(host, port, process, "toxiproxy-server")
    else:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        process = subprocess.Popen(
            [sys.executable, "-m", "chaos.toxiproxy", "--host", host, "--port", str(port),
             "--exit-on-stdin-eof"],
            stdin=subprocess.PIPE,  # closes when we die, even by SIGKILL: no orphan server
            stdout=subprocess.PIPE,
            stderr=log_file,
            env=env,
        )
        handle = ToxiproxyHandle(host, 0, process, "chaos.toxiproxy")
        try:
            handle.port = _read_port(process, deadline)
        except Exception:
            handle.stop()
            raise
    try:
        _wait_for_version(handle, deadline)
    except Exception:
        handle.stop()
        raise
    return handle


def _free_port(host: str) -> int:
    """A port free right now; the Go server cannot report a port it chose itself."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _read_port(process: subprocess.Popen[bytes], deadline: float) -> int:
    """The port from the server's first stdout line, without blocking past the deadline."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not selector.select(max(deadline - time.monotonic(), 0)):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    "python -m chaos.toxiproxy printed no address in time; run it by hand to see why"
                )
    line = process.stdout.readline().decode(errors="replace").strip()
    match = re.search(r":(\d+)$", line)
    if match is None:
        raise RuntimeError(
            f"python -m chaos.toxiproxy exited ({process.poll()}) or printed {line!r} instead of its "
            "address; its stderr above says why (a busy --port?)"
        )
    return int(match.group(1))


def _wait_for_version(handle: ToxiproxyHandle, deadline: float) -> None:
    import requests

    while True:
        if handle.process.poll() is not None:
            raise RuntimeError(
                f"{handle.implementation} exited with {handle.process.returncode} before answering "
                f"on {handle.url}; see its log (is the port taken?)"
            )
        try:
            if requests.get(f"{handle.url}/version", timeout=1).ok:
                return
        except requests.ConnectionError:
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{handle.implementation} did not answer {handle.url}/version in time")
        time.sleep(0.05)
