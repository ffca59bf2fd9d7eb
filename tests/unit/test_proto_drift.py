"""The committed Python stubs must match the `.proto` files (regenerate with ``python -m kraftlog_proto``).

Compares descriptors, not text, so a different grpcio-tools version that formats the
generated code differently does not fail the test, while any change to a message, field,
enum or service does.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from kraftlog_proto.__main__ import ROOT, proto_files

grpc_tools = pytest.importorskip("grpc_tools", reason="grpcio-tools is in the test extra: pip install -e '.[test]'")


def compiled_descriptors(tmp_path: Path) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    out = tmp_path / "set.pb"
    include = Path(grpc_tools.__file__).parent / "_proto"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"-I{include}", f"--descriptor_set_out={out}",
           *[str(p.relative_to(ROOT)) for p in proto_files()]]
    subprocess.run(cmd, check=True, capture_output=True)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    for f in files:
        _strip_json_names(f)
    return {f.name: f for f in files}


def _strip_json_names(message) -> None:
    """Generated stubs omit json_name (derived from the field name); the descriptor set has it."""
    for field_desc, value in message.ListFields():
        if field_desc.name == "json_name":
            message.ClearField("json_name")
        elif field_desc.type == field_desc.TYPE_MESSAGE:
            for item in value if field_desc.is_repeated else [value]:
                _strip_json_names(item)


@pytest.mark.parametrize("proto", [p.name for p in proto_files()])
def test_generated_stubs_match_proto(proto: str, tmp_path: Path) -> None:
    fresh = compiled_descriptors(tmp_path)[f"proto/{proto}"]
    module = importlib.import_module(f"kraftlog_proto.{proto.removesuffix('.proto')}_pb2")
    committed = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert committed == fresh, f"proto/{proto} changed but its stubs were not regenerated: run python -m kraftlog_proto"


def test_grpc_stubs_name_every_rpc() -> None:
    for path in proto_files():
        module = importlib.import_module(f"kraftlog_proto.{path.stem}_pb2")
        for service in module.DESCRIPTOR.services_by_name.values():
            grpc_module = importlib.import_module(f"kraftlog_proto.{path.stem}_pb2_grpc")
            servicer = getattr(grpc_module, f"{service.name}Servicer")
            missing = [m.name for m in service.methods if not hasattr(servicer, m.name)]
            assert not missing, f"{service.name} stubs lack {missing}: run python -m kraftlog_proto"


def test_drift_is_detected(tmp_path: Path) -> None:
    """Negative control: a changed field must make the descriptors differ."""
    fresh = compiled_descriptors(tmp_path)["proto/broker.proto"]
    changed = descriptor_pb2.FileDescriptorProto()
    changed.CopyFrom(fresh)
    changed.message_type[0].field[0].name = "renamed"
    assert changed != fresh
