"""The backoff and warning pace of offset resets that got no answer (pending_resets.py): an
offline leader costs a request per partition at most every backoff_max_s and a warning at
most every warn_interval_s, however often poll runs."""

from __future__ import annotations

from data_plane.client.pending_resets import PendingResets

A, B = ("t", 0), ("t", 1)


def test_each_failure_doubles_the_wait_up_to_the_maximum() -> None:
    resets = PendingResets(backoff_s=0.1, backoff_max_s=0.4, warn_interval_s=5.0)
    assert resets.due([A, B], now=0.0) == [A, B] and resets.next_retry_in(0.0) is None
    waits = []
    now = 0.0
    for _ in range(5):
        resets.failed(A, now)
        waits.append(round(resets.retry_in(A, now), 6))
        assert resets.due([A, B], now) == [B]
        now += waits[-1]
        assert resets.due([A], now) == [A]
    assert waits == [0.1, 0.2, 0.4, 0.4, 0.4]
    assert resets.next_retry_in(now) == 0.0


def test_a_warning_is_due_at_the_first_failure_then_once_per_interval() -> None:
    resets = PendingResets(backoff_s=0.1, backoff_max_s=1.0, warn_interval_s=5.0)
    warned = [t for t in (0.0, 1.0, 2.0, 4.9, 5.0, 6.0, 10.1) if resets.failed(A, t)]
    assert warned == [0.0, 5.0, 10.1]


def test_a_resolved_or_unassigned_partition_starts_over() -> None:
    resets = PendingResets(backoff_s=0.1, backoff_max_s=1.0, warn_interval_s=5.0)
    resets.failed(A, 0.0)
    resets.failed(A, 0.1)
    resets.failed(B, 0.0)
    resets.resolved([A])
    assert A not in resets and resets.due([A], 0.1) == [A]
    assert resets.failed(A, 0.2) and round(resets.retry_in(A, 0.2), 6) == 0.1
    resets.keep_only({A})
    assert B not in resets and A in resets
