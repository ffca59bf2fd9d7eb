"""Imports point one way (docs/architecture.md, Layers).

Every module's imports, including those inside functions, are read with ``ast`` and checked
against ``LAYERS``: which kraftlog packages each package may import. A cycle between two
packages (``cli`` importing ``chaos`` for ``kraftlog chaos`` while ``chaos`` imports ``cli``
for its local cluster) or a shell's import seeping into a lower layer (the broker importing
the CLI for its logging setup) fails here with the file and line. ``tests`` and ``examples``
sit on top and may import anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

ROOT = Path(__file__).resolve().parents[2]

COORDINATOR_FLOOR = frozenset({
    "data_plane.coordination", "data_plane.requests", "data_plane.partition_errors", "data_plane.wakeups", "data_plane.record_batch",
    "data_plane.control_batch", "data_plane.replication", "metadata_quorum", "server_common", "kraftlog_proto",
})

# package (or subpackage) -> the kraftlog packages its modules may import. The most specific
# entry that contains a module applies to it.
LAYERS: dict[str, frozenset[str]] = {
    "kraftlog_proto": frozenset({"kraftlog_proto"}),
    "server_common": frozenset({"server_common", "kraftlog_proto"}),
    # the error vocabulary: pure, so that the pure cores may share it
    "server_common.errors": frozenset({"server_common.errors"}),
    "metadata_quorum": frozenset({"metadata_quorum", "server_common", "kraftlog_proto"}),
    "data_plane": frozenset({"data_plane", "metadata_quorum", "server_common", "kraftlog_proto"}),
    # the pure replication core: no storage, no broker, no client, no wire format; only the
    # error vocabulary every layer shares (server_common.errors, itself pure)
    "data_plane.replication": frozenset({"data_plane.replication", "server_common.errors"}),
    # the pure transaction core: the replication core's vocabulary, nothing else (the
    # coordinator's shell beside it in data_plane.transactions is an ordinary data_plane module)
    "data_plane.transactions.state_machine": frozenset({"data_plane.transactions.state_machine", "data_plane.replication", "server_common.errors"}),
    # the coordinators stand beside each other on the floor they share (internal partitions,
    # their placement, the shard, the refusal, the write rules) and the broker's plain request
    # and error types; the broker hosts them (data_plane/broker/coordinators.py), so neither
    # imports the broker, the Kafka door or the other coordinator
    "data_plane.coordination": COORDINATOR_FLOOR,
    "data_plane.groups": COORDINATOR_FLOOR | {"data_plane.groups"},
    "data_plane.transactions": COORDINATOR_FLOOR | {"data_plane.transactions"},
    "spark_source": frozenset({"spark_source", "data_plane", "metadata_quorum", "server_common", "kraftlog_proto"}),
    "chaos": frozenset({"chaos", "data_plane", "metadata_quorum", "server_common", "kraftlog_proto"}),
    "cli": frozenset({"cli", "chaos", "data_plane", "metadata_quorum", "server_common", "kraftlog_proto"}),
}
UNCHECKED = frozenset({"tests", "examples"})  # on top of every layer


@dataclass(frozen=True)
class ForbiddenImport:
    path: str  # relative to the root
    line: int
    importer: str  # the layer the module belongs to
    imported: str  # the module it imports

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} may not import {self.imported}"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_of(module: str, layers: Mapping[str, frozenset[str]]) -> str | None:
    """The most specific entry of ``layers`` that contains ``module``."""
    containing = [package for package in layers if _within(module, package)]
    return max(containing, key=len, default=None)


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every absolute import; ``from m import n`` yields ``m.n`` so that
    ``from data_plane import replication`` counts as importing ``data_plane.replication``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, node.module if alias.name == "*" else f"{node.module}.{alias.name}"


def top_level_packages(root: Path) -> set[str]:
    return {init.parent.name for init in root.glob("*/__init__.py")}


def forbidden_imports(root: Path, layers: Mapping[str, frozenset[str]]) -> list[ForbiddenImport]:
    """Every import of a kraftlog module that its importer's layer does not allow."""
    ours = top_level_packages(root)
    found = []
    for package in sorted((ours - UNCHECKED) & set(layers)):  # the rest: unplaced_packages
        for path in sorted((root / package).rglob("*.py")):
            importer = layer_of(module_name(root, path), layers)
            assert importer is not None
            for line, module in imported_modules(path.read_text()):
                if module.split(".")[0] in ours and not any(_within(module, allowed) for allowed in layers[importer]):
                    found.append(ForbiddenImport(str(path.relative_to(root)), line, importer, module))
    return found


def unplaced_packages(root: Path, layers: Mapping[str, frozenset[str]]) -> list[str]:
    """Top-level packages with no layer: a new package must say where it sits."""
    return sorted(top_level_packages(root) - UNCHECKED - set(layers))


def test_imports_point_one_way() -> None:
    assert [str(f) for f in forbidden_imports(ROOT, LAYERS)] == []


def test_every_package_has_a_layer() -> None:
    assert unplaced_packages(ROOT, LAYERS) == []


def test_every_layer_exists() -> None:
    """A layer naming a package (or module) that is gone checks nothing: the table must follow renames."""
    ours = top_level_packages(ROOT)
    assert [p for p in LAYERS if p.split(".")[0] not in ours] == []
    paths = {p: ROOT / p.replace(".", "/") for p in LAYERS}
    assert [p for p, path in paths.items() if not (path / "__init__.py").exists() and not path.with_suffix(".py").exists()] == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in {Path(name).parts[0] for name in files}:
        (root / package / "__init__.py").touch()
    return root


