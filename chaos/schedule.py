"""Fault schedules from a seed: the same seed and scenario give the same steps, so a run
that found something can be replayed.

A step names a fault, the role of its target (``leader``, ``follower``, ``broker``,
``active-controller``, ...) and a number ``pick`` that chooses among the candidates for
that role when the step runs (sorted, so the choice is the same whenever the cluster is in
the same state). Roles rather than broker ids, because which broker leads is only known
when the step runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FaultStep:
    """Apply ``fault`` to the target chosen for ``role`` at ``at_s``; heal after ``duration_s``."""

    at_s: float
    duration_s: float
    fault: str
    role: str
    pick: int
    params: dict = field(default_factory=dict)

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


@dataclass(frozen=True)
class FaultSpec:
    """One kind of step a scenario schedules: which fault, on whom, how long it lasts and
    how long the cluster gets to recover before the next step (seconds, drawn uniformly)."""

    fault: str
    role: str
    duration_s: tuple[float, float]
    gap_s: tuple[float, float]
    params: dict = field(default_factory=dict)


def generate(specs: list[FaultSpec], seed: int, duration_s: float, start_s: float = 5.0) -> list[FaultStep]:
    """Steps one after another from ``start_s``, each a spec drawn from ``specs``, until
    the next one would not end before ``duration_s``. Every schedule has a first step when
    any spec can fit at all: a first draw too long for the run is drawn again among the specs
    whose shortest step fits, its length cut to what is left (so a short soak run never goes
    without a fault)."""
    assert specs, "a schedule needs at least one fault"
    rng = random.Random(seed)
    steps: list[FaultStep] = []
    at_s = start_s
    while True:
        spec = rng.choice(specs)
        length = round(rng.uniform(*spec.duration_s), 2)
        if at_s + length > duration_s:
            if steps:
                return steps
            fitting = [s for s in specs if start_s + s.duration_s[0] <= duration_s]
            if not fitting:
                return steps
            spec = rng.choice(fitting)
            length = round(rng.uniform(spec.duration_s[0], min(spec.duration_s[1], duration_s - start_s)), 2)
        steps.append(FaultStep(round(at_s, 2), length, spec.fault, spec.role, rng.randrange(1 << 30), dict(spec.params)))
        at_s += length + rng.uniform(*spec.gap_s)
