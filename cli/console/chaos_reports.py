"""The chaos runs in a directory (``kraftlog chaos ... --report-dir``): each run's folder
holds ``report.json`` with the verdict and ``report.html``, its timeline (chaos/report/).
Only folders directly under the directory, or the directory itself, are runs: the console
serves their ``report.html`` and nothing else from the file system."""

from __future__ import annotations

import json
from pathlib import Path


def list_runs(root: Path | None) -> list[dict]:
    """One entry per run folder (newest first): name, verdict, its sentence and time."""
    if root is None or not root.is_dir():
        return []
    candidates = [root, *(p for p in root.iterdir() if p.is_dir())]
    runs = []
    for folder in candidates:
        report = folder / "report.json"
        if not report.is_file():
            continue
        try:
            verdict = json.loads(report.read_text()).get("verdict", {})
        except (OSError, json.JSONDecodeError):
            verdict = {"outcome": "unreadable report.json"}
        runs.append({
            "name": "." if folder == root else folder.name, "outcome": verdict.get("outcome"), "sentence": verdict.get("sentence"),
            "modified_s": report.stat().st_mtime, "has_timeline": (folder / "report.html").is_file(),
        })
    return sorted(runs, key=lambda r: -r["modified_s"])


def timeline_path(root: Path | None, name: str) -> Path | None:
    """The ``report.html`` of run ``name``; None for a name that is not a run listed by
    ``list_runs`` (no path outside the directory is ever answered)."""
    if root is None or name not in {r["name"] for r in list_runs(root)}:
        return None
    path = (root if name == "." else root / name) / "report.html"
    return path if path.is_file() else None
