"""How the CLI shows results: aligned tables for people, one JSON document for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def plural(count: int, noun: str) -> str:
    """``1 member``, ``3 members``: a count with its noun (English plural in -s)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def emit(as_json: bool, document: Any, human: str) -> None:
    """Print ``document`` as JSON when asked, else the human rendering."""
    if as_json:
        json.dump(document, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        print(human)
