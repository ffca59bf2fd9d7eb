"""The open-file budget of a broker's logs, as pure rules: how many handles, which to close.

A process may hold at most RLIMIT_NOFILE descriptors, and a broker needs some of them for
what is not a log: gRPC sockets (clients, replica fetch streams, the controllers), the
event loop's own descriptors, its log files, and the files it opens, writes and closes at
once (checkpoints, index files, the cleaner's segment). The logs get what is left, the
*budget*; a broker hosts more replicas than that because a replica's segment files are
opened when used and closed when idle (``file_handles.FileHandleCache``, the shell), the
least recently used first (``LruPolicy``, here).

No I/O, no clock: the shell feeds the policy uses and carries out its evictions.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)

RESERVE_MIN = 128  # descriptors kept for sockets and short-lived files, whatever the limit
RESERVE_MAX = 4096  # past this a quarter of a large limit would be idle
BUDGET_MIN = 16  # even a tiny limit leaves the logs a few handles (they then reopen often)
REPLICAS_PER_HANDLE = 8  # the capacity a budget implies (see replica_capacity)


def handle_budget(soft_limit: int) -> int:
    """Descriptors the logs may hold open under an open-file limit of ``soft_limit``: the limit
    minus a reserve of a quarter of it, at least RESERVE_MIN and at most RESERVE_MAX."""
    reserve = min(max(RESERVE_MIN, soft_limit // 4), RESERVE_MAX)
    return max(BUDGET_MIN, soft_limit - reserve)


def replica_capacity(budget: int) -> int:
    """How many replicas a broker with ``budget`` log handles offers to host.

    A replica idle holds no descriptor, so files alone do not bound it; what does is how
    often appends and reads must reopen files. With one handle per REPLICAS_PER_HANDLE
    replicas, an eighth of the hosted replicas (their active segments) can be written at
    once without a reopen; past that every replica still works, more slowly. Operators who
    know their traffic override it (``--max-replicas``)."""
    return budget * REPLICAS_PER_HANDLE


class LruPolicy(Generic[K]):
    """Which open handles to close: the least recently used once more than ``capacity`` are open.

    ``use`` is on the hot path (every append and read names its segment): a dict move, no
    allocation. ``admit`` is called before a handle is opened, so what it returns is closed
    first and the open never needs a descriptor over the budget.
    """

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, capacity
        self.capacity = capacity
        self._open: OrderedDict[K, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        return key in self._open

    def use(self, key: K) -> None:
        """``key``'s handle (open) was just used: it becomes the most recently used. A key the
        policy does not know (opened outside it) is taken in; the next ``admit`` sheds any excess."""
        try:
            self._open.move_to_end(key)
        except KeyError:
            self._open[key] = None

    def admit(self, key: K) -> list[K]:
        """``key`` is about to be opened: the keys to close first (least recently used first)."""
        self._open[key] = None
        self._open.move_to_end(key)
        return self._shed(self.capacity)

    def forget(self, key: K) -> None:
        """``key``'s handle was closed by its owner (or its open failed)."""
        self._open.pop(key, None)

    def resize(self, capacity: int) -> list[K]:
        """Set the capacity (at least 1): the keys to close when it shrank below what is open."""
        self.capacity = max(1, capacity)
        return self._shed(self.capacity)

    def _shed(self, keep: int) -> list[K]:
        evicted: list[K] = []
        while len(self._open) > keep:
            key, _ = self._open.popitem(last=False)
            evicted.append(key)
        return evicted
