"""What makes a controller failover fast: followers elect early once the leader's Raft
connection closes (staggered so that they do not split the vote), and a client moves to the
next controller at once when the one it used goes away."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pysyncobj.monotonic import monotonic as raft_clock

from metadata_quorum.controller_router import BACKOFF_S_MIN, ControllerRouter
from metadata_quorum.endpoints import Voter
from metadata_quorum.raft_node import LEADER_LOSS_ELECTION_STAGGER_S, RAFT_ELECTION_TIMEOUT_MIN_S, ControllerRaftNode, election_delay_after_leader_loss

VOTERS = [Voter(i, "127.0.0.1", 9000 + i, 9100 + i) for i in (1, 2, 3)]


def test_survivors_elect_one_after_another_in_id_order():
    assert election_delay_after_leader_loss(1, [1, 2, 3], leader_id=2) == 0.0
    assert election_delay_after_leader_loss(3, [1, 2, 3], leader_id=2) == LEADER_LOSS_ELECTION_STAGGER_S
    assert election_delay_after_leader_loss(2, [1, 2, 3, 4, 5], leader_id=1) == 0.0
    assert election_delay_after_leader_loss(5, [1, 2, 3, 4, 5], leader_id=1) == 3 * LEADER_LOSS_ELECTION_STAGGER_S


class _FakeSyncObj:
    """What the leader-loss hook reads and writes of pysyncobj's SyncObj."""

    def __init__(self, leader: str, deadline: float) -> None:
        self._leader = SimpleNamespace(id=leader)
        self._SyncObj__raftElectionDeadline = deadline
        self.raftCurrentTerm = 4

    def _isLeader(self) -> bool:
        return False

    def _getLeader(self):
        return self._leader


def _lose(peer: str, node_id: int = 1, leader: str = VOTERS[1].raft_address) -> _FakeSyncObj:
    fake = _FakeSyncObj(leader, raft_clock() + RAFT_ELECTION_TIMEOUT_MIN_S)
    node = SimpleNamespace(_syncobj=fake, voters=VOTERS, voter=VOTERS[node_id - 1], removed=False)
    ControllerRaftNode._on_peer_disconnected(node, fake._leader if peer == leader else SimpleNamespace(id=peer))
    return fake


def test_losing_the_leader_brings_the_election_forward_on_pysyncobjs_clock():
    # pysyncobj's clock is not time.monotonic: a deadline on the wrong clock is off by the difference
    assert _lose(VOTERS[1].raft_address)._SyncObj__raftElectionDeadline == pytest.approx(raft_clock(), abs=0.02)
    assert _lose(VOTERS[1].raft_address, node_id=3)._SyncObj__raftElectionDeadline == pytest.approx(
        raft_clock() + LEADER_LOSS_ELECTION_STAGGER_S, abs=0.02)


def test_losing_another_follower_changes_nothing():
    assert _lose(VOTERS[2].raft_address)._SyncObj__raftElectionDeadline == pytest.approx(raft_clock() + RAFT_ELECTION_TIMEOUT_MIN_S, abs=0.02)


def test_the_client_tries_the_next_controller_at_once_then_backs_off():
    router = ControllerRouter([(v.node_id, v.host, v.grpc_port) for v in VOTERS])
    assert router.on_unreachable() == 0.0
    assert router.on_unreachable() == BACKOFF_S_MIN
    assert router.on_unreachable() == 2 * BACKOFF_S_MIN
    router.on_success()
    assert router.on_unreachable() == 0.0


def test_a_removed_voter_never_elects_early():
    fake = _FakeSyncObj(VOTERS[1].raft_address, raft_clock() + RAFT_ELECTION_TIMEOUT_MIN_S)
    ControllerRaftNode._on_peer_disconnected(SimpleNamespace(_syncobj=fake, voters=VOTERS, voter=VOTERS[0], removed=True), fake._leader)
    assert fake._SyncObj__raftElectionDeadline == pytest.approx(raft_clock() + RAFT_ELECTION_TIMEOUT_MIN_S, abs=0.02)
