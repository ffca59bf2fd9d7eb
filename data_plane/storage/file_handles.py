"""The process's cache of open segment files: opened when used, closed when idle.

The open-file limit belongs to the process, so the budget does too: one cache
(``HANDLES``) serves every log of the broker, sized by ``configure`` from RLIMIT_NOFILE
(``handle_budget.handle_budget``) and at first from the limit at import. Which handle to
close is ``handle_budget.LruPolicy``'s decision; this module opens and closes.

An owner (a ``LogSegment``) asks ``open`` for a descriptor and names itself on each use
(``use``: a dict move, no syscall); when the cache must make room it calls the least
recently used owner's ``close_handle``, and that owner reopens on its next use. Owners
therefore never keep a descriptor across a call that may open another file.

Files opened, written and closed at once (checkpoints, index files, the cleaner's reads, a
group-commit round's duplicated descriptors) are not in the cache: they come out of the
reserve the budget leaves under the limit.
"""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path
from typing import Protocol

import structlog

from data_plane.storage.handle_budget import LruPolicy, handle_budget

log = structlog.get_logger("storage")


class HandleOwner(Protocol):
    def close_handle(self) -> None:
        """Close the descriptor now (the cache already forgot it); reopen on the next use."""


class FileHandleCache:
    def __init__(self, capacity: int) -> None:
        self._policy: LruPolicy[HandleOwner] = LruPolicy(capacity)

    @property
    def capacity(self) -> int:
        return self._policy.capacity

    @property
    def open_count(self) -> int:
        return len(self._policy)

    def configure(self, capacity: int) -> None:
        """Set the budget (a broker at start, from its raised limit); closes handles over it."""
        self._close(self._policy.resize(capacity))

    def use(self, owner: HandleOwner) -> None:
        self._policy.use(owner)

    def open(self, owner: HandleOwner, path: Path, flags: int) -> int:
        """A descriptor for ``owner`` (closing the least recently used others first, to stay in the
        budget). If the process is out of descriptors anyway (sockets took more than the reserve),
        a quarter of the cache is given back for good and the open tried once more."""
        self._close(self._policy.admit(owner))
        try:
            try:
                return os.open(path, flags, 0o644)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or len(self._policy) <= 1:
                    raise
                smaller = len(self._policy) * 3 // 4
                log.warning("out of file descriptors below the handle budget: shrinking it", path=str(path),
                            budget=self._policy.capacity, new_budget=smaller, open_handles=len(self._policy))
                self._close(self._policy.resize(smaller))
                return os.open(path, flags, 0o644)
        except BaseException:
            self._policy.forget(owner)
            raise

    def closed(self, owner: HandleOwner) -> None:
        """``owner`` closed its descriptor itself (released, deleted)."""
        self._policy.forget(owner)

    @staticmethod
    def _close(owners: list[HandleOwner]) -> None:
        for owner in owners:
            owner.close_handle()


def open_file_limit() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE of this process."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


HANDLES = FileHandleCache(handle_budget(open_file_limit()[0]))
