"""The checker on synthetic histories: each anomaly kind has a negative control (a history
with that one fault, which must be caught) and the clean histories must pass.

A checker that has never caught anything proves nothing, so every kind in
``chaos.checker.KINDS`` must appear in NEGATIVE_CONTROLS.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from chaos.checker import KINDS, check
from chaos.history import ConvergenceOp, FinalReadOp, History, PollOp, ReplicaOp, SeekOp, SendOp
from tests.chaos.histories import VALUES, clean_history, convergence, poll, replace_ops, with_final_reads

LOG = list(enumerate(VALUES))


def _two_polls(first: list, second: list, hw_first: int = 3, hw_second: int = 6) -> list:
    """The clean history with the consumer's two polls replaced."""
    ops = [op for op in clean_history() if not isinstance(op, PollOp)]
    return ops + [poll(0, first, hw_first, 3.0), poll(0, second, hw_second, 7.0)]


def _lost_acked():
    return with_final_reads(clean_history(), [r for r in LOG if r[0] != 2])


def _lost_polled():
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value == "v4")
    return with_final_reads(ops, [r for r in LOG if r[0] != 4])


def _unseen():
    """v4 and v5 acknowledged beyond where the final read ended (no one was told a HW
    above 3, so nothing says they were committed and then lost)."""
    ops = [op for op in clean_history() if not isinstance(op, PollOp)] + [poll(0, LOG[:3], 3, 3.0)]
    return with_final_reads(ops, LOG[:4], high_watermark=4)


def _duplicate():
    return with_final_reads(clean_history(), LOG + [(6, "v1")], high_watermark=7)


def _inconsistent():
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value == "v2")
    return ops + [poll(0, [(2, "w")], hw=3, at=4.0, process="consumer-1")]


def _skipping():
    return _two_polls(LOG[:3], LOG[4:])


def _aborted():
    return replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="failed", offset=None), lambda op: op.value == "v5")


def _replicas_differ():
    diverged = LOG[:4] + [(4, "zz"), (5, "v5")]
    return replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, reads=diverged), lambda op: op.broker == 3)


def _with_convergence(ops: list, **changes) -> list:
    """``ops`` whose comparison after healing says ``changes`` instead."""
    return replace_ops(ops, ConvergenceOp, lambda op: replace(op, **changes))


def _stuck_out_of_isr():
    """Broker 3 stuck four records behind, out of the ISR: the restart bug's picture."""
    ops = replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, high_watermark=4, log_end=4, reads=LOG[:4]), lambda op: op.broker == 3)
    return _with_convergence(ops, isr=[1, 2])


def _stuck_in_stale_isr():
    """Metadata still lists broker 3 in the ISR, but its log never reached the leader's HW."""
    return replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, high_watermark=4, log_end=4, reads=LOG[:4]), lambda op: op.broker == 3)


def _hw_short_when_quiescent():
    return replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, high_watermark=5, reads=LOG[:5]), lambda op: op.broker == 2)


def _leaderless():
    return _with_convergence(clean_history(), leader=-1, isr=[])


def _stuck_after_restart():
    """After restart 2, under load: broker 2 never came back (checksums at offset 4)."""
    label = "restart 2 (SIGKILL broker-2)"
    states = [ReplicaOp(b, 0, 5.0, 0, hw, end, checksum=0xABC, upto_offset=4, label=label) for b, hw, end in ((1, 5, 6), (2, 3, 3), (3, 4, 5))]
    return clean_history() + [convergence(label=label, isr=(1, 3), target=4)] + states


def _unanswered_broker():
    """Broker 3 gave no log state: the comparison must not shrink to two replicas."""
    ops = [op for op in clean_history() if not (isinstance(op, ReplicaOp) and op.broker == 3)]
    return _with_convergence(ops, unanswered={3: "DescribeLogs failed: UNAVAILABLE"})


def _replica_silently_missing():
    return [op for op in clean_history() if not (isinstance(op, ReplicaOp) and op.broker == 2)]


def _hw_backwards():
    return clean_history() + [poll(0, [], hw=4, at=8.0)]


def _observed(process: str, hw: int, at: float, took_s: float = 0.1, log_start: int = 0) -> PollOp:
    """An offsets observation of partition 0 (no records) from ``at`` for ``took_s``."""
    return PollOp(process, at, at + took_s, "ok", high_watermarks={0: hw}, log_starts={0: log_start})