def test_the_checker_flags_the_broker_importing_the_cli_inside_a_function(tmp_path: Path) -> None:
    """Negative control: the import that used to be there (a lazy one, in a function)."""
    root = _tree(tmp_path, {
        "cli/logging_setup.py": "def configure_logging(): pass\n",
        "data_plane/broker/server.py": "import os\n\n\ndef run():\n    from cli.logging_setup import configure_logging\n",
    })
    assert forbidden_imports(root, LAYERS) == [ForbiddenImport("data_plane/broker/server.py", 5, "data_plane", "cli.logging_setup.configure_logging")]


def test_the_checker_flags_chaos_importing_the_cli_but_not_the_reverse(tmp_path: Path) -> None:
    """Negative control for a two-way dependency: only the upward direction is refused."""
    root = _tree(tmp_path, {
        "cli/main.py": "from chaos.cli import add_subcommand\n",
        "chaos/cli.py": "import cli.local_cluster\n",
    })
    assert [(f.path, f.imported) for f in forbidden_imports(root, LAYERS)] == [("chaos/cli.py", "cli.local_cluster")]


def test_the_checker_flags_a_pure_core_importing_its_shell(tmp_path: Path) -> None:
    """Negative control for the subpackage rule: the replication core may not import storage,
    while the rest of the data plane may."""
    root = _tree(tmp_path, {
        "data_plane/replication/core.py": "from data_plane import storage\nfrom data_plane.replication import errors\n",
        "data_plane/broker/shell.py": "from data_plane import storage\nfrom data_plane.replication import core\n",
    })
    assert [(f.path, f.line, f.imported) for f in forbidden_imports(root, LAYERS)] == [("data_plane/replication/core.py", 1, "data_plane.storage")]


def test_a_package_without_a_layer_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"plugins/thing.py": "", "tests/test_x.py": "import cli\n"})
    assert unplaced_packages(root, LAYERS) == ["plugins"]


# Pure cores that the layer table cannot name (their package also holds shells): module ->
# what it may not import. A decision returns what happened and its shell logs it
# (``Decision.happened``, logged by ``ActiveController.write``); the metadata image and its
# deltas do not depend on the wire format.
NO_LOGGING = frozenset({"structlog", "logging"})
NO_WIRE = frozenset({"kraftlog_proto"})
PURE_MODULES: dict[str, frozenset[str]] = {
    "metadata_quorum.decision": NO_LOGGING | NO_WIRE,
    "metadata_quorum.election": NO_LOGGING | NO_WIRE,
    "metadata_quorum.delta": NO_LOGGING | NO_WIRE,
    "metadata_quorum.image": NO_LOGGING | NO_WIRE,
    "metadata_quorum.placement": NO_LOGGING | NO_WIRE,
    "metadata_quorum.broker_heartbeats": NO_LOGGING | NO_WIRE,
    "metadata_quorum.broker_decisions": NO_LOGGING,  # requests and responses are the controller's protobuf messages
    "metadata_quorum.topic_admin": NO_LOGGING,
    "metadata_quorum.reassignment": NO_LOGGING,
    "metadata_quorum.client_quotas": NO_LOGGING,
    "data_plane.client.produce_answers": NO_LOGGING | NO_WIRE,
    "data_plane.coordination": NO_LOGGING | NO_WIRE,  # the package's own module: the refusal and the write rules
}


def impure_imports(root: Path, pure: Mapping[str, frozenset[str]]) -> list[str]:
    """``path:line: module imports name`` for each import a pure module may not make."""
    found = []
    for module, refused in sorted(pure.items()):
        path = root / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = root / module.replace(".", "/") / "__init__.py"
        for line, imported in imported_modules(path.read_text()):
            if imported.split(".")[0] in refused:
                found.append(f"{path.relative_to(root)}:{line}: {module} imports {imported}")
    return found


def test_pure_cores_neither_log_nor_read_the_wire() -> None:
    assert impure_imports(ROOT, PURE_MODULES) == []


def test_the_purity_check_flags_a_decision_that_logs(tmp_path: Path) -> None:
    """Negative control: election.py as it was, logging its own changes; delta.py importing the wire."""
    root = _tree(tmp_path, {
        "metadata_quorum/election.py": "import structlog\n\nlog = structlog.get_logger('controller')\n",
        "metadata_quorum/delta.py": "from kraftlog_proto import common_pb2\n",
    })
    pure = {"metadata_quorum.election": NO_LOGGING | NO_WIRE, "metadata_quorum.delta": NO_LOGGING | NO_WIRE}
    assert impure_imports(root, pure) == [
        "metadata_quorum/delta.py:1: metadata_quorum.delta imports kraftlog_proto.common_pb2",
        "metadata_quorum/election.py:1: metadata_quorum.election imports structlog",
    ]


def test_the_checker_flags_a_coordinator_importing_the_broker_that_hosts_it(tmp_path: Path) -> None:
    """Negative control: the group coordinator as it was, taking its shards' machinery and its
    request type from the broker package."""
    root = _tree(tmp_path, {
        "data_plane/groups/coordinator.py": "from data_plane.broker.internal_partitions import LedShards\nfrom data_plane.coordination import Refused\n",
        "data_plane/transactions/coordinator.py": "from data_plane.groups import offsets_topic\n",
    })
    assert [(f.path, f.imported) for f in forbidden_imports(root, LAYERS)] == [
        ("data_plane/groups/coordinator.py", "data_plane.broker.internal_partitions.LedShards"),
        ("data_plane/transactions/coordinator.py", "data_plane.groups.offsets_topic"),
    ]
