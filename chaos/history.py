"""The history of a chaos run: every operation with when it started, when it ended and what
came of it.

The checker judges a run only from this record, never from live cluster state, so a history
saved to JSON can be checked again later (or a synthetic one written by hand in a test).
Outcomes follow Jepsen: ``ok`` (it happened, with the offset the broker gave), ``failed``
(it definitely did not happen) and ``unknown`` (it may or may not have happened: a timeout,
a connection lost after the request was sent). Times are seconds since the run started.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Union

Outcome = Literal["ok", "failed", "unknown"]
Read = tuple[int, str]  # (offset, value)
FINAL = "final"  # the label of the comparison after healing


@dataclass(frozen=True)
class SendOp:
    """One record sent by a producer: ``offset`` is known only when ``outcome`` is ok."""

    process: str
    partition: int
    value: str
    invoke_s: float
    complete_s: float
    outcome: Outcome
    offset: int | None = None
    error: str = ""
    kind: str = "send"


@dataclass(frozen=True)
class PollOp:
    """One consumer poll (or offsets observation, with no reads): what it read per partition
    and the high watermark and log start offset it was told."""

    process: str
    invoke_s: float
    complete_s: float
    outcome: Outcome
    reads: dict[int, list[Read]] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    log_starts: dict[int, int] = field(default_factory=dict)
    error: str = ""
    kind: str = "poll"


@dataclass(frozen=True)
class SeekOp:
    """A consumer moved its position: the next read need not follow the previous one."""

    process: str
    partition: int
    offset: int
    at_s: float
    kind: str = "seek"


@dataclass(frozen=True)
class FinalReadOp:
    """After the faults healed: the partition read from its log start up to its HW."""

    partition: int
    at_s: float
    log_start: int
    high_watermark: int
    reads: list[Read]
    complete: bool  # False when the read could not reach the HW in time
    kind: str = "final_read"


@dataclass(frozen=True)
class ReplicaOp:
    """One replica's log in a comparison (after healing, or after a restart), read on its
    broker.

    ``reads`` holds its records below ``upto_offset`` when the records could be read
    (``None`` otherwise); ``checksum`` is a CRC over its bytes below ``upto_offset`` when the
    broker gave one. Either is enough to compare replicas; records say where they differ.
    ``upto_offset`` None means the replica's own HW. ``label`` names the comparison.
    """

    broker: int
    partition: int
    at_s: float
    log_start: int
    high_watermark: int
    log_end: int
    reads: list[Read] | None = None
    checksum: int | None = None
    upto_offset: int | None = None
    label: str = FINAL
    kind: str = "replica"

    @property
    def compared_upto(self) -> int:
        """The offset below which ``reads`` or ``checksum`` cover this replica's log."""
        return self.high_watermark if self.upto_offset is None else self.upto_offset


@dataclass(frozen=True)
class ConvergenceOp:
    """Whether a partition's replicas came back together by a deadline: after healing
    (``FINAL``) or after the restart numbered ``restart``.

    ``target_offset`` is what the leader held when every replica first answered: its log
    end, or with ``quiescent`` (no writes running) its HW, which every replica's HW must then
    reach too. Every replica must hold at least that much and be in the ISR. ``waited_s``
    counts from the moment every replica's broker answered (or, when one never did, from
    the start of the comparison). ``unanswered`` maps each replica's broker that gave no
    log state to why: such a replica is a failure, not a smaller comparison.
    """

    partition: int
    label: str
    at_s: float
    waited_s: float
    leader: int
    replicas: list[int]
    isr: list[int]
    target_offset: int
    quiescent: bool
    restart: int | None = None
    unanswered: dict[int, str] = field(default_factory=dict)
    kind: str = "convergence"


@dataclass(frozen=True)
class FaultOp:
    """A fault that was in force from ``start_s`` to ``end_s`` (for reports and replay)."""

    name: str
    target: str
    start_s: float
    end_s: float
    detail: str = ""
    # power-loss: [node, partition, first offset, end offset] of the workload's records each
    # cut node had written but not fsynced (chaos/power_loss_cut.py)
    unflushed: list = field(default_factory=list)
    kind: str = "fault"


Op = Union[SendOp, PollOp, SeekOp, FinalReadOp, ReplicaOp, ConvergenceOp, FaultOp]
_KINDS: dict[str, type] = {cls.kind: cls for cls in (SendOp, PollOp, SeekOp, FinalReadOp, ReplicaOp, ConvergenceOp, FaultOp)}
_INT_KEYED = ("reads", "high_watermarks", "log_starts", "unanswered")


def op_to_json(op: Op) -> dict:
    """A JSON-ready dict of an op (partition keys become strings, as JSON requires)."""
    return asdict(op)


def op_from_json(raw: dict) -> Op:
    """The op a dict from ``op_to_json`` (after a JSON round trip) describes."""
    cls = _KINDS[raw["kind"]]
    fields = dict(raw)
    for name in _INT_KEYED:
        value = fields.get(name)
        if isinstance(value, dict):
            fields[name] = {int(k): _reads(v) if name == "reads" else v for k, v in value.items()}
        elif name == "reads" and value is not None:
            fields[name] = _reads(value)
    return cls(**fields)


def _reads(pairs: list) -> list[Read]:
    return [(int(offset), str(value)) for offset, value in pairs]


class History:
    """Ops in the order they were recorded, appended from many threads.

    ``now()`` is the run's clock (monotonic seconds since the history began), so invoke and
    complete times of different threads compare.
    """

    def __init__(self, ops: list[Op] | None = None) -> None:
        self._ops: list[Op] = list(ops or [])
        self._lock = threading.Lock()
        self._started = time.monotonic()

    def now(self) -> float:
        """Seconds since this history began."""
        return time.monotonic() - self._started

    def add(self, op: Op) -> None:
        """Records a finished op."""
        with self._lock:
            self._ops.append(op)

    @property
    def ops(self) -> list[Op]:
        """A snapshot of the ops recorded so far."""
        with self._lock:
            return list(self._ops)

    def of_kind(self, cls: type) -> list:
        """The ops of one type, in recorded order."""
        return [op for op in self.ops if isinstance(op, cls)]

    def save(self, path: Path) -> None:
        """Writes one JSON object per line (the form ``load`` reads)."""
        with open(path, "w") as out:
            for op in self.ops:
                out.write(json.dumps(op_to_json(op)) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        """Reads a history written by ``save``."""
        with open(path) as lines:
            return cls([op_from_json(json.loads(line)) for line in lines if line.strip()])
