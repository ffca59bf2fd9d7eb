"""Where client commands find the cluster: ``--bootstrap``, then ``KRAFTLOG_BOOTSTRAP``, then the
``cluster.json`` of a local cluster (``--data-dir``, ``KRAFTLOG_DATA_DIR`` or ``./kraftlog-data``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT_DATA_DIR = Path("kraftlog-data")


class BootstrapError(Exception):
    """No way to find the cluster; the message says how to give one."""


def data_dir(explicit: Path | None) -> Path:
    return explicit or Path(os.environ.get("KRAFTLOG_DATA_DIR", DEFAULT_DATA_DIR))


def resolve_bootstrap(explicit: str | None, data_dir_arg: Path | None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("KRAFTLOG_BOOTSTRAP")
    if env:
        return env
    layout = data_dir(data_dir_arg) / "cluster.json"
    try:
        return json.loads(layout.read_text())["bootstrap"]
    except FileNotFoundError:
        raise BootstrapError(
            f"no cluster to talk to: pass --bootstrap host:port[,...], set KRAFTLOG_BOOTSTRAP, "
            f"or start a local cluster with 'kraftlog cluster up' (looked for {layout})"
        ) from None
    except (KeyError, json.JSONDecodeError):
        raise BootstrapError(f"{layout} is not a kraftlog cluster file: pass --bootstrap host:port instead") from None
