"""The Raft shell on a single-voter quorum (loopback, no other processes): entries apply all
or nothing, rejections reach the proposer, the stream ring serves deltas, and the image
survives a restart from the journal and from pysyncobj's full dump after log compaction."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from metadata_quorum import records as r
from metadata_quorum.endpoints import Voter
from metadata_quorum.raft_node import ControllerRaftNode, has_caught_up
from kraftlog_proto import common_pb2 as common
from server_common.waiting import async_wait_for


def _voter() -> Voter:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Voter(1, "127.0.0.1", port, 1)


async def _started(voter: Voter, data_dir: Path) -> ControllerRaftNode:
    node = ControllerRaftNode(voter, [voter], data_dir, "c", None, asyncio.get_running_loop())
    await async_wait_for(node.is_leader, 10, "a single voter to become leader")
    return node


def test_entries_rejections_ring_and_restart(tmp_path: Path):
    voter = _voter()

    async def scenario() -> None:
        node = await _started(voter, tmp_path)
        await async_wait_for(lambda: node.caught_up, 5, "a single voter to catch up with its own no-op")
        ok = await node.propose([r.TopicRecord("a", "ida"), r.PartitionRecord("ida", 0, (1,), (1,), 1, 0, 0)])
        assert (ok.error_code, ok.first_offset) == (common.NONE, 1)
        rejected = await node.propose([r.ConfigRecord("a", "retention.ms", "1"), r.TopicRecord("a", "dup")])
        assert rejected.error_code == common.TOPIC_ALREADY_EXISTS and "already exists" in rejected.error_message
        assert node.image.offset == 2 and "a" not in node.image.configs
        image, recent = node.read_since(2)
        assert [offset for offset, _ in recent] == [2]
        node._syncobj.forceLogCompaction()
        await node.propose([r.TopicRecord("b", "idb")])
        await async_wait_for((tmp_path / "raft.dump").exists, 5, "pysyncobj to write its full dump")
        await node.propose([r.ConfigRecord("b", "retention.ms", "7")])
        expected = node.image
        node.destroy()

        restarted = await _started(voter, tmp_path)
        await async_wait_for(lambda: restarted.image == expected, 5, f"the restarted node to reach {expected}")
        # restarted from the full dump and a journal that starts after it: it still catches up
        await async_wait_for(lambda: restarted.caught_up, 5, "the restarted node to catch up")
        _, recent = restarted.read_since(1)
        assert recent is None  # history before the dump is gone: a stream from 1 gets a snapshot
        restarted.destroy()

    asyncio.run(scenario())


def test_caught_up_only_at_a_leaders_commit_index_of_the_current_term():
    """The power-loss case: the commit index a node (or a new leader) loaded is 1, an entry of
    term 0, while the node is in term 2 and the no-op of term 2 is at 9."""
    terms = {1: 0, 2: 1, 8: 1, 9: 2}
    assert not has_caught_up(None, 9, 2, terms.get)  # no leader's commit index heard yet
    assert not has_caught_up(1, 1, 2, terms.get)  # the loaded index: an older term's entry
    assert not has_caught_up(8, 8, 2, terms.get)  # committed in term 1; term 2's no-op not yet
    assert not has_caught_up(9, 8, 2, terms.get)  # heard, not yet applied
    assert has_caught_up(9, 9, 2, terms.get)
    assert has_caught_up(9, 12, 2, terms.get)  # applied past it meanwhile
    assert not has_caught_up(12, 12, 2, terms.get)  # an index its journal does not hold
