"""``python -m chaos.toxiproxy [--host H] [--port P]``: run the Toxiproxy-compatible server.

Prints one line on stdout once the API answers, ending in the bound port
(``toxiproxy API listening on http://127.0.0.1:8474``), so that ``--port 0`` can be used
by launchers; logs go to stderr. SIGTERM or SIGINT stops the proxies and exits 0, and so
does the end of stdin with ``--exit-on-stdin-eof``: a launcher keeps a pipe open to stdin,
so a test run killed with SIGKILL leaves no orphan server holding ports.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

import structlog

from chaos.toxiproxy.server import ToxiproxyServer


def _configure_logging(level: str) -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


async def _until_stdin_eof(stop: asyncio.Event) -> None:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass
    stop.set()


async def _serve(host: str, port: int, exit_on_stdin_eof: bool) -> None:
    server = ToxiproxyServer()
    bound = await server.start(host, port)
    print(f"toxiproxy API listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = loop.create_task(_until_stdin_eof(stop)) if exit_on_stdin_eof else None
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    await server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.toxiproxy", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="API bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8474, help="API port; 0 picks a free one (default 8474)")
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help="exit when stdin closes (for launchers)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    try:
        asyncio.run(_serve(args.host, args.port, args.exit_on_stdin_eof))
    except OSError as exc:
        sys.exit(f"cannot serve the API on {args.host}:{args.port}: {exc}; pick another --port (0 = any free one)")


if __name__ == "__main__":
    main()
