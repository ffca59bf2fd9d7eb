"""What the link emulator (``chaos/link_emulator.py``) does to one packet: pure rules, so the
decisions are tested without devices or clocks.

A rule names a source and a destination address (None: any) and what happens to the packets
between them: a share dropped (``loss``, 1.0 for a cut link), a fixed ``delay_ms`` plus up to
``jitter_ms`` more (uniform), and with ``reorder`` only every other packet delayed, so the rest
overtakes it. Several rules may match a packet: a drop by any of them drops it, otherwise it
waits for the longest delay they draw. This is what ``tc netem`` gives on kernels that have it;
this kernel may not (``chaos/netns.py`` says which).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkRule:
    source: str | None  # an IPv4 address; None: every source
    destination: str | None  # None: every destination
    loss: float = 0.0  # the share of packets dropped, 0.0 to 1.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss is a share from 0.0 to 1.0, not {self.loss}")
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise ValueError(f"delay_ms and jitter_ms cannot be negative ({self.delay_ms}, {self.jitter_ms})")

    def matches(self, source: str, destination: str) -> bool:
        return self.source in (None, source) and self.destination in (None, destination)


class RuleTable:
    """The rules in force, by id; ``decide`` is the fate of one packet."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rules: dict[int, LinkRule] = {}
        self._rng = rng or random.Random()
        self._reorder_turn = False

    def add(self, rule_id: int, rule: LinkRule) -> None:
        self.rules[rule_id] = rule

    def remove(self, rule_id: int) -> None:
        self.rules.pop(rule_id, None)

    def decide(self, source: str, destination: str) -> float | None:
        """Seconds the packet waits before delivery (0.0: at once), or None: dropped."""
        delay_s = 0.0
        for rule in self.rules.values():
            if not rule.matches(source, destination):
                continue
            if rule.loss and (rule.loss >= 1.0 or self._rng.random() < rule.loss):
                return None
            if rule.reorder:
                self._reorder_turn = not self._reorder_turn
                if not self._reorder_turn:
                    continue  # this packet passes undelayed and overtakes the one before
            drawn = rule.delay_ms + (self._rng.uniform(0.0, rule.jitter_ms) if rule.jitter_ms else 0.0)
            delay_s = max(delay_s, drawn / 1000.0)
        return delay_s
