"""``kraftlog console``: serve the web console for a cluster, and ``start_beside``, which
``kraftlog cluster up --console`` uses to run it as a process next to a local cluster."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from cli.bootstrap import data_dir, resolve_bootstrap
from server_common.client_security import ClientSecurity
from server_common.waiting import wait_for

DEFAULT_PORT = 8780
URL_LINE = re.compile(r"console at (http\S+)")


def register(sub: argparse._SubParsersAction, client_options: Callable[..., None]) -> None:
    """Add ``console`` to the ``kraftlog`` parser."""
    console = sub.add_parser("console", help="serve the web console (overview, topics, records, groups, ...) in a browser")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on, 0 for a free one (default: %(default)s)")
    console.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                         help="a node's /metrics URL for the live charts, repeatable (default: the local cluster's metrics ports)")
    console.add_argument("--chaos-dir", type=Path, metavar="DIR", help="a directory of chaos runs to list (default: <data-dir>/chaos if it exists)")
    console.add_argument("--login", choices=["auto", "required", "off"], default="auto",
                         help="sign in with a SCRAM user: auto (required when the client config uses TLS), required, or off "
                              "(every visitor acts as the console's own client identity) (default: %(default)s)")
    console.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                         help="its log on stderr: sign-ins, changes and refusals at INFO (default: %(default)s)")
    client_options(console, json_flag=False)
    console.set_defaults(func=run)


def _local_metrics_urls(directory: Path) -> list[str]:
    """The /metrics URLs of the local cluster in ``directory`` (none when it has none)."""
    from server_common.local_cluster import CLUSTER_FILE, LocalCluster

    if not (directory / CLUSTER_FILE).exists():
        return []
    cluster = LocalCluster.load(directory)
    scheme = "https" if cluster.secure else "http"
    return [f"{scheme}://{n.host}:{n.metrics_port}/metrics" for n in cluster.nodes if n.metrics_port]


def run(args: argparse.Namespace) -> int:
    from aiohttp import web

    from cli.console.server import ConsoleConfig, build_app
    from server_common.logging_setup import configure_logging

    configure_logging(level=args.log_level)  # a server: its sign-ins and changes are worth a line each

    bootstrap = resolve_bootstrap(args.bootstrap, args.data_dir)
    security = ClientSecurity.from_environment()
    local = args.bootstrap is None and not os.environ.get("KRAFTLOG_BOOTSTRAP")
    directory = data_dir(args.data_dir)
    chaos_dir = args.chaos_dir or (directory / "chaos" if (directory / "chaos").is_dir() else None)
    login = args.login == "required" or (args.login == "auto" and security.tls)
    config = ConsoleConfig(bootstrap, security, login, args.metrics_url or (_local_metrics_urls(directory) if local else []), chaos_dir)

    async def serve() -> None:
        runner = web.AppRunner(build_app(config), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        try:
            await site.start()
        except OSError as exc:
            raise ValueError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; pick another --port (0: any free one)") from None
        port = runner.addresses[0][1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"console at http://{host}:{port}/ for the cluster at {bootstrap}"
              f"{' (sign in with a SCRAM user)' if login else ''}; Ctrl-C stops it", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    asyncio.run(serve())
    return 0


PID_FILE = "console.pid"


def start_beside(directory: Path, port: int, detach: bool, timeout_s: float = 30.0) -> tuple[subprocess.Popen, str]:
    """Start ``kraftlog console`` for the local cluster in ``directory`` as a process of its
    own (its output in ``logs/console.log``, its pid in ``console.pid`` for ``cluster down``);
    returns it and its URL once it listens."""
    log_path = directory / "logs" / "console.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "cli", "console", "--data-dir", str(directory), "--port", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detach)
    (directory / PID_FILE).write_text(f"{process.pid}\n")

    def url() -> str | None:
        if process.poll() is not None:
            raise ValueError(f"the console exited at start (exit {process.returncode}): {log_path.read_text().strip()[-500:]}")
        found = URL_LINE.search(log_path.read_text())
        return found.group(1) if found else None

    return process, str(wait_for(url, timeout_s, "the console to listen"))


def stop_beside(directory: Path) -> bool:
    """Stop the console ``cluster up --console`` started for ``directory`` (SIGTERM), if it
    still runs; whether there was one. The pid is checked to still be a console first."""
    pid_file = directory / PID_FILE
    try:
        pid = int(pid_file.read_text())
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    finally:
        pid_file.unlink(missing_ok=True)
    if b"console" not in command_line:
        return False  # that pid is another process by now
    os.kill(pid, signal.SIGTERM)
    return True