def _hw_backwards_for_the_observer():
    """Asked after consumer-0 was told HW 6, a broker answers 5."""
    return clean_history() + [_observed("offsets-observer-2", 5, 7.5)]


def _stale_leader_answers_the_observer():
    """The skip-epoch-fencing picture: the new leader (broker 2) told the observer 6, then
    the deposed one (broker 1), asked with the same epoch, still answers 4."""
    ops = [op for op in clean_history() if not isinstance(op, PollOp)] + [poll(0, LOG[:3], 3, 3.0)]
    return ops + [_observed("offsets-observer-2", 6, 7.0), _observed("offsets-observer-1", 4, 7.2)]


def _final_hw_below_observed_with_unknown_sends():
    """The issue's blind spot: v4 and v5 were read by a consumer (their sends unknown), then
    the final read ended at HW 4 as if they had never been committed."""
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value in ("v4", "v5"))
    return with_final_reads(ops, LOG[:4], high_watermark=4)


def _log_start_backwards():
    ops = [op for op in clean_history() if not isinstance(op, PollOp)]
    return ops + [poll(0, LOG[:3], 3, 3.0, log_start=2), poll(0, LOG[3:], 6, 7.0, log_start=1)]


def _log_start_backwards_for_the_observer():
    ops = [op for op in clean_history() if not isinstance(op, PollOp)]
    return ops + [poll(0, LOG[2:], 6, 3.0, log_start=2), _observed("offsets-observer-3", 6, 4.0, log_start=0)]


def _log_start_backwards_for_the_final_read():
    ops = [op for op in clean_history() if not isinstance(op, PollOp)]
    return ops + [poll(0, LOG[2:], 6, 3.0, log_start=2)]


def _final_read_gap():
    """Offset 3 missing from a complete final read; v3's send unknown and nobody read it."""
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value == "v3")
    ops = [op for op in ops if not isinstance(op, PollOp)] + [poll(0, LOG[:3], 3, 3.0)]
    return with_final_reads(ops, [r for r in LOG if r[0] != 3])


def _incomplete_final_read_gap():
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value == "v3")
    ops = [op for op in ops if not isinstance(op, PollOp)] + [poll(0, LOG[:3], 3, 3.0)]
    return with_final_reads(ops, [r for r in LOG if r[0] != 3], complete=False)


def _value_nobody_sent():
    ops = replace_ops(clean_history(), SendOp, lambda op: replace(op, outcome="unknown", offset=None), lambda op: op.value == "v5")
    ops = [op for op in ops if not isinstance(op, PollOp)] + [poll(0, LOG[:3], 3, 3.0)]
    return with_final_reads(ops, LOG[:5] + [(5, "ghost")])


def _value_sent_to_another_partition():
    """Partition 1's replica on broker 2 holds a value sent to partition 0."""
    other = clean_history(1)
    return clean_history() + replace_ops(other, ReplicaOp, lambda op: replace(op, reads=op.reads[:5] + [(5, "v5")]), lambda op: op.broker == 2)


def _read_above_hw():
    return _two_polls(LOG[:3], LOG[3:], hw_first=2)


def _final_read_above_hw():
    return replace_ops(clean_history(), FinalReadOp, lambda op: replace(op, high_watermark=5))


NEGATIVE_CONTROLS = {
    "lost-write": [_lost_acked, _lost_polled],
    "unseen": [_unseen],
    "duplicate": [_duplicate],
    "inconsistent-offsets": [_inconsistent],
    "skipping-poll": [_skipping],
    "aborted-read": [_aborted],
    "replicas-differ": [_replicas_differ],
    "under-replicated": [_stuck_out_of_isr, _stuck_in_stale_isr, _hw_short_when_quiescent, _leaderless, _stuck_after_restart],
    "replica-unanswered": [_unanswered_broker, _replica_silently_missing],
    "hw-backwards": [_hw_backwards, _hw_backwards_for_the_observer, _stale_leader_answers_the_observer, _final_hw_below_observed_with_unknown_sends],
    "log-start-backwards": [_log_start_backwards, _log_start_backwards_for_the_observer, _log_start_backwards_for_the_final_read],
    "final-read-gap": [_final_read_gap, _incomplete_final_read_gap],
    "unsent-value": [_value_nobody_sent, _value_sent_to_another_partition],
    "read-above-hw": [_read_above_hw, _final_read_above_hw],
}


