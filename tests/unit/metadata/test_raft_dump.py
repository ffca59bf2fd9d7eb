"""pysyncobj's full dump written off the Raft thread (metadata_quorum/raft_dump.py), on
quorums in this process (loopback, no other processes): the dump is the state at the index
pysyncobj records even while entries keep committing, a dump in pysyncobj's older format
still loads, one in no known format is refused before pysyncobj starts, and a voter whose
load outlasts the election timeout does not depose the leader."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.serializer import Serializer

from metadata_quorum import records as r
from metadata_quorum.delta import apply_all
from metadata_quorum.endpoints import Voter
from metadata_quorum.image import MetadataImage, image_to_records
from metadata_quorum.raft_dump import DUMP_MAGIC, DumpFile, UnreadableDump, dump_bytes, read_dump
from metadata_quorum.raft_node import ControllerRaftNode, MetadataStateMachine
from metadata_quorum.snapshot_records import SnapshotEncoder
from server_common.waiting import async_wait_for, wait_for
from tests.unit.metadata.test_raft_node import _started as leader_started, _voter


async def _started(voter: Voter, data_dir: Path) -> ControllerRaftNode:
    node = await leader_started(voter, data_dir)
    await async_wait_for(lambda: node.caught_up, 10, "a single voter to catch up")
    return node


async def _compacted(node: ControllerRaftNode, dump: Path) -> None:
    """Force a log compaction and wait until its dump is in place."""
    before = dump.stat().st_mtime_ns if dump.exists() else None
    node._syncobj.forceLogCompaction()
    await async_wait_for(lambda: dump.exists() and dump.stat().st_mtime_ns != before, 10, "the dump to be written")


def test_the_dump_is_the_state_at_its_index_while_entries_keep_committing(tmp_path: Path, monkeypatch) -> None:
    """Config changes commit one after another while the dump is written in its worker thread:
    the dump holds exactly the image at the offset it names (the records committed so far,
    replayed), and a restart from it plus the journal after it reaches the very image the
    node had (each change moves the offset, so an entry replayed twice or lost would show).
    The writer waits for ten more entries to commit before it encodes, so a dump that read the
    state when written rather than when asked for would hold a later image than its index.
    Also: the snapshot records are encoded in the dump's writer thread, not on the Raft thread."""
    voter, dump = _voter(), tmp_path / "raft.dump"
    encoding_threads: set[str] = set()
    records = SnapshotEncoder.records
    monkeypatch.setattr(SnapshotEncoder, "records", lambda self, image: encoding_threads.add(threading.current_thread().name) or records(self, image))
    write = DumpFile._write

    def write_later(self: DumpFile, encode, raft) -> None:
        state_machine = self._capture.__self__
        asked_at = state_machine.image.offset
        wait_for(lambda: state_machine.image.offset >= asked_at + 10, 10, "ten more entries to commit while the dump is written")
        write(self, encode, raft)

    monkeypatch.setattr(DumpFile, "_write", write_later)

    async def scenario() -> None:
        node = await _started(voter, tmp_path)
        await node.propose([r.TopicRecord("a", "ida"), r.PartitionRecord("ida", 0, (1,), (1,), 1, 0, 0)])
        stop = asyncio.Event()

        async def keep_committing() -> None:
            i = 0
            while not stop.is_set():
                i += 1
                assert (await node.propose([r.ConfigRecord("a", "retention.ms", str(i))])).error_code == 0

        writer = asyncio.ensure_future(keep_committing())
        await async_wait_for(lambda: node.image.offset > 20, 10, "changes to commit")
        await _compacted(node, dump)
        await async_wait_for(lambda: node.image.offset > read_dump(dump)[0]["offset"] + 20, 10, "changes to commit after the dump")
        stop.set()
        await writer
        expected = node.image
        _, history = node.read_since(1)
        node.destroy()

        state, raft = read_dump(dump)
        at_dump = apply_all(MetadataImage.empty("c"), [record for offset, record in history if offset <= state["offset"]])
        assert state["offset"] < expected.offset and at_dump.offset == state["offset"]
        assert state["records"] == [r.encode(record) for record in image_to_records(at_dump)]

        restarted = await _started(voter, tmp_path)
        await async_wait_for(lambda: restarted.image == expected, 10, f"the restarted node to reach offset {expected.offset}")
        restarted.destroy()

    asyncio.run(scenario())
    assert encoding_threads == {"raft-dump-writer"}


