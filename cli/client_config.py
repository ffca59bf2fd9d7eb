"""Which client config (TLS files, credentials) a command uses, chosen once per command.

In order: ``--command-config FILE``; ``KRAFTLOG_CLIENT_CONFIG``; and, when the command talks to
the local cluster of its data dir (no ``--bootstrap`` and no ``KRAFTLOG_BOOTSTRAP``), the
``client-secure.json`` that ``kraftlog cluster up --secure`` wrote there. The choice is put
into ``KRAFTLOG_CLIENT_CONFIG`` for the rest of the command, so every client it makes
(Producer, Consumer, Admin, ControllerClient, the chaos workers) connects the same way.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cli.bootstrap import data_dir
from server_common.client_security import CLIENT_CONFIG_ENV, ClientSecurity
from server_common.local_cluster import SECURE_CLIENT_CONFIG


def chosen_config(args: argparse.Namespace) -> Path | None:
    """The client config file for this command, or None for plaintext."""
    explicit = getattr(args, "command_config", None)
    if explicit is not None:
        return explicit
    env = os.environ.get(CLIENT_CONFIG_ENV)
    if env:
        return Path(env)
    if getattr(args, "bootstrap", None) or os.environ.get("KRAFTLOG_BOOTSTRAP"):
        return None  # another cluster than the data dir's: its own config must be named
    candidate = data_dir(getattr(args, "data_dir", None)) / SECURE_CLIENT_CONFIG
    return candidate if candidate.exists() else None


def apply_client_config(args: argparse.Namespace) -> None:
    """Check the chosen config now (a bad file is a one-line error before anything runs)
    and make it the default of every client this command creates."""
    path = chosen_config(args)
    if path is None:
        return
    ClientSecurity.load(path)
    os.environ[CLIENT_CONFIG_ENV] = str(path.resolve())