def test_every_kind_has_a_negative_control() -> None:
    assert set(NEGATIVE_CONTROLS) == set(KINDS)


@pytest.mark.parametrize(
    "kind, build", [(kind, build) for kind, builds in NEGATIVE_CONTROLS.items() for build in builds], ids=lambda x: getattr(x, "__name__", x)
)
def test_negative_control_is_caught(kind: str, build) -> None:
    result = check(build())
    assert not result.valid
    assert kind in result.by_kind, f"{kind} not caught; found {list(result.by_kind)}"


def _seek_then_reread():
    ops = _two_polls(LOG[:3], LOG[3:])
    return ops + [SeekOp("consumer-0", 0, 1, 7.5), poll(0, LOG[1:4], hw=6, at=8.0)]


def _unknown_write_missing():
    extra = SendOp("producer-1", 0, "maybe", 2.0, 8.0, "unknown")
    return clean_history() + [extra]


def _failed_write_unread():
    return clean_history() + [SendOp("producer-1", 0, "nope", 2.0, 2.5, "failed", error="NOT_ENOUGH_REPLICAS")]


def _replicas_with_different_hws():
    """Replicas compared below both HWs only (this history has no ISR deadline to meet)."""
    ops = replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, high_watermark=4, reads=LOG[:4] + [(4, "tail")]), lambda op: op.broker == 2)
    return [op for op in ops if not isinstance(op, ConvergenceOp)] + [SendOp("producer-1", 0, "tail", 3.0, 8.0, "unknown")]


def _incomplete_final_read():
    ops = clean_history() + [SendOp("producer-0", 0, "v6", 8.0, 8.5, "ok", offset=6)]
    return with_final_reads(ops, LOG, high_watermark=7, complete=False)


def _checksums_agree():
    return replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, reads=None, checksum=0xABC))


def _two_partitions():
    return clean_history(0) + clean_history(1)


def _restart_under_load():
    """After a restart, under load: HWs and log ends differ, every replica holds the target
    and is in the ISR, checksums below it agree."""
    label = "restart 1 (SIGTERM broker-3)"
    states = [ReplicaOp(b, 0, 5.0, 0, hw, end, checksum=0xABC, upto_offset=4, label=label) for b, hw, end in ((1, 5, 6), (2, 4, 5), (3, 3, 4))]
    return clean_history() + [convergence(label=label, target=4)] + states


def _tail_lost_after_the_state_was_taken():
    """Broker 3's file holds four records though DescribeLogs said six: not a difference
    (its log went short after the state was taken; the ISR deadline judges that)."""
    return replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, reads=LOG[:4]), lambda op: op.broker == 3)


def _lower_hw_told_in_an_overlapping_window():
    """The observer's request ran from 6.9 to 7.3 s, while consumer-0's answer with HW 6
    arrived (by 7.1 s): the answer with HW 3 may have been given first. Not a regression."""
    return clean_history() + [_observed("offsets-observer-1", 3, 6.9, took_s=0.4)]


def _stale_hw_delivered_late_to_another_consumer():
    """consumer-1 takes records with HW 3 at 8 s, after consumer-0 was told 6: the fetch
    answer or stream message may have been built long before (fetched ahead, queued), so a
    consumer's HW is judged only against its own earlier ones."""
    return clean_history() + [poll(0, LOG[:2], hw=2, at=2.0, process="consumer-1"), poll(0, LOG[2:3], hw=3, at=8.0, process="consumer-1")]


def _history_without_comparisons():
    """A history saved before comparisons were recorded still checks."""
    return [op for op in clean_history() if not isinstance(op, ConvergenceOp)]


CLEAN = [
    clean_history,
    _seek_then_reread,
    _unknown_write_missing,
    _failed_write_unread,
    _replicas_with_different_hws,
    _checksums_agree,
    _two_partitions,
    _restart_under_load,
    _tail_lost_after_the_state_was_taken,
    _history_without_comparisons,
    _lower_hw_told_in_an_overlapping_window,
    _stale_hw_delivered_late_to_another_consumer,
]


@pytest.mark.parametrize("build", CLEAN, ids=lambda b: b.__name__)
def test_clean_history_passes(build) -> None:
    result = check(build())
    assert result.valid, [a.message for a in result.anomalies]


