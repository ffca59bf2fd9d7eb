"""Server-side assignors: a group's members and subscribed topics in, each member's target
assignment out. Pure and deterministic (same input, same output on every coordinator).

- ``uniform`` (the default) is sticky, like Kafka's: every partition stays with its previous
  owner while that owner still subscribes to its topic, new and orphaned partitions go to the
  least-loaded eligible member, and then single partitions move from the most- to the
  least-loaded eligible member only while their counts differ by more than one. A join or a
  leave therefore moves about as few partitions as a balanced result allows.
- ``sticky`` names the same algorithm (clients coming from Kafka's classic protocol ask for it).
- ``range`` gives each member a contiguous range of every topic it subscribes to (members
  sorted by id), ignoring the previous assignment: co-partitioned topics line up.
"""

from __future__ import annotations

from typing import Callable, Mapping

from data_plane.groups.state import NO_PARTITIONS, Partitions, TopicPartition

DEFAULT_ASSIGNOR = "uniform"

Subscriptions = Mapping[str, frozenset[str]]  # member id -> subscribed topics that exist
TopicCounts = Mapping[str, int]  # topic -> partition count
Assignment = dict[str, Partitions]


def uniform(subscriptions: Subscriptions, topics: TopicCounts, previous: Mapping[str, Partitions]) -> Assignment:
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    eligible: dict[str, list[str]] = {t: [m for m in members if t in subscriptions[m]] for t in sorted(topics)}
    all_partitions = [(t, p) for t in sorted(topics) for p in range(topics[t])]
    unassigned = []
    for tp in all_partitions:
        keeper = next((m for m in members if tp in previous.get(m, NO_PARTITIONS) and tp[0] in subscriptions[m]), None)
        if keeper is not None:
            owned[keeper].add(tp)
        else:
            unassigned.append(tp)
    for tp in unassigned:
        candidates = eligible[tp[0]]
        if candidates:
            owned[min(candidates, key=lambda m: (len(owned[m]), m))].add(tp)
    _balance(owned, eligible)
    return {m: frozenset(owned[m]) for m in members}


def _balance(owned: dict[str, set[TopicPartition]], eligible: dict[str, list[str]]) -> None:
    """Move one partition at a time from a member to an eligible one holding at least two
    fewer, until no such move exists. Each move lowers the sum of squared counts, so it ends."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[giver], reverse=True):
                taker = min(eligible[tp[0]], key=lambda m: (len(owned[m]), m))
                if len(owned[giver]) - len(owned[taker]) > 1:
                    owned[giver].remove(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_assignor(subscriptions: Subscriptions, topics: TopicCounts, previous: Mapping[str, Partitions]) -> Assignment:
    result: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted(topics):
        members = sorted(m for m in subscriptions if topic in subscriptions[m])
        if not members:
            continue
        per_member, extra = divmod(topics[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            count = per_member + (1 if i < extra else 0)
            result[member].update((topic, p) for p in range(start, start + count))
            start += count
    return {m: frozenset(ps) for m, ps in result.items()}


ASSIGNORS: dict[str, Callable[[Subscriptions, TopicCounts, Mapping[str, Partitions]], Assignment]] = {
    "uniform": uniform,
    "sticky": uniform,
    "range": range_assignor,
}
