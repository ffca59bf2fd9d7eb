"""Small text checkpoint files (Kafka's format: a version line, a count line, one entry a line),
always replaced atomically: write a temp file, fsync it, rename it over the old one, fsync
the directory. A reader sees the old file or the new one, never half of either.

A write may skip both fsyncs (``durable=False``) only where losing it is harmless: the
first checkpoint of a file that did not exist, whose reader treats a missing or torn file
as "rebuild from the log" (a torn one fails the version and count lines), or a change that
the reader redoes by itself when it finds the old file (the leader-epoch truncation a log
does at load). ``server_common.fsync.fsync_file`` makes such a write durable later.
"""

from __future__ import annotations

import os
from pathlib import Path

from server_common.fsync import fsync_dir

TopicPartition = tuple[str, int]


def write_lines(path: Path, *, version: int, lines: list[str], durable: bool = True) -> None:
    text = "\n".join([str(version), str(len(lines)), *lines]) + "\n"
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def read_lines(path: Path, *, version: int) -> list[str]:
    """The entry lines (missing file = none); ValueError when the file is not a valid checkpoint."""
    if not path.exists():
        return []
    head, count, *lines = path.read_text().splitlines()
    if int(head) != version:
        raise ValueError(f"{path}: checkpoint version {head}, expected {version}")
    if int(count) != len(lines):
        raise ValueError(f"{path}: says {count} entries but holds {len(lines)}")
    return lines


def write_offset(path: Path, offset: int) -> None:
    """A checkpoint of one offset (the log start, the cleaner's cleaned-up-to)."""
    write_lines(path, version=0, lines=[str(offset)])


def read_offset(path: Path) -> int:
    """The offset ``write_offset`` wrote; 0 when the file is missing; ValueError when unreadable."""
    lines = read_lines(path, version=0)
    return int(lines[0]) if lines else 0


def write_offsets(path: Path, offsets: dict[TopicPartition, int]) -> None:
    """``topic partition offset`` lines (recovery points, high watermarks), in ``offsets``'
    order: readers make a dict of them, and the sort was half the cost of writing 50,000
    entries, which a producing broker does for both files every 5 s (docs/performance.md,
    "Scale")."""
    write_lines(path, version=0, lines=[f"{t} {p} {o}" for (t, p), o in offsets.items()])


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for line in read_lines(path, version=0):
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    return out

