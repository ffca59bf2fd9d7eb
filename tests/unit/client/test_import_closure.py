"""The client stands on its own (docs/architecture.md, Layers): a Spark task or a short script
pays for ``import data_plane.client`` on every start, so it must not drag in the broker, the
controller, storage or the coordinators, and it must stay cheap.

Each check runs in a fresh interpreter: in this one, other tests have imported everything.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# What a client never needs: the server side, and the controller's stubs (the client talks
# to brokers only; naming the controller's service on an error path imports it there).
SERVER_SIDE = (
    "data_plane.broker", "data_plane.storage", "data_plane.groups", "data_plane.transactions", "data_plane.kafka",
    "metadata_quorum", "kraftlog_proto.controller_pb2", "grpc_reflection.v1alpha",
)
CPU_MS_MAX = 100.0


def _run(code: str, env: dict[str, str] | None = None) -> str:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT).stdout


def server_side_modules(import_line: str) -> list[str]:
    """The server-side modules loaded by ``import_line`` in a fresh interpreter."""
    code = f"import sys, json\n{import_line}\nprint(json.dumps(sorted(sys.modules)))"
    return [m for m in json.loads(_run(code)) if m.startswith(SERVER_SIDE)]


def test_importing_the_client_loads_no_broker_controller_or_storage_module() -> None:
    assert server_side_modules("import data_plane.client") == []


def test_the_closure_check_sees_a_server_module() -> None:
    """Negative control: the check reports what an import really loads."""
    assert "data_plane.storage.compaction" in server_side_modules("import data_plane.storage.compaction")


@pytest.mark.benchmark
@pytest.mark.parametrize("import_line", ["import data_plane.client", "from data_plane.client import Consumer",
                                         "from data_plane.client import Producer"])
def test_importing_the_client_costs_at_most_100_ms_of_cpu_after_grpc_and_protobuf(tmp_path: Path, import_line: str) -> None:
    """CPU time of the import in fresh interpreters with grpc and protobuf already loaded and
    bytecode cached (as an installed package has it; the cache goes to ``tmp_path``): the
    package itself (its classes load when first named), and what a Spark task names, the
    Consumer (the source) or the Producer (the sink)."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = ("import time, grpc, grpc.aio, google.protobuf.message, google.protobuf.descriptor_pool\n"
            f"t = time.process_time()\n{import_line}\nprint((time.process_time() - t) * 1000)")
    _run(code, env)  # fills the bytecode cache
    median = statistics.median(float(_run(code, env)) for _ in range(9))
    print(f"{import_line}: {median:.1f} ms CPU (median of 9)")
    assert median <= CPU_MS_MAX
