"""Regenerate the Python stubs (``*_pb2.py``, ``*_pb2_grpc.py``, ``*_pb2.pyi``) from ``proto/*.proto``.

Run from anywhere: ``python -m proto``. Needs ``grpcio-tools`` (in the ``test`` extra).
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent


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


def main() -> None:
    generate(ROOT)
    print(f"generated stubs for {', '.join(p.name for p in proto_files())} in {PROTO_DIR}", file=sys.stderr)


if __name__ == "__main__":
    main()
