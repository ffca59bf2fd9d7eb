"""One error type (docs/architecture.md, Errors).

An error is a ``server_common.errors.ErrorCode`` from the core that decides it to the edge
that writes it into a response field, and from the field an answer is read from to the code
that acts on it. The generated protobuf constants (``common_pb2.NOT_LEADER_OR_FOLLOWER``,
``common_pb2.ErrorCode``) are the same numbers under a second name: a module that compares
them works today and drifts tomorrow (a name string here, an int there, converted back in a
third place). Every product module is read with ``ast``: naming a protobuf error constant, or
defining another ``ErrorCode``, fails here with the file and line. The enum's numbers are
checked against the proto in ``tests/unit/server_common/test_errors.py``; since they are the
proto's, an ``ErrorCode`` goes into a response field as it is, and ``from_wire_code`` /
``error_code_name`` read one back.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kraftlog_proto import common_pb2
from tests.unit.test_layers import ROOT, UNCHECKED, _tree, top_level_packages

PROTO_MODULE = "kraftlog_proto.common_pb2"
# What the generated module exposes for the enum: its members and the enum wrapper itself.
PROTO_ERROR_NAMES = frozenset(common_pb2.ErrorCode.keys()) | {"ErrorCode"}
THE_ENUM = "server_common/errors.py"  # the one place ErrorCode is defined


def _proto_aliases(tree: ast.AST) -> set[str]:
    """The local names bound to the generated common_pb2 module."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "kraftlog_proto":
            aliases |= {a.asname or a.name for a in node.names if a.name == "common_pb2"}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name == PROTO_MODULE and a.asname}
    return aliases


def protobuf_error_uses(root: Path) -> list[str]:
    """``path:line: what`` for each use of a protobuf error constant or another ErrorCode class."""
    found = []
    for package in sorted(top_level_packages(root) - UNCHECKED - {"kraftlog_proto"}):
        for path in sorted((root / package).rglob("*.py")):
            where = str(path.relative_to(root))
            tree = ast.parse(path.read_text())
            aliases = _proto_aliases(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                        and node.attr in PROTO_ERROR_NAMES):
                    found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
                elif isinstance(node, ast.ImportFrom) and node.module == PROTO_MODULE:
                    found += [f"{where}:{node.lineno}: from {PROTO_MODULE} import {a.name}" for a in node.names if a.name in PROTO_ERROR_NAMES | {"*"}]
                elif isinstance(node, ast.ClassDef) and node.name == "ErrorCode" and where != THE_ENUM:
                    found.append(f"{where}:{node.lineno}: class ErrorCode")
    return found


def test_no_product_module_names_a_protobuf_error_constant() -> None:
    assert protobuf_error_uses(ROOT) == []


def test_the_checker_flags_every_way_of_naming_the_protobuf_constants(tmp_path: Path) -> None:
    """Negative control: the spellings the tree used before the enum moved to server_common."""
    root = _tree(tmp_path, {
        "metadata_quorum/topic_admin.py": "from kraftlog_proto import common_pb2 as common\nx = common.NOT_CONTROLLER\n",
        "data_plane/client/sender.py": "from kraftlog_proto import broker_pb2, common_pb2\n\n\ndef f(c):\n    return common_pb2.ErrorCode.Name(c)\n",
        "chaos/attacker.py": "from kraftlog_proto.common_pb2 import NONE\n",
        "data_plane/replication/errors.py": "from enum import IntEnum\n\n\nclass ErrorCode(IntEnum):\n    NONE = 0\n",
        "server_common/errors.py": "from enum import IntEnum\n\n\nclass ErrorCode(IntEnum):\n    NONE = 0\n",
        "data_plane/broker/fine.py": "from kraftlog_proto import common_pb2\nh = common_pb2.Header(key='k')\n",
    })
    assert protobuf_error_uses(root) == [
        "chaos/attacker.py:1: from kraftlog_proto.common_pb2 import NONE",
        "data_plane/client/sender.py:5: common_pb2.ErrorCode",
        "data_plane/replication/errors.py:4: class ErrorCode",
        "metadata_quorum/topic_admin.py:2: common.NOT_CONTROLLER",
    ]
