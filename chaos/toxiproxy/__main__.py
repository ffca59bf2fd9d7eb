"""``python -m chaos.toxiproxy [--host H] [--port P]``: run the Toxiproxy-compatible server.

Prints one line on stdout once the API answers, ending in the bound port
(``toxiproxy API listening on http://127.0.0.1:8474``), so that ``--port 0`` can be used
by launchers; logs go to stderr. SIGTERM or SIGINT stops the proxies and exits 0.
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


async def _serve(host: str, port: int) -> None:
    server = ToxiproxyServer()
    bound = await server.start(host, port)
    print(f"toxiproxy API listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m chaos.toxiproxy", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="API bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8474, help="API port; 0 picks a free one (default 8474)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    try:
        asyncio.run(_serve(args.host, args.port))
    except OSError as exc:
        sys.exit(f"cannot serve the API on {args.host}:{args.port}: {exc}; pick another --port (0 = any free one)")


if __name__ == "__main__":
    main()
