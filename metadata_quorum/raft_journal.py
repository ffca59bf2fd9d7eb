"""The Raft journal made durable: pysyncobj's file journal, fsynced before this node says
anything that relies on it (docs/durability.md, "The metadata quorum").

pysyncobj writes its journal through a memory map and never flushes it, and stores the
current term and vote with a rename but no fsync, so a power failure of every controller
could take committed metadata (a kill -9 cannot: the page cache survives it). Raft's rule is
to persist before relying on it: a follower acknowledges entries, a leader counts its own copy
towards the commit, and a candidate asks for votes, only once they are durable.

Here the journal notes that it changed (``add``, ``deleteEntriesFrom``, ``clear``) and the
node's transport (``SyncingTransport``) fsyncs it around each message, once for everything
changed since the last fsync: the fsyncs are batched by pysyncobj's own rhythm (one per append
round, however many entries it carries), not one per entry. Every message but the leader's
``append_entries`` waits for the fsync. The leader's entries go to the first follower first and
are fsynced right after, on the same thread, so the follower's fsync runs at the same time as
the leader's (Raft allows it: Ongaro's thesis, 10.2.1) and a commit waits for one fsync instead
of two in a row; pysyncobj works out commits only at its next tick, after that fsync, so the
leader's own copy still counts only once durable. An entry a follower holds that the leader
lost in a power failure was never committed, and Raft settles it as any uncommitted entry. The term and
vote are fsynced when stored (rare: elections only).

pysyncobj's full dump (``fullDumpFile``, written at log compaction, which then empties the
journal) is written by ``raft_dump.py``, which fsyncs it and its rename before the journal is
emptied behind it when the journal is durable. A single-voter quorum commits without
sending, so its entries are fsynced at the next message at the latest.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pysyncobj.syncobj as pysyncobj_module
from pysyncobj.journal import FileJournal
from pysyncobj.transport import TCPTransport

from server_common import power_loss
from server_common.fsync import fsync_dir, fsync_file


class DurableJournal(FileJournal):
    """pysyncobj's journal plus ``sync``: fsync what changed since the last call."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path
        self.meta_path = Path(str(path) + ".meta")
        self.syncs = 0
        self._dirty = False
        self._lock = threading.Lock()
        fsync_file(path)  # a new journal: its header and its name, before anything refers to it
        fsync_dir(path.parent)
        power_loss.track_in_place(path)  # rewritten in place (the header's last-record offset)

    def add(self, command, idx, term) -> None:
        super().add(command, idx, term)
        self._dirty = True

    def clear(self) -> None:
        super().clear()
        self._dirty = True

    def deleteEntriesFrom(self, entryFrom) -> None:
        super().deleteEntriesFrom(entryFrom)
        self._dirty = True

    def setCurrentTerm(self, term, votedForNodeId) -> None:
        """Raft needs the term and vote durable before the vote request or grant goes out."""
        super().setCurrentTerm(term, votedForNodeId)
        fsync_file(self.meta_path)
        fsync_dir(self.meta_path.parent)

    def sync(self) -> None:
        """fsync the journal if it changed since the last sync (runs on pysyncobj's thread)."""
        if not self._dirty:
            return
        with self._lock:
            self._dirty = False
            fsync_file(self.path)  # any descriptor: fsync writes back the file's pages, the mapped ones too
            self.syncs += 1


def syncing_transport(journal_of: Callable[[], DurableJournal | None]) -> type[TCPTransport]:
    """A TCPTransport class whose ``send`` syncs the journal ``journal_of()`` returns (None
    until pysyncobj has created it): after sending a leader's ``append_entries``, before sending
    anything else (see the module's docstring)."""

    class SyncingTransport(TCPTransport):
        def send(self, node, message):
            journal = journal_of()
            if journal is None:
                return super().send(node, message)
            if isinstance(message, dict) and message.get("type") == "append_entries":
                sent = super().send(node, message)
                journal.sync()
                return sent
            journal.sync()
            return super().send(node, message)

    return SyncingTransport


_construction = threading.Lock()


@contextlib.contextmanager
def journals_created_as(factory: Callable[[str], object]) -> Iterator[None]:
    """While in the block, pysyncobj creates its journal with ``factory`` (SyncObj builds it
    inside its constructor and takes no journal argument)."""
    with _construction:
        original = pysyncobj_module.createJournal
        pysyncobj_module.createJournal = factory
        try:
            yield
        finally:
            pysyncobj_module.createJournal = original
