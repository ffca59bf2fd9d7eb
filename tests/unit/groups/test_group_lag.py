"""The consumer-group lag metric's pure core: lag per group and partition from committed
offsets and end offsets, never below 0, unknown ends left out, and the series bounded to
the largest lags with what was left out counted."""

from __future__ import annotations

from data_plane.groups.group_lag import PartitionLag, committed_partitions, group_lag
from data_plane.groups.state import CommittedOffset, Group


def group(group_id: str, **offsets: int) -> Group:
    g = Group(group_id)
    g.offsets = {("t", int(p[1:])): CommittedOffset(o) for p, o in offsets.items()}
    return g


def test_lag_is_the_end_minus_the_committed_offset_and_unknown_ends_are_left_out() -> None:
    groups = [group("a", p0=2, p1=7, p2=3), group("b", p0=10)]
    assert committed_partitions(groups) == {("t", 0), ("t", 1), ("t", 2)}
    lag = group_lag(groups, {("t", 0): 10, ("t", 1): 5}, max_series=10)  # t-2's end unknown; t-1 committed past the end
    assert lag.partitions == [PartitionLag("a", "t", 0, 8), PartitionLag("a", "t", 1, 0), PartitionLag("b", "t", 0, 0)]
    assert lag.group_totals == [("a", 8), ("b", 0)]
    assert (lag.partitions_omitted, lag.groups_omitted) == (0, 0)


def test_only_the_largest_lags_are_exported_and_the_rest_is_counted() -> None:
    groups = [group(f"g{i}", p0=i, p1=2 * i) for i in range(50)]
    lag = group_lag(groups, {("t", 0): 100, ("t", 1): 100}, max_series=3)
    assert lag.partitions == [PartitionLag("g0", "t", 0, 100), PartitionLag("g0", "t", 1, 100), PartitionLag("g1", "t", 0, 99)]
    assert lag.group_totals == [("g0", 200), ("g1", 197), ("g2", 194)]
    assert (lag.partitions_omitted, lag.groups_omitted) == (97, 47)
    assert group_lag(groups, {("t", 0): 100}, max_series=0).partitions == []
