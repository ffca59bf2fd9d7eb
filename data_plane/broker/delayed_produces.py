"""acks=all produces waiting for their partition's HW (Kafka's produce purgatory).

Each waiting produce is a future here and a token in its partition's core; a `Ready`'s
``completed`` outcomes resolve the futures. The number waiting is bounded: a broker whose
followers stall would otherwise collect one waiting produce per request until memory runs
out. At the bound, a new acks=all produce is refused before anything is appended, with a
retriable REQUEST_TIMED_OUT that says so.
"""

from __future__ import annotations

import asyncio

from data_plane.partition_errors import PartitionError
from server_common.errors import ErrorCode
from data_plane.replication.partition_state import ProduceOutcome

MAX_DELAYED_PRODUCES = 20_000  # per broker; each costs a future and a small record in its core


class DelayedProduces:
    def __init__(self, limit: int = MAX_DELAYED_PRODUCES) -> None:
        assert limit > 0, limit
        self.limit = limit
        self._futures: dict[int, asyncio.Future] = {}
        self._next_token = 0

    def __len__(self) -> int:
        return len(self._futures)

    def reserve(self, topic: str, partition: int) -> int:
        """A token for an acks=all produce, refused before its append when no more may wait;
        `park` it (with no await in between) once the append says it waits."""
        if len(self._futures) >= self.limit:
            raise PartitionError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{topic}-{partition}: {self.limit} acks=all produces already wait for replication on this broker; "
                "nothing was written: retry shortly (followers are behind; check their brokers)",
            )
        self._next_token += 1
        return self._next_token

    def park(self, token: int) -> asyncio.Future:
        """The future a reserved token's outcome (an ErrorCode) will resolve."""
        assert token not in self._futures and len(self._futures) < self.limit, (token, "reserve first")
        future = asyncio.get_running_loop().create_future()
        self._futures[token] = future
        return future

    def complete(self, outcomes: tuple[ProduceOutcome, ...]) -> None:
        for outcome in outcomes:
            future = self._futures.pop(outcome.token)  # type: ignore[arg-type]
            if not future.done():
                future.set_result(outcome.error)