def test_a_dump_in_pysyncobjs_own_format_still_loads(tmp_path: Path) -> None:
    """A controller upgraded in place finds the dump the previous version left: pysyncobj's
    own serializer's gzip of a pickle (written here by that very code, ``Serializer``)."""
    voter, dump = _voter(), tmp_path / "raft.dump"

    async def scenario() -> None:
        node = await _started(voter, tmp_path)
        await node.propose([r.TopicRecord("a", "ida")])
        for i in range(5):  # entries the compaction removes from the journal: only the dump has them
            await node.propose([r.ConfigRecord("a", "retention.ms", str(i))])
        await _compacted(node, dump)
        await node.propose([r.TopicRecord("b", "idb")])
        expected = node.image
        node.destroy()

        state, raft = read_dump(dump)
        Serializer(str(dump), 2**16, False, None, None, None).serialize(([{"_SyncObj__enabledCodeVersion": 0}, state], *raft), raft[1][1])
        assert not dump.read_bytes().startswith(DUMP_MAGIC)
        restarted = await _started(voter, tmp_path)
        await async_wait_for(lambda: restarted.image == expected, 10, f"the restarted node to reach {expected}")
        restarted.destroy()

    asyncio.run(scenario())


def test_a_dump_in_no_known_format_is_refused_before_raft_starts_and_kept(tmp_path: Path) -> None:
    dump = tmp_path / "raft.dump"
    dump.write_bytes(b"kraftlog raft dump v9\n" + bytes(100))

    async def scenario() -> None:
        with pytest.raises(UnreadableDump, match="no format this version reads.*Replacing a controller"):
            ControllerRaftNode(_voter(), [], tmp_path, "c", None, asyncio.get_running_loop())

    asyncio.run(scenario())
    assert dump.read_bytes() == b"kraftlog raft dump v9\n" + bytes(100)


def test_a_damaged_dump_says_so(tmp_path: Path) -> None:
    dump = tmp_path / "raft.dump"
    dump.write_bytes(DUMP_MAGIC + b"not an lz4 frame")
    with pytest.raises(UnreadableDump, match="is damaged.*Replacing a controller"):
        read_dump(dump)


def test_a_voter_that_restarts_from_a_slow_dump_load_does_not_depose_the_leader(tmp_path: Path, monkeypatch) -> None:
    """Three voters in this process. A follower restarts from its dump, and the load takes
    longer than the election timeout (as 100,000 partitions do; here the load is slowed by
    1.2 s): it must hear from the leader rather than start an election at once, whose higher
    term would depose the leader. The term stays the same throughout."""
    voters = [Voter(i, "127.0.0.1", _voter().raft_port, i) for i in (1, 2, 3)]

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        nodes = {v.node_id: ControllerRaftNode(v, voters, tmp_path / str(v.node_id), "c", None, loop) for v in voters}
        await async_wait_for(lambda: all(n.caught_up for n in nodes.values()) and any(n.is_leader() for n in nodes.values()), 20,
                             "three voters to elect a leader and catch up")
        leader = next(n for n in nodes.values() if n.is_leader())
        follower = next(n for n in nodes.values() if n is not leader)
        await leader.propose([r.TopicRecord("a", "ida")])
        await async_wait_for(lambda: follower.image.offset == leader.image.offset, 10, "the follower to apply the topic")
        await _compacted(follower, tmp_path / str(follower.voter.node_id) / "raft.dump")
        follower.destroy()

        load = MetadataStateMachine.load_dump
        monkeypatch.setattr(MetadataStateMachine, "load_dump", lambda self, data: load(self, data) or time.sleep(1.2))  # a slow load, not a wait
        term = leader.term()
        restarted = ControllerRaftNode(follower.voter, voters, tmp_path / str(follower.voter.node_id), "c", None, loop)
        await async_wait_for(lambda: restarted.caught_up, 20, "the restarted follower to load its dump and catch up")
        await leader.propose([r.TopicRecord("b", "idb")])
        assert leader.is_leader() and leader.term() == term and restarted.term() == term
        for node in (restarted, *(n for n in nodes.values() if n is not follower)):
            node.destroy()

    asyncio.run(scenario())


def test_a_dump_written_while_a_newer_one_was_loaded_is_dropped(tmp_path: Path) -> None:
    """A follower compacting its log when the leader sends it a dump: the leader's, newer, is
    loaded and put in place while the follower's own is still being written; renaming the
    older one over it afterwards would put the file behind the journal pysyncobj kept."""
    path = tmp_path / "raft.dump"
    release, loaded = threading.Event(), []

    def capture():
        def encode() -> dict:
            release.wait(10)
            return {"offset": 5}
        return encode

    dump = DumpFile(path, capture, loaded.append, durable=False)
    dump.serialize(str(tmp_path / "raft.dump.tmp"), ((b"", 6, 1), (b"", 5, 1), set()))
    assert dump.check() == SERIALIZER_STATE.SERIALIZING
    newer = dump_bytes({"offset": 9}, ((b"", 10, 2), (b"", 9, 2), set()))
    path.write_bytes(newer)  # as pysyncobj puts a received dump in place before loading it
    assert dump.deserialize(str(path))[0] == (b"", 10, 2) and loaded == [{"offset": 9}]
    release.set()
    wait_for(lambda: dump.check() != SERIALIZER_STATE.SERIALIZING, 10, "the writer to finish")
    assert path.read_bytes() == newer
    assert dump.check() == SERIALIZER_STATE.NOT_SERIALIZING
