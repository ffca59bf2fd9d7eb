"""The rules of changing the controller quorum (KIP-853 on pysyncobj): observers first, one
change at a time, unique ids and addresses, never the last voter."""

from __future__ import annotations

from metadata_quorum.controller_directory import OBSERVER, REMOVED, VOTER, ControllerDirectory, add_problem, remove_problem
from metadata_quorum.endpoints import Voter

V = {i: Voter(i, "127.0.0.1", 9000 + i, 9100 + i) for i in range(1, 6)}
THREE = ControllerDirectory.of_voters([V[3], V[1], V[2]])
RAFT = {V[i].raft_address for i in (1, 2, 3)}


def test_a_new_controller_is_an_observer_until_promoted_and_the_log_carries_it_exactly():
    joining = THREE.with_observer(V[4])
    assert [joining.role_of(i) for i in (1, 4, 5)] == [VOTER, OBSERVER, REMOVED]
    promoted = joining.promoted(4)
    assert [v.node_id for v in promoted.voters] == [1, 2, 3, 4] and promoted.observers == ()
    assert ControllerDirectory.decode(joining.encode()) == joining
    assert [v.node_id for v in promoted.without(2).voters] == [1, 3, 4]


def test_adding_needs_a_new_id_new_addresses_and_no_change_in_progress():
    assert add_problem(THREE, V[4], RAFT) is None
    assert "already a voter" in add_problem(THREE, V[2], RAFT)
    assert "already uses" in add_problem(THREE, Voter(4, "127.0.0.1", V[1].raft_port, 9999), RAFT)
    joining = THREE.with_observer(V[4])
    assert add_problem(joining, V[4], RAFT) is None  # resumes the unfinished add
    assert "one membership change at a time" in add_problem(joining, V[5], RAFT)
    promoted = joining.promoted(4)
    assert add_problem(promoted, V[4], RAFT) is None  # a voter of the directory not yet in pysyncobj's set: resume
    assert "already a voter" in add_problem(promoted, V[4], RAFT | {V[4].raft_address})


def test_removing_needs_a_member_and_never_takes_the_last_voter():
    assert remove_problem(THREE, 2) is None
    assert "not in the quorum" in remove_problem(THREE, 7)
    assert "last voter" in remove_problem(ControllerDirectory.of_voters([V[1]]), 1)
    assert remove_problem(ControllerDirectory.of_voters([V[1]]).with_observer(V[2]), 2) is None


def test_a_malformed_add_request_is_refused_saying_what_to_give():
    from metadata_quorum.controller_directory import request_problem

    assert request_problem(V[4], 0) is None
    assert "negative" in request_problem(Voter(-1, "h", 1, 2), 0)
    assert "host" in request_problem(Voter(4, "", 1, 2), 0)
    assert "1-65535" in request_problem(Voter(4, "h", 0, 2), 0)
    assert "catch_up_timeout_ms" in request_problem(V[4], -5)
