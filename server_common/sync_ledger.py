"""What a power failure would leave of a data directory: the pure half of the power-loss test
mode (the shell is ``server_common/power_loss.py``).

A kill -9 keeps the page cache, so it never tests a write that was acknowledged but not yet
on disk. In the power-loss test mode a process appends one line to a ledger for every call
that decides what survives a power failure; after the process is killed, ``plan_cut`` turns
the ledger and the files found on disk into the cuts that bring every file back to what its
last fsync made durable, as Jepsen's LazyFS does below a real filesystem. Files are known by
inode, so a rename keeps what was made durable under the old name.

Ledger lines (tab-separated; inode numbers of one filesystem):

    S ino size            fsync/fdatasync of a regular file: its first ``size`` bytes are durable
    C ino                 same, for a file rewritten in place (a copy of it was saved, see below)
    D ino name ino ...    fsync of a directory: these names, of these inodes, are durable
    T ino size            truncated to ``size`` (not yet durable: the durable length shrinks)
    U ino                 the last link went (unlink, or a rename over it): forget the inode

The model, with what it assumes:

- an append-only file keeps exactly its durable length; bytes written below that length after
  the fsync (never done by the log, which only appends and truncates) would survive;
- a file rewritten in place (the Raft journal, a memory-mapped file) is registered for
  copies: each fsync saves a copy of the whole file, and the cut puts the copy back;
- a file whose name no directory fsync made durable and whose data was never fsynced is
  deleted; one whose data was fsynced keeps its name (ext4 commits a new file's directory
  entry with the file's fsync);
- directories are kept (an empty one is what a new log directory looks like anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LedgerState:
    """What the ledger says is durable, by inode."""

    durable_bytes: dict[int, int] = field(default_factory=dict)  # regular files: durable length
    copied: set[int] = field(default_factory=set)  # files put back from a saved copy
    directories: dict[int, dict[str, int]] = field(default_factory=dict)  # durable names of each directory

    def apply(self, line: str) -> None:
        """Fold one ledger line in; a torn last line (the process died writing it) is ignored."""
        parts = line.rstrip("\n").split("\t")
        kind, args = parts[0], parts[1:]
        try:
            if kind == "S" and len(args) == 2:
                self.durable_bytes[int(args[0])] = int(args[1])
            elif kind == "C" and len(args) == 1:
                self.copied.add(int(args[0]))
            elif kind == "D" and len(args) % 2 == 1:
                self.directories[int(args[0])] = {args[i]: int(args[i + 1]) for i in range(1, len(args), 2)}
            elif kind == "T" and len(args) == 2:
                ino, size = int(args[0]), int(args[1])
                if ino in self.durable_bytes:
                    self.durable_bytes[ino] = min(self.durable_bytes[ino], size)
            elif kind == "U" and len(args) == 1:
                self.durable_bytes.pop(int(args[0]), None)
                self.copied.discard(int(args[0]))
        except ValueError:
            return  # torn line


def read_ledger(lines: list[str]) -> LedgerState:
    state = LedgerState()
    for line in lines:
        if line.strip():
            state.apply(line)
    return state


@dataclass(frozen=True)
class FileOnDisk:
    """A regular file found under the cut directory."""

    path: str
    parent_ino: int
    name: str
    ino: int
    size: int


@dataclass(frozen=True)
class Cut:
    """One action of a power-loss cut: ``delete`` the file, ``restore`` it from its saved copy,
    or truncate it to ``size``."""

    path: str
    action: str  # "delete" | "truncate" | "restore"
    size: int = 0
    ino: int = 0
    lost_bytes: int = 0


def plan_cut(state: LedgerState, files: list[FileOnDisk]) -> list[Cut]:
    """The cuts that leave each file as its last fsync made it (files already durable: none)."""
    cuts: list[Cut] = []
    for f in files:
        name_durable = state.directories.get(f.parent_ino, {}).get(f.name) == f.ino
        data_synced = f.ino in state.durable_bytes or f.ino in state.copied
        if not name_durable and not data_synced:
            cuts.append(Cut(f.path, "delete", lost_bytes=f.size))
        elif f.ino in state.copied:
            cuts.append(Cut(f.path, "restore", ino=f.ino))
        else:
            durable = min(state.durable_bytes.get(f.ino, 0), f.size)
            if durable < f.size:
                cuts.append(Cut(f.path, "truncate", size=durable, lost_bytes=f.size - durable))
    return cuts
