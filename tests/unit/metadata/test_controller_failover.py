"""What makes a controller failover fast: one follower elects at once when the leader's Raft
connection closes (only one, so that they do not split the vote), and a client moves to the
next controller at once when the one it used goes away."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pysyncobj.monotonic import monotonic as raft_clock

from metadata_quorum.controller_router import BACKOFF_S_MIN, ControllerRouter
from metadata_quorum.endpoints import Voter
from metadata_quorum.raft_node import RAFT_ELECTION_TIMEOUT_MAX_S, RAFT_ELECTION_TIMEOUT_MIN_S, ControllerRaftNode, elects_at_once_after_leader_loss

VOTERS = [Voter(i, "127.0.0.1", 9000 + i, 9100 + i) for i in (1, 2, 3)]


def test_only_the_lowest_id_among_connected_followers_elects_at_once():
    assert elects_at_once_after_leader_loss(1, [3])
    assert not elects_at_once_after_leader_loss(3, [1])
    assert elects_at_once_after_leader_loss(3, [])  # follower 1 is down or cut off too: 3 goes
    assert elects_at_once_after_leader_loss(2, [3, 4, 5]) and not elects_at_once_after_leader_loss(4, [2, 3, 5])


class _FakeSyncObj:
    """What the leader-loss hook reads and writes of pysyncobj's SyncObj."""

    def __init__(self, leader: str, deadline: float, connected: tuple[str, ...] = ()) -> None:
        self._leader = SimpleNamespace(id=leader)
        self._SyncObj__raftElectionDeadline = deadline
        self.raftCurrentTerm = 4
        self.otherNodes = [self._leader, *(SimpleNamespace(id=v.raft_address) for v in VOTERS if v.raft_address != leader)]
        self._connected = set(connected)

    def isNodeConnected(self, node) -> bool:
        return node.id in self._connected

    def _isLeader(self) -> bool:
        return False

    def _getLeader(self):
        return self._leader


def _lose(peer: str, node_id: int = 1, leader: str = VOTERS[1].raft_address, removed: bool = False) -> _FakeSyncObj:
    """Follower ``node_id``, connected to every other follower, loses its connection to ``peer``."""
    fake = _FakeSyncObj(leader, raft_clock() + RAFT_ELECTION_TIMEOUT_MIN_S, tuple(v.raft_address for v in VOTERS if v.raft_address != leader))
    node = SimpleNamespace(_syncobj=fake, voters=VOTERS, voter=VOTERS[node_id - 1], removed=removed)
    ControllerRaftNode._on_peer_disconnected(node, fake._leader if peer == leader else SimpleNamespace(id=peer))
    return fake


def _deadline_in(fake: _FakeSyncObj) -> float:
    return fake._SyncObj__raftElectionDeadline - raft_clock()


def test_losing_the_leader_elects_at_once_on_pysyncobjs_clock():
    # pysyncobj's clock is not time.monotonic: a deadline on the wrong clock is off by the difference
    assert _deadline_in(_lose(VOTERS[1].raft_address)) == pytest.approx(0, abs=0.02)


def test_the_other_followers_and_a_removed_one_keep_their_timeouts_as_does_losing_a_follower():
    assert _deadline_in(_lose(VOTERS[1].raft_address, node_id=3)) == pytest.approx(RAFT_ELECTION_TIMEOUT_MIN_S, abs=0.02)
    assert _deadline_in(_lose(VOTERS[1].raft_address, removed=True)) == pytest.approx(RAFT_ELECTION_TIMEOUT_MIN_S, abs=0.02)
    assert _deadline_in(_lose(VOTERS[2].raft_address)) == pytest.approx(RAFT_ELECTION_TIMEOUT_MIN_S, abs=0.02)


def test_the_client_tries_the_next_controller_at_once_then_backs_off():
    router = ControllerRouter([(v.node_id, v.host, v.grpc_port) for v in VOTERS])
    assert router.on_unreachable() == 0.0
    assert router.on_unreachable() == BACKOFF_S_MIN
    assert router.on_unreachable() == 2 * BACKOFF_S_MIN
    router.on_success()
    assert router.on_unreachable() == 0.0



def test_a_node_that_loaded_a_dump_waits_a_full_election_timeout_for_the_leader():
    """Loading a 100,000-partition dump takes longer than the election timeout, on the thread
    that would have read the leader's heartbeats: the deadline it finds past afterwards must not
    make it start an election (its higher term would depose a healthy leader)."""
    fake = _FakeSyncObj(VOTERS[1].raft_address, raft_clock() - 1.0)
    loaded: list[dict] = []
    node = SimpleNamespace(state_machine=SimpleNamespace(load_dump=loaded.append, _syncObj=fake))
    ControllerRaftNode._load_dump(node, {"offset": 7})
    assert loaded == [{"offset": 7}]
    assert RAFT_ELECTION_TIMEOUT_MIN_S - 0.02 <= _deadline_in(fake) <= RAFT_ELECTION_TIMEOUT_MAX_S
