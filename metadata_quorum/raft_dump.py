"""pysyncobj's full dump (``raft.dump``, written at each log compaction) built in a worker
thread, in kraftlog's own format, and read in that format or pysyncobj's older one.

pysyncobj's own serializer pickles and gzips the dump on its one thread, which also answers
heartbeats and votes (``useFork=False``: forking a process that runs gRPC threads is unsafe):
about a quarter of a second at 100,000 partitions, which under load grew past the election
timeout (docs/operations.md, Controller sizing). Through ``SyncObjConf``'s ``serializer``,
``serializeChecker`` and ``deserializer`` hooks, the Raft thread now only

- takes the state at the index pysyncobj records for the dump (``serialize``): the image is
  persistent, so holding it is a point-in-time snapshot however many entries apply after;
- renames the finished file onto ``raft.dump`` (``check``, at a tick), and reports success,
  after which pysyncobj empties its journal up to that index. Rename and journal compaction
  happen in one tick of one thread, as with pysyncobj's own serializer: a dump whose writer
  finished after its node stopped is never renamed, so a dump never gets ahead of the journal
  it replaces.

A worker thread encodes the state, writes ``raft.dump.writing`` and, with a durable journal,
fsyncs it (and ``check`` the directory after the rename): the journal is emptied only behind a
dump a power failure cannot take back (docs/durability.md).

The format: ``DUMP_MAGIC``, then an lz4 frame of a pickle of ``{"state": ..., "raft": ...}``:
the state machine's state (its snapshot records, already protobuf bytes) and pysyncobj's own
part (the last two entries and the cluster's nodes). lz4 rather than gzip: 2 ms instead of
190 ms at 100,000 partitions, for a dump of 0.5 MB instead of 0.2 MB. A dump written before
(gzip of a pickle of pysyncobj's tuple) is read as well, so a controller upgraded in place
loads the dump it left, and a leader of the older version can still send one to this node.
"""

from __future__ import annotations

import gzip
import os
import pickle
import threading
import time
from pathlib import Path
from typing import Callable

import lz4.frame
import pysyncobj.pickle as pysyncobj_pickle
import structlog
from pysyncobj.config import SERIALIZER_STATE

from server_common.fsync import fsync_dir, fsync_file

log = structlog.get_logger("controller")

DUMP_MAGIC = b"kraftlog raft dump v2\n"
_GZIP_MAGIC = b"\x1f\x8b"

# The state machine's part of a dump: what ``MetadataStateMachine`` encodes and loads.
State = dict
# pysyncobj's part: (last applied entry, the one before it, the cluster's nodes).
RaftPart = tuple


class UnreadableDump(ValueError):
    """A dump in neither format: written by a newer kraftlog, or damaged."""


_WHAT_TO_DO = ("to bring this controller back, move its data directory aside and replace it with a new controller that catches up "
               "from the others (docs/operations.md, Replacing a controller); the file is left as it is")


def dump_bytes(state: State, raft: RaftPart) -> bytes:
    """The file's contents."""
    return DUMP_MAGIC + lz4.frame.compress(pickle.dumps({"state": state, "raft": raft}, protocol=pickle.HIGHEST_PROTOCOL))


def read_dump(path: Path) -> tuple[State, RaftPart]:
    """(state, raft part) of the dump at ``path``, in either format; raises UnreadableDump."""
    data = path.read_bytes()
    try:
        if data.startswith(DUMP_MAGIC):
            contents = pickle.loads(lz4.frame.decompress(data[len(DUMP_MAGIC):]))
            return contents["state"], tuple(contents["raft"])
        if data.startswith(_GZIP_MAGIC):  # pysyncobj's own: (consumers' data, entry, entry, nodes), consumers' data = [SyncObj's, ours]
            consumers, *raft = pysyncobj_pickle.loads(gzip.decompress(data))
            return consumers[1], tuple(raft)
    except Exception as bad:  # a truncated or damaged file: any of lz4, gzip or pickle may refuse it
        raise UnreadableDump(f"the controller's metadata dump {path} is damaged ({type(bad).__name__}: {bad}); {_WHAT_TO_DO}") from bad
    raise _unknown_format(path, data[:len(DUMP_MAGIC)])


