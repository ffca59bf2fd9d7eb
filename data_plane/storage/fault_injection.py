"""Injected I/O errors, for testing disk faults on one broker (the chaos ``disk-io-error``
scenario and the integration tests): a broker started with ``--storage-fault-injection``
fails an append or a segment roll with EIO while the file ``inject-io-error`` in its data
directory names that operation (``append``, ``roll`` or ``all``, whitespace separated).

Off by default: ``check`` costs nothing until ``enable`` is called once at start. A real full
disk needs no hook (a size-limited tmpfs as the data directory gives a real ENOSPC); an I/O
error cannot be made that simply without a device-mapper error target, so this is the one
place the storage layer pretends. The error takes the same path as a real one
(``PartitionLog._io_guard``: the partition goes offline on this broker).
"""

from __future__ import annotations

import errno
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
