"""Injected I/O errors, for testing disk faults on one broker (the chaos ``disk-io-error``
scenario and the integration tests): a broker started with ``--storage-fault-injection``
fails an append or a segment roll with EIO while the file ``inject-io-error`` in its data
directory names that operation (``append``, ``roll`` or ``all``, whitespace separated).

Off by default: ``check`` costs nothing until ``enable`` is called once at start. A real full
disk needs no hook (a size-limited tmpfs as the data directory gives a real ENOSPC); an I/O
error cannot be made that simply without a device-mapper error target, so this is the one
place the storage layer pretends. The error takes the same path as a real one
(``PartitionLog._io_guard``: the partition goes offline on this broker), and while the file
names any operation the probe write of a reopen fails too (``LogManager.reopen``: the
replica stays offline until the file is gone). ``fill_disk`` is
the full-disk fault's one step.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

TRIGGER_FILE = "inject-io-error"
OPERATIONS = ("append", "roll")

_trigger: Path | None = None


def enable(data_dir: Path) -> None:
    """Watch ``data_dir``/inject-io-error from now on (once, at broker start)."""
    global _trigger
    _trigger = Path(data_dir) / TRIGGER_FILE


def check(operation: str) -> None:
    """Raise EIO if the trigger file names ``operation`` (or ``all``)."""
    assert operation in OPERATIONS, operation
    if _trigger is None:
        return
    try:
        wanted = _trigger.read_text().split()
    except FileNotFoundError:
        return
    if operation in wanted or "all" in wanted:
        raise OSError(errno.EIO, f"injected I/O error during {operation} ({_trigger} names it)")


FILLER_FILE = "disk-full-filler"


def fill_disk(directory: Path) -> Path:
    """Write ``directory``/disk-full-filler until its filesystem is full (a real ENOSPC, for
    the ``disk-full`` fault on a size-limited tmpfs); returns the file, which frees the
    space when deleted."""
    filler = Path(directory) / FILLER_FILE
    chunk = b"\0" * (1 << 20)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return filler