def check_readable(path: Path) -> None:
    """Refuse, before pysyncobj starts, a dump it would fail to load: pysyncobj logs a failed
    load and goes on with an empty state machine. Checks the format only (the first bytes);
    raises UnreadableDump."""
    if not path.exists():
        return
    with path.open("rb") as f:
        head = f.read(len(DUMP_MAGIC))
    if not (head.startswith(DUMP_MAGIC) or head.startswith(_GZIP_MAGIC)):
        raise _unknown_format(path, head)


def _unknown_format(path: Path, head: bytes) -> UnreadableDump:
    return UnreadableDump(f"the controller's metadata dump {path} is in no format this version reads (it starts {head!r}): "
                          f"a newer kraftlog may have written it, so run that version, or {_WHAT_TO_DO}")


class DumpFile:
    """pysyncobj's serializer, serializeChecker and deserializer for one node's ``raft.dump``.

    ``capture`` runs on the Raft thread and returns how to encode the state as it was then;
    ``load`` installs a loaded state (on the Raft thread, as pysyncobj loads dumps there)."""

    def __init__(self, path: Path, capture: Callable[[], Callable[[], State]], load: Callable[[State], None], durable: bool) -> None:
        self._path = path
        self._writing = path.with_name(path.name + ".writing")
        self._capture = capture
        self._load = load
        self._durable = durable
        self._writer: threading.Thread | None = None
        self._written = False  # set by the writer before it ends
        self._loads = 0  # dumps loaded: one loaded while a dump was being written is newer than it
        self._loads_when_asked = 0

    def serialize(self, pysyncobj_tmp_file: str, raft: RaftPart) -> None:
        """Raft thread: take the state and start writing it. pysyncobj renames
        ``pysyncobj_tmp_file`` onto the dump as soon as this returns, expecting it written
        there; it is never written (and a stale one from pysyncobj's own serializer is
        removed), so that rename fails, which pysyncobj ignores: ``check`` decides."""
        encode = self._capture()
        Path(pysyncobj_tmp_file).unlink(missing_ok=True)
        self._written = False
        self._loads_when_asked = self._loads
        self._writer = threading.Thread(target=self._write, args=(encode, raft), name="raft-dump-writer", daemon=True)
        self._writer.start()

    def _write(self, encode: Callable[[], State], raft: RaftPart) -> None:
        started = time.monotonic()
        try:
            state = encode()
            data = dump_bytes(state, raft)
            self._writing.write_bytes(data)
            if self._durable:
                fsync_file(self._writing)
        except Exception:  # reported as FAILED: pysyncobj keeps its journal and compacts again later
            log.exception("writing the metadata dump failed; the journal is kept", path=str(self._path))
            return
        self._written = True
        log.info("metadata dump written", path=str(self._path), metadata_offset=state["offset"], raft_index=raft[0][1],
                 size_bytes=len(data), took_ms=round((time.monotonic() - started) * 1000, 1))

    def check(self) -> int:
        """Raft thread, every tick: pysyncobj's ``SERIALIZER_STATE`` of the dump in progress;
        SUCCESS (once) after renaming it into place."""
        writer = self._writer
        if writer is None:
            return SERIALIZER_STATE.NOT_SERIALIZING
        if writer.is_alive():
            return SERIALIZER_STATE.SERIALIZING
        self._writer = None
        if not self._written:
            return SERIALIZER_STATE.FAILED
        if self._loads != self._loads_when_asked:  # the leader sent a newer dump meanwhile, now in place: keep it
            log.info("metadata dump written while a newer one was loaded; dropping it", path=str(self._path))
            return SERIALIZER_STATE.FAILED
        try:
            os.replace(self._writing, self._path)
            if self._durable:
                fsync_dir(self._path.parent)
        except OSError:
            log.exception("renaming the metadata dump into place failed; the journal is kept", path=str(self._path))
            return SERIALIZER_STATE.FAILED
        return SERIALIZER_STATE.SUCCESS

    def deserialize(self, file_name: str) -> RaftPart:
        """Raft thread: load the dump (either format) into the state machine; pysyncobj's part."""
        started = time.monotonic()
        try:
            state, raft = read_dump(Path(file_name))
        except UnreadableDump as unreadable:  # pysyncobj logs it too, and goes on without the state
            log.critical("metadata dump unreadable", error=str(unreadable))
            raise
        self._load(state)
        self._loads += 1
        log.info("metadata dump loaded", path=file_name, metadata_offset=state["offset"], raft_index=raft[0][1],
                 took_ms=round((time.monotonic() - started) * 1000, 1))
        return raft
