"""Installing kraftlog must not claim an import name another package owns.

``proto`` is proto-plus's (every Google Cloud client library depends on it) and ``tests`` is
anybody's: a wheel that ships either shadows or is shadowed by them in a user's environment.
The test builds the real wheel and reads its top-level names.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = {"kraftlog_proto", "server_common", "metadata_quorum", "data_plane", "cli", "chaos", "spark_source"}


def wheel_top_level_names(tmp_path: Path) -> set[str]:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("kraftlog-*.whl")
    names = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    return {n for n in names if not n.endswith(".dist-info")}


def test_the_wheel_ships_only_kraftlogs_own_packages(tmp_path: Path) -> None:
    names = wheel_top_level_names(tmp_path)
    assert "proto" not in names and "tests" not in names, names
    assert names == OURS, f"unexpected top-level names {sorted(names - OURS)}, missing {sorted(OURS - names)}"


def test_the_generated_stubs_import_each_other_under_kraftlog_proto() -> None:
    stubs = sorted((ROOT / "kraftlog_proto").glob("*_pb2*.py*"))
    assert stubs, "no generated stubs in kraftlog_proto/: run python -m kraftlog_proto"
    for stub in stubs:
        text = stub.read_text()
        assert "from proto import" not in text and "'proto." not in text, (
            f"{stub.name} imports the proto/ folder as a package: run python -m kraftlog_proto")
