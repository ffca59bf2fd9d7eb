"""The quorum checks: a run that adds and removes controllers while a client creates topics,
judged on what the controllers served. Pure code (no clock, no I/O).

The writer creates topics ``q-00000``, ``q-00001``, ... one after another, each only once the
previous one was acknowledged (a creation whose answer was lost is asked again until it is
acknowledged or answered "already exists", which counts as acknowledged). So the committed
metadata log holds a prefix of that sequence at every moment, and:

- ``lost-metadata``: after the run, with every fault over, a controller of the final quorum
  does not hold an acknowledged creation;
- ``stale-read``: a controller served a read missing a creation acknowledged before that
  controller's process started. A controller answers reads only once it has caught up with
  the log (it applied what a leader of the current term says is committed: everything
  acknowledged before it started, at least); one that joins and serves before that answers
  from part of the log;
- ``reordered-metadata``: a read (or the final read) holds a creation but not an earlier one:
  committed metadata out of order or with a hole;
- ``read-went-back``: one controller process served a creation, then a read without it;
- ``lost-write``: an acknowledged record of the producer that ran beside the changes (the
  brokers' data, while their controllers came and went) was not read back after the run
  (``chaos/quorum_run.py`` adds it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from chaos.checker.findings import Finding, Findings

QUORUM_KINDS: dict[str, str] = {
    "lost-metadata": "after the run, a controller of the final quorum lacks an acknowledged topic creation",
    "stale-read": "a controller served a read missing a creation acknowledged before its process started",
    "reordered-metadata": "a read holds a topic creation but not an earlier one of the sequence",
    "read-went-back": "one controller process served a creation, then a read without it",
    "lost-write": "an acknowledged record of the producer that ran beside the changes was not read back after the run",
}
EXAMPLES_MAX = 20


@dataclass(frozen=True)
class QuorumAnomaly(Finding):
    kinds: ClassVar[dict[str, str]] = QUORUM_KINDS


@dataclass
class QuorumCheckResult(Findings):
    kinds: ClassVar[dict[str, str]] = QUORUM_KINDS
    anomalies: list[QuorumAnomaly]


@dataclass(frozen=True)
class MetadataRead:
    """What one controller process served: the creations (sequence numbers) in its answer."""

    controller_id: int
    started_at: float  # when the process was started (run time)
    at: float  # when the answer came
    seqs: frozenset[int]


def check_quorum(acked_at: dict[int, float], reads: Iterable[MetadataRead], finals: Iterable[MetadataRead]) -> QuorumCheckResult:
    """``acked_at``: sequence number -> when its creation was acknowledged."""
    reads, finals = list(reads), list(finals)
    anomalies: list[QuorumAnomaly] = []
    for final in finals:
        lost = sorted(set(acked_at) - final.seqs)
        if lost:
            anomalies.append(QuorumAnomaly("lost-metadata", final.controller_id, f"controller {final.controller_id} lacks "
                                           f"{len(lost)} acknowledged creation(s) after the run: {_names(lost)}", {"missing": lost[:EXAMPLES_MAX]}))
    for read in reads:
        stale = sorted(s for s, at in acked_at.items() if at < read.started_at and s not in read.seqs)
        if stale:
            anomalies.append(QuorumAnomaly("stale-read", read.controller_id, f"controller {read.controller_id} (started at "
                                           f"{read.started_at:.3f}s) served at {read.at:.3f}s a read without {_names(stale)}, "
                                           "acknowledged before it started", {"missing": stale[:EXAMPLES_MAX], "at": read.at}))
    for read in reads + finals:
        holes = sorted(set(range(max(read.seqs, default=-1) + 1)) - read.seqs)
        if holes:
            anomalies.append(QuorumAnomaly("reordered-metadata", read.controller_id, f"controller {read.controller_id} served at "
                                           f"{read.at:.3f}s q-{max(read.seqs):05d} but not the earlier {_names(holes)}",
                                           {"missing": holes[:EXAMPLES_MAX], "at": read.at}))
    served: dict[tuple[int, float], frozenset[int]] = {}
    for read in sorted(reads, key=lambda r: r.at):
        key = (read.controller_id, read.started_at)
        gone = sorted(served.get(key, frozenset()) - read.seqs)
        if gone:
            anomalies.append(QuorumAnomaly("read-went-back", read.controller_id, f"controller {read.controller_id} served at "
                                           f"{read.at:.3f}s a read without {_names(gone)}, which it had served before",
                                           {"missing": gone[:EXAMPLES_MAX], "at": read.at}))
        served[key] = served.get(key, frozenset()) | read.seqs
    return QuorumCheckResult(anomalies)


def _names(seqs: list[int]) -> str:
    shown = ", ".join(f"q-{s:05d}" for s in seqs[:5])
    return shown + (f" and {len(seqs) - 5} more" if len(seqs) > 5 else "")
