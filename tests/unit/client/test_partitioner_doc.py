"""docs/protocol.md's key-to-partition test vectors against the Python client's partitioner:
a client in another language checks its murmur2 against that table, so the table must be
what the client computes. The checker also runs on a doctored copy that it must flag."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from data_plane.client.partitioner import murmur2, partition_for_key

PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs/protocol.md"
ROW = re.compile(r"^\| `(b\"[^`]*\")` \| (-?\d+) \| (\d+) \| (\d+) \| (\d+) \|$", re.MULTILINE)


def vectors(doc: str) -> list[tuple[bytes, int, int, int, int]]:
    """The rows of the table under "## Choosing a partition for a key"."""
    section = doc.split("## Choosing a partition for a key", 1)[1].split("\n## ", 1)[0]
    return [(ast.literal_eval(key), *map(int, numbers)) for key, *numbers in ROW.findall(section)]


def disagreements(rows: list[tuple[bytes, int, int, int, int]]) -> list[str]:
    computed = [(key, murmur2(key), murmur2(key) & 0x7FFFFFFF, partition_for_key(key, 3), partition_for_key(key, 12)) for key, *_ in rows]
    return [f"{row[0]!r}: the doc says {row[1:]}, the client computes {mine[1:]}" for row, mine in zip(rows, computed) if row != mine]


def test_the_docs_vectors_are_what_the_client_computes() -> None:
    rows = vectors(PROTOCOL_DOC.read_text())
    assert len(rows) == 8 and disagreements(rows) == []


def test_a_wrong_vector_is_flagged() -> None:
    doctored = PROTOCOL_DOC.read_text().replace("| `b\"abc\"` | 479470107 | 479470107 | 0 | 3 |", "| `b\"abc\"` | 479470107 | 479470107 | 1 | 3 |")
    [problem] = disagreements(vectors(doctored))
    assert problem.startswith("b'abc': the doc says (479470107, 479470107, 1, 3)")
