"""Where a broker failover's time goes: the stages of one round of ``kraftlog perf failover``
read from the nodes' JSON logs and the probe's and producer's clocks, as milliseconds after
the signal.

The stages, in the order they happen:

- ``connection_closed``: a surviving follower saw its replication stream from the faulted
  leader break (``replica fetch stream broke``): the kernel closes a killed process's sockets
  only after it has freed the process's memory, so this stage is the kernel's;
- ``noticed``: the active controller saw the faulted broker's session stream close
  (``fencing broker: its session connection closed``);
- ``committed``: the fence and the elections it made committed in the metadata quorum and
  applied on the active controller (``broker fenced``);
- ``leader_applied``: the new leader's broker acted on that metadata (``metadata applied to
  replicas``, logged once its replicas have taken the change);
- ``followers_applied``: the last of the other live brokers did;
- ``probe_acked``: the probe's acks=all write was acknowledged by the new leader (the
  failover figure);
- ``producer_acked``: the load producer's first acknowledgement after the signal.

Every process runs on this machine, so wall clocks agree; a stage whose line is missing (a
SIGKILL in ``--mode pause``, a controlled shutdown, logs elsewhere) is None. Pure: the lines
are given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

STAGES = ("connection_closed", "noticed", "committed", "leader_applied", "followers_applied", "probe_acked", "producer_acked")
NOTICED = "fencing broker: its session connection closed"
COMMITTED = "broker fenced"
APPLIED = "metadata applied to replicas"
STREAM_BROKE = "replica fetch stream broke; reconnecting"


@dataclass(frozen=True)
class LogLine:
    """One JSON log line of a node: when, what, and its fields."""

    at_unix: float
    event: str
    fields: Mapping[str, object]


def parse_lines(lines: Iterable[str]) -> list[LogLine]:
    """The JSON lines of a node's log (other lines, such as a traceback's, are skipped)."""
    parsed = []
    for line in lines:
        try:
            record = json.loads(line)
            at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        parsed.append(LogLine(at, record.get("event", ""), record))
    return parsed


def _first_after(lines: Iterable[LogLine], since_unix: float, event: str, **fields: object) -> float | None:
    return min((line.at_unix for line in lines if line.at_unix >= since_unix and line.event == event
                and all(line.fields.get(k) == v for k, v in fields.items())), default=None)


def round_stages(
    signalled_unix: float,
    victim: int,
    new_leader: int,
    controller_logs: Iterable[list[LogLine]],
    broker_logs: Mapping[int, list[LogLine]],
    probe_acked_ms: float,
    producer_acked_ms: float | None,
) -> dict[str, float | None]:
    """Each stage of one round in ms after the signal (``signalled_unix``), or None."""
    controller_lines = [line for lines in controller_logs for line in lines]

    def after(at_unix: float | None) -> float | None:
        return None if at_unix is None else round((at_unix - signalled_unix) * 1000, 1)

    applied = {broker: _first_after(lines, signalled_unix, APPLIED) for broker, lines in broker_logs.items() if broker != victim}
    others = [at for broker, at in applied.items() if broker != new_leader]
    broke = [_first_after(lines, signalled_unix, STREAM_BROKE, leader=victim) for broker, lines in broker_logs.items() if broker != victim]
    return {
        "connection_closed": after(min((at for at in broke if at is not None), default=None)),
        "noticed": after(_first_after(controller_lines, signalled_unix, NOTICED, broker_id=victim)),
        "committed": after(_first_after(controller_lines, signalled_unix, COMMITTED, broker_id=victim)),
        "leader_applied": after(applied.get(new_leader)),
        "followers_applied": after(None if not others or None in others else max(others)),
        "probe_acked": round(probe_acked_ms, 1),
        "producer_acked": None if producer_acked_ms is None else round(producer_acked_ms, 1),
    }
