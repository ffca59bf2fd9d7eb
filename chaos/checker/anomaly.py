"""What the checker can find, and how one finding is reported.

Each kind names a way the log broke a promise it makes to clients. The descriptions are the
ones shown in reports and in docs/chaos.md, so a reader of a report need not look up the code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS: dict[str, str] = {
    "lost-write": "a committed write (acknowledged, or read by a consumer) is missing from the final read although it covers the write's offset (or stopped short of the highest HW anyone observed)",
    "unseen": "an acknowledged write is not in the final read and its offset lies beyond what the final read reached",
    "duplicate": "one value appears at more than one offset",
    "inconsistent-offsets": "one offset holds different values in different reads (or differs from the offset acknowledged)",
    "skipping-poll": "a consumer's reads jumped over offsets that hold records, without seeking",
    "aborted-read": "a consumer read a value whose send definitely failed",
    "replicas-differ": "two replicas of a partition hold different records below both their high watermarks",
    "under-replicated": "after healing or after a restart, a replica stayed out of the ISR, or short of what the leader held (its log end under load, its high watermark after healing), past the deadline",
    "replica-unanswered": "a broker holding a replica gave no log state to a replica comparison (a failure, not a smaller comparison)",
    "hw-backwards": "a partition's high watermark went down: someone (a consumer, the observer, the final read) was told one lower than was told before, in real time or in its own order",
    "log-start-backwards": "a partition's log start offset went down, in the same sense",
    "final-read-gap": "the final read got no record at an offset between the log start and where it ended (offsets are dense)",
    "unsent-value": "a read returned a value that no producer sent to that partition",
    "read-above-hw": "a read returned a record at or above the high watermark the same answer reported",
}


@dataclass(frozen=True)
class Anomaly:
    """One finding: its kind, the partition, a sentence for people and the facts behind it."""

    kind: str
    partition: int
    message: str
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"unknown anomaly kind {self.kind!r}"
