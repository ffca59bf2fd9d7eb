"""server_common.grpc_core: every kraftlog entry point chooses gRPC's transport before grpc
loads (the C core reads ``GRPC_EXPERIMENTS`` once, at its first import), and an operator's own
choice wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from server_common.grpc_core import IOMGR_TRANSPORT

# Records GRPC_EXPERIMENTS at the moment grpc is first imported, then imports the module named.
_PROBE = """
import importlib, importlib.abc, json, os, sys
seen = {}
class Probe(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "grpc" and "grpc" not in seen:
            seen["grpc"] = os.environ.get("GRPC_EXPERIMENTS")
        return None
sys.meta_path.insert(0, Probe())
importlib.import_module(sys.argv[1])
print(json.dumps(seen))
"""


def _experiments_when_grpc_loads(module: str, environment: dict[str, str]) -> str | None:
    seen = json.loads(subprocess.run(
        [sys.executable, "-c", _PROBE, module], env=environment, check=True, capture_output=True, text=True,
    ).stdout)
    assert "grpc" in seen, f"{module} did not import grpc: the probe proves nothing for it"
    return seen["grpc"]


def _environment(**extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "GRPC_EXPERIMENTS"}
    return {**environment, **extra}


@pytest.mark.parametrize("module", [
    "data_plane.broker.server", "metadata_quorum.controller_main", "cli.main",
    "data_plane.client.producer", "chaos.runner", "spark_source.source",
])
def test_every_entry_point_chooses_the_transport_before_grpc_loads(module: str) -> None:
    assert _experiments_when_grpc_loads(module, _environment()) == IOMGR_TRANSPORT


def test_an_operators_own_choice_is_left_alone() -> None:
    assert _experiments_when_grpc_loads("data_plane.broker.server", _environment(GRPC_EXPERIMENTS="")) == ""
