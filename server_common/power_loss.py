"""The power-loss test mode of the storage layer: a process started with it (``--power-loss-ledger``,
set only by the chaos harness and tests) records what each fsync made durable, and after the
process is killed ``cut`` brings its data directory back to exactly that, as a power failure
would (Jepsen's LazyFS does the same below a real filesystem). The pure half, the ledger's
meaning and the cut plan, is ``server_common/sync_ledger.py``.

``install`` wraps the ``os`` calls that decide what survives a power failure (``fsync``,
``fdatasync``, ``truncate``, ``ftruncate``, ``unlink``, ``remove``, ``replace``, ``rename``)
so that every caller in the process, the broker's logs and checkpoints and the controller's
Raft journal alike, is recorded without knowing about it. Each wrapped call appends one line
to ``<dir>/power-loss.ledger`` (one ``write`` on an O_APPEND descriptor, no fsync: the ledger
must survive only a kill -9, which keeps the page cache). Never enabled in production: the
wrappers cost a write per fsync.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path

from server_common.sync_ledger import Cut, FileOnDisk, plan_cut, read_ledger

LEDGER_NAME = "power-loss.ledger"
COPIES_DIR = "power-loss.copies"  # saved copies of files rewritten in place (see track_in_place)
FLAG = "--power-loss-ledger"
FLAG_HELP = ("testing only: record what each fsync made durable, so that the chaos harness can cut the data "
             "directory back to it after a kill (a simulated power failure); costs a write per fsync")

_real = {name: getattr(os, name) for name in ("fsync", "fdatasync", "truncate", "ftruncate", "unlink", "remove", "replace", "rename")}


class _Ledger:
    """The process's ledger: where lines go, and which inodes are saved whole at each fsync."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.copies = directory / COPIES_DIR
        self.copies.mkdir(exist_ok=True)
        path = directory / LEDGER_NAME
        new = not path.exists()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.lock = threading.Lock()
        self.in_place: set[int] = set()
        if new:  # whatever is there before the first process ran counts as durable
            self.write(baseline_lines(directory))

    def write(self, lines: list[str]) -> None:
        if lines:
            with self.lock:
                os.write(self.fd, "".join(line + "\n" for line in lines).encode())

    def synced(self, fd) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self.write([_directory_line(st.st_ino, os.scandir(fd))])
        elif st.st_ino in self.in_place:
            self.save_copy(f"/proc/self/fd/{fd}", st.st_ino)
        else:
            self.write([f"S\t{st.st_ino}\t{st.st_size}"])

    def save_copy(self, path: str, ino: int) -> None:
        """The file's whole content is durable now: keep a copy for the cut to put back."""
        with self.lock:
            tmp = self.copies / f"{ino}.tmp"
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            _real["rename"](tmp, self.copies / str(ino))  # the copy is the harness's, not a ledger event
            os.write(self.fd, f"C\t{ino}\n".encode())

    def unlinked(self, path, dir_fd: int | None) -> None:
        try:
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            self.write([f"U\t{st.st_ino}"])


_ledger: _Ledger | None = None


def install(directory: Path) -> None:
    """Record every fsync, truncation and unlink of this process in ``directory``'s ledger."""
    global _ledger
    assert _ledger is None, "installed twice"
    directory.mkdir(parents=True, exist_ok=True)
    ledger = _ledger = _Ledger(directory)

    def fsync(fd: int) -> None:
        _real["fsync"](fd)
        ledger.synced(fd)

    def fdatasync(fd: int) -> None:
        _real["fdatasync"](fd)
        ledger.synced(fd)

    def ftruncate(fd: int, length: int) -> None:
        _real["ftruncate"](fd, length)
        ledger.write([f"T\t{os.fstat(fd).st_ino}\t{length}"])

    def truncate(path, length: int) -> None:
        _real["truncate"](path, length)
        ledger.write([f"T\t{os.stat(path).st_ino}\t{length}"])

    def unlink(path, *, dir_fd: int | None = None) -> None:
        ledger.unlinked(path, dir_fd)
        _real["unlink"](path, dir_fd=dir_fd)

    def remove(path, *, dir_fd: int | None = None) -> None:
        ledger.unlinked(path, dir_fd)
        _real["remove"](path, dir_fd=dir_fd)

    def replace(src, dst, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        ledger.unlinked(dst, dst_dir_fd)
        _real["replace"](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def rename(src, dst, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        ledger.unlinked(dst, dst_dir_fd)
        _real["rename"](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    for wrapper in (fsync, fdatasync, ftruncate, truncate, unlink, remove, replace, rename):
        setattr(os, wrapper.__name__, wrapper)


def track_in_place(path: Path) -> None:
    """``path`` is rewritten in place (not only appended to): each fsync saves a copy of it, and
    a cut puts the copy back. A no-op unless the mode is installed."""
    if _ledger is None:
        return
    ino = os.stat(path).st_ino
    _ledger.in_place.add(ino)
    if not (_ledger.copies / str(ino)).exists():  # first seen (or after a cut): what is there now is durable
        _ledger.save_copy(str(path), ino)


def baseline_lines(directory: Path) -> list[str]:
    """Ledger lines saying that everything under ``directory`` now is durable."""
    lines = []
    for root, _dirs, _files in os.walk(directory):
        if Path(root).name == COPIES_DIR:
            continue
        with os.scandir(root) as entries:
            listed = list(entries)
        lines.append(_directory_line(os.stat(root).st_ino, listed))
        for entry in listed:
            if entry.is_file(follow_symlinks=False) and entry.name != LEDGER_NAME:
                lines.append(f"S\t{entry.inode()}\t{entry.stat(follow_symlinks=False).st_size}")
    return lines


def _directory_line(ino: int, entries) -> str:
    return "\t".join(["D", str(ino), *(f"{e.name}\t{e.inode()}" for e in entries)])


def plan(directory: Path) -> list[Cut]:
    """After the process that wrote ``directory``'s ledger was killed: what a power failure
    would take (every write since its last fsync). Nothing is changed yet (see ``apply``)."""
    ledger_path = directory / LEDGER_NAME
    state = read_ledger(ledger_path.read_text().splitlines() if ledger_path.exists() else [])
    files = []
    for root, _dirs, names in os.walk(directory):
        if Path(root).name == COPIES_DIR:
            continue
        parent = os.stat(root).st_ino
        for name in names:
            path = os.path.join(root, name)
            st = os.stat(path, follow_symlinks=False)
            if name != LEDGER_NAME and stat.S_ISREG(st.st_mode):
                files.append(FileOnDisk(path, parent, name, st.st_ino, st.st_size))
    return plan_cut(state, files)


def apply(directory: Path, cuts: list[Cut]) -> None:
    """Carry out ``plan``'s cuts, then start the ledger over with what is left (all of it
    durable now, as after a reboot)."""
    for c in cuts:
        if c.action == "delete":
            _real["unlink"](c.path)
        elif c.action == "restore":
            shutil.copyfile(directory / COPIES_DIR / str(c.ino), c.path)
        else:
            _real["truncate"](c.path, c.size)
    shutil.rmtree(directory / COPIES_DIR, ignore_errors=True)
    (directory / COPIES_DIR).mkdir()
    ledger_path = directory / LEDGER_NAME
    tmp = ledger_path.with_name(LEDGER_NAME + ".new")
    tmp.write_text("".join(line + "\n" for line in baseline_lines(directory)))
    _real["replace"](tmp, ledger_path)
