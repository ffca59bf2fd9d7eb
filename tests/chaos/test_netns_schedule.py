"""The pure parts of the namespace and clock faults and of the soak: the tc commands each
fault becomes (with and without netem), bridge sides, clock offsets picked by seed, and the
soak's plan of (seed, scenario)."""

from __future__ import annotations

import pytest

from chaos.clock_skew import pick_offset
from chaos.netns import Shaping, fraction_match, leaf_argv, owner_pid, rule_argv
from chaos.netns_faults import bridge_sides
from chaos.scenarios import SCENARIOS
from chaos.schedule import generate
from chaos.soak import plan, scenario_names


def test_full_drop_without_netem_is_a_zero_length_fifo_for_one_destination() -> None:
    klass, leaf, steer = rule_argv("ns1", "veth0", 0x10, "10.0.0.12", Shaping(), netem=False)
    assert klass[:3] == ["tc", "-n", "ns1"] and "1:10" in klass
    assert leaf[-3:] == ["pfifo", "limit", "0"]
    assert steer[steer.index("dst") + 1] == "10.0.0.12/32" and steer[-2:] == ["flowid", "1:10"]
    assert "at" not in steer[steer.index("dst"):], "every packet to the destination, not a share"


def test_loss_without_netem_selects_checksum_bits() -> None:
    assert fraction_match(Shaping(loss_percent=25), netem=False) == ["match", "u16", "0", "0x3", "at", "10"]
    assert fraction_match(Shaping(rate="1mbit", reorder=True), netem=False)[3] == "0x1"
    with pytest.raises(ValueError, match="pick one of those"):
        fraction_match(Shaping(loss_percent=30), netem=False)
    with pytest.raises(ValueError, match="give a rate"):
        leaf_argv(Shaping(delay_ms=100), netem=False)


def test_netem_leaves() -> None:
    assert leaf_argv(Shaping(loss_percent=30), netem=True) == ["netem", "loss", "30%"]
    assert leaf_argv(Shaping(delay_ms=100, jitter_ms=20, reorder=True), netem=True) == ["netem", "delay", "100ms", "20ms", "reorder", "50%"]
    assert fraction_match(Shaping(loss_percent=30), netem=True) == []


def test_owner_pid_reads_our_names_only() -> None:
    assert owner_pid("klx00ff0a3-broker-1") == 0xFF0A
    assert owner_pid("eth0") is None and owner_pid("klxzz") is None


@pytest.mark.parametrize("pick", range(5))
def test_bridge_sides_split_the_others(pick: int) -> None:
    others = ["broker-1", "broker-2", "controller-1", "controller-2", "controller-3"]
    left, right = bridge_sides(others, pick)
    assert left and right and sorted(left + right) == others


def test_clock_offset_is_the_picks() -> None:
    params = {"offsets_ms": [-5000, 60000]}
    assert [pick_offset(params, p) for p in range(3)] == [-5000, 60000, -5000]


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s.cluster.namespaces or n == "clock-skew"])
def test_real_fault_schedules_use_known_params(name: str) -> None:
    steps = generate(SCENARIOS[name].specs, seed=11, duration_s=60)
    assert steps
    for step in steps:
        if step.fault == "net-shape":
            shaping = Shaping(loss_percent=step.params.get("loss_percent", 100), rate=step.params.get("rate"), reorder=step.params.get("reorder", False))
            fraction_match(shaping, netem=False)  # buildable on a kernel without netem
            leaf_argv(shaping, netem=False)


def test_soak_plan_takes_scenarios_in_turn_and_replays() -> None:
    names = scenario_names(with_negative_controls=False)
    assert not any(SCENARIOS[n].expected for n in names)
    assert "netns-leader-partition" in names and "clock-skew" in names
    schedules = plan(2 * len(names), 40, names)
    assert [seed for seed, _ in schedules] == list(range(40, 40 + 2 * len(names)))
    assert sorted({name for _, name in schedules}) == names
    assert schedules == plan(2 * len(names), 40, names)
    with pytest.raises(ValueError, match="at least 1"):
        plan(0, 0, names)
    with pytest.raises(ValueError, match="kraftlog chaos list"):
        scenario_names(False, ["nope"])


def test_without_root_namespace_scenarios_say_why(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from chaos.runner import RunOptions, run
    from chaos.soak import unrunnable_reason

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert "need root" in unrunnable_reason(SCENARIOS["netns-bridge"])
    assert unrunnable_reason(SCENARIOS["clock-skew"]) is None
    with pytest.raises(ValueError, match="need root"):
        run(RunOptions(SCENARIOS["netns-bridge"], 10, 1, tmp_path, progress=lambda _line: None))
