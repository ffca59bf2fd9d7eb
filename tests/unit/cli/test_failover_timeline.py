"""The stages of a failover round read from the nodes' log lines (``cli/failover_timeline.py``)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from cli.failover_timeline import parse_lines, round_stages

SIGNAL = 1_800_000_000.0  # wall clock of the signal


def line(after_ms: float, event: str, **fields: object) -> str:
    at = datetime.fromtimestamp(SIGNAL + after_ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    return json.dumps({**fields, "event": event, "level": "info", "timestamp": at})


def test_each_stage_is_the_first_matching_line_after_the_signal() -> None:
    controller = parse_lines([
        line(-500, "broker fenced", broker_id=3),  # an earlier round
        line(1.2, "fencing broker: its session connection closed", broker_id=3),
        line(9.8, "broker fenced", broker_id=3),
    ])
    other_controller = parse_lines([line(2.0, "fencing broker: its session connection closed", broker_id=2)])  # another broker
    brokers = {
        1: parse_lines([line(-100, "metadata applied to replicas"), line(12.5, "metadata applied to replicas", leading=1), line(900, "metadata applied to replicas")]),
        2: parse_lines([line(0.9, "replica fetch stream broke; reconnecting", leader=3), line(11.0, "metadata applied to replicas", following=1),
                        "Traceback (most recent call last):"]),
        3: parse_lines([line(-3, "metadata applied to replicas")]),  # the victim
    }
    stages = round_stages(SIGNAL, victim=3, new_leader=1, controller_logs=[controller, other_controller], broker_logs=brokers,
                          probe_acked_ms=18.04, producer_acked_ms=19.96)
    assert stages == {"connection_closed": 0.9, "noticed": 1.2, "committed": 9.8, "leader_applied": 12.5, "followers_applied": 11.0,
                      "probe_acked": 18.0, "producer_acked": 20.0}


def test_a_stage_without_its_line_is_none() -> None:
    brokers = {1: parse_lines([line(5, "metadata applied to replicas")]), 2: [], 3: []}
    stages = round_stages(SIGNAL, victim=3, new_leader=1, controller_logs=[[]], broker_logs=brokers, probe_acked_ms=30, producer_acked_ms=None)
    assert stages["connection_closed"] is stages["noticed"] is stages["committed"] is stages["followers_applied"] is stages["producer_acked"] is None
    assert stages["leader_applied"] == 5.0
