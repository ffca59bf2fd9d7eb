"""The code and the docs cite only documents in the repository.

A reader of the repository has nothing else: a docstring or page that sends them to a
document outside it (a design brief, a notes file, a sibling directory) is a dead end. Every
``*.md`` a source file, proto or page names must exist, relative to that file or to the
repository root, and inside the repository. Links to web pages (``https://...``) are not
looked at.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("*.py", "*.md", "*.proto", "*.toml")
SKIPPED_DIRS = {".venv", ".git", "build", "dist", "node_modules"}
# a relative path ending in .md, not part of a URL or of a longer path
DOCUMENT = re.compile(r"(?<![\w/.:-])((?:\.\./|[\w-]+/)*[\w-]+\.md)\b")


def _scanned_files(root: Path) -> list[Path]:
    files = {path for pattern in SCANNED for path in root.rglob(pattern)}
    return sorted(p for p in files if not SKIPPED_DIRS & set(p.relative_to(root).parts[:-1]) and not p.relative_to(root).parts[0].startswith("."))


def _resolves(root: Path, source: Path, reference: str) -> bool:
    for base in (source.parent, root):
        target = (base / reference).resolve()
        if target.is_file() and target.is_relative_to(root.resolve()):
            return True
    return False


def outside_citations(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, reference) for every cited document that is not a file of the repository."""
    found = []
    for path in _scanned_files(root):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            for reference in DOCUMENT.findall(line):
                if not _resolves(root, path, reference):
                    found.append((str(path.relative_to(root)), number, reference))
    return found


def test_code_and_docs_cite_only_documents_in_the_repository() -> None:
    assert outside_citations(ROOT) == []


def test_the_checker_flags_documents_outside_the_repository(tmp_path: Path) -> None:
    """Negative control: a notes file nobody has, one in a sibling directory, a missing page;
    while a page of the repository, relative to the root or to the citing page, and a URL pass."""
    md = ".md"  # spelled apart, so that this file itself cites nothing
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / f"BRIEF{md}").write_text("outside\n")
    (repo / "docs" / f"architecture{md}").write_text(f"See [operations](operations{md}) and ../shared/BRIEF{md}.\n")
    (repo / "docs" / f"operations{md}").write_text(f"Read https://example.org/guide/README{md} too.\n")
    (repo / "core.py").write_text(f'"""Why: NOTES{md} says so; layout in docs/architecture{md}, docs/missing{md}."""\n')
    assert outside_citations(repo) == [
        ("core.py", 1, f"NOTES{md}"),
        ("core.py", 1, f"docs/missing{md}"),
        (f"docs/architecture{md}", 1, f"../shared/BRIEF{md}"),
    ]
