"""Regenerate the Python stubs (``*_pb2.py``, ``*_pb2_grpc.py``, ``*_pb2.pyi``) from ``proto/*.proto``.

Run from anywhere: ``python -m kraftlog_proto``. Needs ``grpcio-tools`` (in the ``test`` extra).
protoc names a generated module after its `.proto` file's folder (``proto.broker_pb2``); the
stubs are written to a scratch folder and their imports rewritten to ``kraftlog_proto``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

STUB_DIR = Path(__file__).resolve().parent
ROOT = STUB_DIR.parent
PROTO_DIR = ROOT / "proto"


def proto_files() -> list[Path]:
    """The contract files, in a stable order."""
    return sorted(PROTO_DIR.glob("*.proto"))


def generate(out_dir: Path) -> None:
    """Compile every `.proto` file into ``out_dir`` (which mirrors the repository root)."""
    from grpc_tools import protoc  # imported here: only developers need grpcio-tools

    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(ROOT)) for p in proto_files()],
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}; fix the .proto error printed above and run again")


def rewrite_imports(text: str) -> str:
    """Point the generated imports at this package instead of the `.proto` files' folder."""
    text = re.sub(r"^from proto import ", "from kraftlog_proto import ", text, flags=re.MULTILINE)
    return re.sub(r"'proto\.(\w+_pb2)'", r"'kraftlog_proto.\1'", text)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch))
        for stub in sorted((Path(scratch) / "proto").iterdir()):
            (STUB_DIR / stub.name).write_text(rewrite_imports(stub.read_text()))
    print(f"generated stubs for {', '.join(p.name for p in proto_files())} in {STUB_DIR}", file=sys.stderr)


if __name__ == "__main__":
    main()
