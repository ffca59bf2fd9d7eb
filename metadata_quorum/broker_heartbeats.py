"""Broker liveness as the active controller sees it: last heartbeat time per broker.

Kept in memory on the active controller only (KIP-631): the quorum replicates decisions
(fence, unfence), never heartbeats. Time is passed in as ``now_ms`` so fencing is tested
without a clock. A newly active controller calls ``start_grace`` so that every registered
broker gets one full session before it can be fenced: the new controller has not heard from
anyone yet, which is not the brokers' fault. For the same reason, time during which the
controller itself could not have processed a heartbeat (its event loop stalled) is not held
against the brokers: ``credit_stall`` moves every session forward by that much.
"""

from __future__ import annotations

from typing import Iterable

DEFAULT_SESSION_TIMEOUT_MS = 9000


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[int, int] = {}

    def start_grace(self, broker_ids: Iterable[int], now_ms: int) -> None:
        """Forget what an earlier term knew and give every broker a full session from ``now_ms``."""
        self._last_contact_ms = {broker_id: now_ms for broker_id in broker_ids}

    def touch(self, broker_id: int, now_ms: int) -> None:
        """A heartbeat or registration from ``broker_id`` arrived at ``now_ms``."""
        self._last_contact_ms[broker_id] = max(now_ms, self._last_contact_ms.get(broker_id, now_ms))

    def credit_stall(self, stall_ms: int, now_ms: int) -> None:
        """The controller could not process heartbeats for ``stall_ms`` up to ``now_ms``:
        heartbeats that arrived meanwhile were not seen, so sessions are judged as if the
        stall had not happened (never beyond ``now_ms``)."""
        assert stall_ms >= 0
        self._last_contact_ms = {b: min(now_ms, last + stall_ms) for b, last in self._last_contact_ms.items()}

    def forget(self, broker_id: int) -> None:
        self._last_contact_ms.pop(broker_id, None)

    def is_alive(self, broker_id: int, now_ms: int) -> bool:
        """Heard from within the session timeout (unknown brokers are not alive)."""
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last <= self.session_timeout_ms

    def since_last_contact_ms(self, broker_id: int, now_ms: int) -> int | None:
        last = self._last_contact_ms.get(broker_id)
        return None if last is None else now_ms - last

    def expired(self, broker_ids: Iterable[int], now_ms: int) -> list[int]:
        """Those of ``broker_ids`` whose session ran out, sorted. A broker never heard of
        (registered before this controller's grace started) starts its session now."""
        out = []
        for broker_id in broker_ids:
            self._last_contact_ms.setdefault(broker_id, now_ms)
            if not self.is_alive(broker_id, now_ms):
                out.append(broker_id)
        return sorted(out)
