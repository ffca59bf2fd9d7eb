"""No file circles (docs/architecture.md, Layers).

The layer table (test_layers.py) keeps packages pointing one way; inside a package two modules
can still import each other (a shell reaching into its caller's privates, a run importing the
runner that dispatches to it). Such a circle means neither file can be read, tested or changed
alone. Every module's imports (inside functions and under ``TYPE_CHECKING`` too) make a graph;
each strongly connected set of two or more modules is a circle, and any circle not in
``KNOWN_CIRCLES`` fails here with its modules. A module importing its own package's
``__init__`` is not counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pytest

from tests.unit.test_layers import ROOT, UNCHECKED, _tree, imported_modules, module_name, top_level_packages

# The circles left, each to be cut by giving one side the narrow interface it uses; remove an
# entry once its circle is gone (an entry that no longer matches fails too).
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the product modules it imports (``from p import m`` counts as importing ``p.m``
    when that is a module, else ``p``)."""
    modules = {module_name(root, path): path for package in sorted(top_level_packages(root) - UNCHECKED)
               for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, imported in imported_modules(path.read_text()):
            parts = imported.split(".")
            target = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules), None)
            if target is not None and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph


def circles(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.add(frozenset(members))
    return found


@pytest.fixture(scope="module")
def tree_circles() -> set[frozenset[str]]:
    return circles(import_graph(ROOT))


def test_no_file_circle_but_the_known_ones(tree_circles: set[frozenset[str]]) -> None:
    assert sorted(sorted(c) for c in tree_circles - KNOWN_CIRCLES) == []


def test_every_known_circle_still_exists(tree_circles: set[frozenset[str]]) -> None:
    """A circle that was cut leaves the list, so that it cannot come back unnoticed."""
    assert sorted(sorted(c) for c in KNOWN_CIRCLES - tree_circles) == []


def test_the_checker_finds_the_circles_that_were_cut(tmp_path: Path) -> None:
    """Negative control: the two circles cut here, as they were (one through a TYPE_CHECKING
    import, one through imports inside functions), and a one-way pair that is no circle."""
    root = _tree(tmp_path, {
        "data_plane/client/consumer.py": "from data_plane.client.group_session import GroupSession\n",
        "data_plane/client/group_session.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from data_plane.client.consumer import Consumer\n",
        "chaos/runner.py": "def run():\n    from chaos.group_run import run_group\n",
        "chaos/group_run.py": "from chaos.runner import RunOptions\n",
        "chaos/run_options.py": "",
        "chaos/txn_run.py": "from chaos.run_options import RunOptions\n",
        "data_plane/client/__init__.py": "from data_plane.client.consumer import Consumer\n",
    })
    assert circles(import_graph(root)) == {
        frozenset({"data_plane.client.consumer", "data_plane.client.group_session"}),
        frozenset({"chaos.runner", "chaos.group_run"}),
    }
