"""fsync by path, for files and directories: shared by the broker's storage and the
controller's Raft journal (both below the power-loss test mode, which records every fsync)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: Path) -> None:
    """Make the file's data durable (any descriptor will do: fsync works on the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make the directory's entries (creations, renames, deletions) durable."""
    fsync_file(directory)
