"""Each consumer group's total lag over time, kept by the console so that a group's chart is
filled when its page opens: the samples any viewer's live view took in the last
``KEEP_S`` seconds (at most one a second), not only those taken since this page opened. Pure:
the caller passes the time."""

from __future__ import annotations

from collections import deque

KEEP_S = 600.0  # ten minutes of history per group
SPACING_S = 1.0  # two viewers of one group add one sample a second, not two


class LagHistory:
    def __init__(self) -> None:
        self._groups: dict[str, deque[tuple[float, int]]] = {}

    def add(self, group_id: str, now_s: float, lag: int) -> list[tuple[float, int]]:
        """Record ``lag`` at ``now_s`` (replacing a sample less than SPACING_S old) and return
        the group's samples, oldest first; groups not seen for KEEP_S are forgotten."""
        samples = self._groups.setdefault(group_id, deque())
        if samples and now_s - samples[-1][0] < SPACING_S:
            samples.pop()
        samples.append((now_s, lag))
        while samples and now_s - samples[0][0] > KEEP_S:
            samples.popleft()
        for stale in [g for g, s in self._groups.items() if now_s - s[-1][0] > KEEP_S]:
            del self._groups[stale]
        return list(samples)
