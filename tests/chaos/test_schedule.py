"""Seeded schedules are replayable and fit the run; every scenario uses faults and roles the
nemesis knows; Raft links are proxied on the side pysyncobj dials from."""

from __future__ import annotations

import pytest

from chaos.chaos_cluster import raft_dialers
from chaos.nemesis import FAULTS, LINK_ROLES, PROCESS_ROLES
from chaos.scenarios import SCENARIOS
from chaos.schedule import FaultSpec, generate
from chaos.workload.producer_worker import outcome_of
from data_plane.client import KraftlogError
from server_common.local_cluster import Node

@pytest.mark.parametrize("name", sorted(n for n, s in SCENARIOS.items() if s.workload == "records"))  # group runs draw their own
def test_same_seed_same_schedule(name: str) -> None:
    specs = SCENARIOS[name].specs
    first = generate(specs, seed=7, duration_s=120)
    assert first == generate(specs, seed=7, duration_s=120)
    assert first, f"{name} schedules nothing in 120 s"
    assert all(0 < s.at_s and s.end_s <= 120 for s in first)
    assert all(b.at_s >= a.end_s for a, b in zip(first, first[1:])), "steps overlap"


def test_different_seeds_differ() -> None:
    specs = SCENARIOS["mix"].specs
    assert generate(specs, 1, 300) != generate(specs, 2, 300)


def test_a_step_that_does_not_fit_is_left_out() -> None:
    assert generate([FaultSpec("kill", "leader", (10, 10), (1, 1))], seed=0, duration_s=11) == []


def test_scenarios_use_known_faults_and_roles() -> None:
    for scenario in SCENARIOS.values():
        for spec in scenario.specs:
            assert spec.fault in FAULTS, (scenario.name, spec.fault)
            assert spec.role in PROCESS_ROLES + LINK_ROLES, (scenario.name, spec.role)
    assert {n for n in SCENARIOS if n.startswith("unsafe-")} == {n for n, s in SCENARIOS.items() if s.expected}


def test_only_a_single_attempt_refused_before_append_is_a_definite_failure() -> None:
    refused = KraftlogError("NOT_ENOUGH_REPLICAS")
    assert outcome_of(refused, single_attempt=True) == "failed"
    assert outcome_of(refused, single_attempt=False) == "unknown"
    assert outcome_of(KraftlogError("REQUEST_TIMED_OUT"), single_attempt=True) == "unknown"
    assert outcome_of(KraftlogError("NOT_LEADER_OR_FOLLOWER"), single_attempt=True) == "unknown"


def test_each_pair_of_voters_has_one_raft_link_dialed_by_the_larger_address_string() -> None:
    """pysyncobj compares addresses as strings, so port 9000 dials port 10000."""
    voters = [Node(i, "controller", "127.0.0.1", i, raft_port=port) for i, port in ((1, 10000), (2, 9000), (3, 20000))]
    pairs = [(dialer.node_id, target.node_id) for dialer, target in raft_dialers(voters)]
    assert sorted(pairs) == [(2, 1), (2, 3), (3, 1)]


# The group negative control is provoked by its members' joins at the start of every run,
# whatever faults its seed draws (tests/chaos/test_group_run.py).
NEGATIVE_CONTROLS = sorted(name for name, s in SCENARIOS.items() if s.expected and s.workload == "records")


@pytest.mark.parametrize("name", NEGATIVE_CONTROLS)
def test_a_negative_control_provokes_its_bug_on_every_seed(name: str) -> None:
    """Each negative control schedules one kind of fault only, the one its bug needs (for
    skip-epoch-fencing, a leader deposed while alive), and every seed gets it at 5 s in a
    15 s run: whether the bug is provoked does not depend on the seed."""
    faults = {spec.fault for spec in SCENARIOS[name].specs}
    assert len(faults) == 1, f"{name} mixes {faults}: some seeds would not provoke its bug"
    for seed in range(200):
        steps = generate(SCENARIOS[name].specs, seed, duration_s=15.0)
        assert steps and steps[0].at_s == 5.0 and steps[0].fault in faults, (seed, steps)


def test_skip_epoch_fencing_is_provoked_by_a_deposed_leader() -> None:
    assert [spec.fault for spec in SCENARIOS["unsafe-skip-epoch-fencing"].specs] == ["depose-leader"]


@pytest.mark.parametrize("name", sorted(n for n, s in SCENARIOS.items() if s.workload == "records" and not s.expected))
def test_a_ten_second_soak_run_always_has_a_fault(name: str) -> None:
    """The soak's short runs: every seed schedules at least one step, within the run."""
    for seed in range(40):
        steps = generate(SCENARIOS[name].specs, seed, duration_s=10.0)
        assert steps and all(s.end_s <= 10.0 for s in steps), (name, seed)