def test_incomplete_final_read_reports_unseen_not_lost() -> None:
    result = check(_incomplete_final_read())
    assert list(result.by_kind) == ["unseen"]
    assert result.incomplete_final_reads == [0]


def test_a_committed_record_gone_from_the_final_read_is_lost_not_unseen() -> None:
    found = check(_final_hw_below_observed_with_unknown_sends()).by_kind
    assert sorted(found) == ["hw-backwards", "lost-write"]
    assert sorted(a.details["value"] for a in found["lost-write"]) == ["v4", "v5"]
    [regression] = found["hw-backwards"]
    assert (regression.details["process"], regression.details["before"], regression.details["after"]) == ("final-read", 6, 4)


def test_values_from_elsewhere_name_their_partition() -> None:
    [anomaly] = check(_value_sent_to_another_partition()).by_kind["unsent-value"]
    assert (anomaly.partition, anomaly.details["sent_to_partition"], anomaly.details["where"]) == (1, 0, "broker 2's replica")


def test_checksums_that_differ_are_caught() -> None:
    ops = replace_ops(_checksums_agree(), ReplicaOp, lambda op: replace(op, checksum=0xDEF), lambda op: op.broker == 1)
    assert [a.kind for a in check(ops).anomalies] == ["replicas-differ"] * 2


def test_report_counts_and_examples() -> None:
    report = check(_lost_acked()).to_json()
    assert report["valid"] is False
    assert report["anomaly_counts"] == {"lost-write": 1, "final-read-gap": 1}
    assert report["anomalies"]["lost-write"][0]["offset"] == 2
    assert report["counts"]["send_ok"] == 6


def test_history_round_trips_through_json(tmp_path) -> None:
    ops = _lost_polled() + _unanswered_broker()[-3:] + [SendOp("producer-1", 1, "x", 1.0, 2.0, "failed", error="E")]
    History(ops).save(tmp_path / "history.jsonl")
    loaded = History.load(tmp_path / "history.jsonl").ops
    assert loaded == ops
    assert check(loaded).to_json() == check(ops).to_json()



def test_a_stuck_replica_is_named_with_its_log_end_and_the_leaders() -> None:
    found = check(_stuck_out_of_isr()).by_kind
    assert list(found) == ["under-replicated"], "a short replica is stuck, not different"
    [anomaly] = found["under-replicated"]
    assert (anomaly.partition, anomaly.details["broker"], anomaly.details["log_end"]) == (0, 3, 4)
    assert (anomaly.details["leader"], anomaly.details["leader_log_end"], anomaly.details["leader_high_watermark"]) == (1, 6, 6)
    assert "broker 3 was still out of the ISR [1, 2]" in anomaly.message and "leader 1's log end 6, HW 6" in anomaly.message


def test_a_stall_after_a_restart_names_the_restart() -> None:
    found = check(_stuck_after_restart()).by_kind["under-replicated"]
    assert [(a.details["restart"], a.details["broker"], a.details["log_end"]) for a in found] == [(2, 2, 3)]
    assert found[0].message.startswith("after restart 2 (SIGKILL broker-2), broker 2")


def test_checksums_after_a_restart_that_differ_are_caught() -> None:
    ops = replace_ops(_restart_under_load(), ReplicaOp, lambda op: replace(op, checksum=0xDEF), lambda op: op.broker == 3 and op.label != "final")
    assert [(a.kind, a.details["brokers"]) for a in check(ops).anomalies] == [("replicas-differ", [1, 3]), ("replicas-differ", [2, 3])]


def test_report_says_how_many_replicas_each_comparison_compared() -> None:
    report = check(_unanswered_broker() + _restart_under_load()[-4:]).to_json()
    assert report["replica_comparisons"] == [
        {"label": "final", "restart": None, "partitions": 1, "replicas_expected": 3, "replicas_compared": 2, "partitions_converged": 0, "waited_s_max": 1.0},
        {"label": "restart 1 (SIGTERM broker-3)", "restart": 1, "partitions": 1, "replicas_expected": 3, "replicas_compared": 3, "partitions_converged": 1, "waited_s_max": 1.0},
    ]


def test_a_hole_in_a_replica_is_a_difference() -> None:
    ops = replace_ops(clean_history(), ReplicaOp, lambda op: replace(op, reads=LOG[:2] + LOG[3:]), lambda op: op.broker == 3)
    assert {a.kind for a in check(ops).anomalies} == {"replicas-differ"}
