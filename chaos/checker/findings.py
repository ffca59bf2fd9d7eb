"""What the checks of a run with its own workload (a consumer group's, transactions') report:
findings of the kinds their module names, grouped the way the verdict, the CLI and the soak
read the records checker's ``CheckResult``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Finding:
    """One anomaly: its kind (one of ``kinds``), the partition, a sentence and the facts."""

    kinds: ClassVar[dict[str, str]] = {}
    kind: str
    partition: int
    message: str
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in self.kinds, f"unknown anomaly kind {self.kind!r}"


class Findings:
    """A run's findings; subclasses name their kinds (in report order) in ``kinds``."""

    kinds: ClassVar[dict[str, str]] = {}
    anomalies: list

    @property
    def valid(self) -> bool:
        return not self.anomalies

    @property
    def by_kind(self) -> dict[str, list]:
        """Anomalies grouped by kind, in the order of ``kinds``."""
        return {kind: found for kind in self.kinds if (found := [a for a in self.anomalies if a.kind == kind])}
