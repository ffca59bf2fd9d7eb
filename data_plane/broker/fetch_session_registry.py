"""The leader's open fetch sessions, by follower broker: how a leadership change reaches them.

A follower's fetcher waits on one long poll at a time (`replica_fetcher.py`). When this broker
becomes leader of a partition, its followers must name it in their next request, but a follower
whose stream to this broker already exists is inside a long poll (up to the follower's
``replica.fetch.wait.max.ms``, 500 ms by default) and cannot send that request until the poll is
answered: the new leader's first acks=all writes would wait for it. So each of the partition's
followers is told to expect it (`FetchSession.expect`), which answers the held poll at once and
keeps later polls short until the follower names the partition. Kafka's fetcher threads have the
same wait; here the leader closes it because it knows who must come.
"""

from __future__ import annotations

from typing import Iterable, Protocol

TopicPartition = tuple[str, int]


class Expecting(Protocol):
    def expect(self, tp: TopicPartition) -> None: ...


class FetchSessionRegistry:
    """Open sessions by the follower broker that opened them (one stream per broker pair, so
    normally one each; two only while a reconnect overlaps the old stream's end)."""

    def __init__(self) -> None:
        self._by_replica: dict[int, set[Expecting]] = {}

    def add(self, replica_id: int, session: Expecting) -> None:
        self._by_replica.setdefault(replica_id, set()).add(session)

    def remove(self, replica_id: int, session: Expecting) -> None:
        sessions = self._by_replica.get(replica_id)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_replica[replica_id]

    def leading(self, tp: TopicPartition, followers: Iterable[int]) -> None:
        """This broker now leads ``tp``: its followers' sessions expect it."""
        for replica_id in followers:
            for session in self._by_replica.get(replica_id, ()):
                session.expect(tp)
