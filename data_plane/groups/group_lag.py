"""Consumer-group lag for the metrics, bounded in cardinality. Pure: groups and end offsets
in, the series to export out.

A group's lag on a partition is the partition's end offset (its high watermark, what
``kraftlog groups describe`` shows as LOG END) minus the group's committed offset there,
never below 0; a partition whose end offset is not known yet is left out (not exported as 0,
which would read as "caught up").

**Bounded.** Groups and partitions are the user's to multiply: one series per group and
partition would let a cluster of many groups, or a group on many partitions, grow a scrape
without limit. So at most ``max_series`` partition series are exported, those with the most
lag (the ones an alert cares about; ties by name, so a scrape is stable), and at most
``max_series`` per-group totals, again the largest; what was left out is counted, so a
dashboard can say that a figure is a top-N and not everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from data_plane.groups.state import Group, TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    lag: int


@dataclass(frozen=True, slots=True)
class BoundedLag:
    """What a scrape exports: the largest partition lags and group totals, and how many of each were left out."""

    partitions: list[PartitionLag]
    group_totals: list[tuple[str, int]]
    partitions_omitted: int
    groups_omitted: int


def committed_partitions(groups: Iterable[Group]) -> set[TopicPartition]:
    """The partitions the groups have committed offsets on: the end offsets a lag needs."""
    return {tp for group in groups for tp in group.offsets}


def group_lag(groups: Iterable[Group], end_offsets: Mapping[TopicPartition, int], max_series: int) -> BoundedLag:
    """Each group's lag on each partition it committed an offset for whose end is known, bounded to ``max_series``."""
    lags: list[PartitionLag] = []
    totals: dict[str, int] = {}
    for group in groups:
        for (topic, partition), committed in group.offsets.items():
            end = end_offsets.get((topic, partition))
            if end is None:
                continue
            lag = max(end - committed.offset, 0)
            lags.append(PartitionLag(group.group_id, topic, partition, lag))
            totals[group.group_id] = totals.get(group.group_id, 0) + lag
    lags.sort(key=lambda p: (-p.lag, p.group, p.topic, p.partition))
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return BoundedLag(lags[:max_series], ranked[:max_series], max(len(lags) - max_series, 0), max(len(ranked) - max_series, 0))
