"""The reopen schedule of replicas whose log went offline: a first try soon, then a wait
doubling up to a cap while it fails, forgotten once the replica is no longer offline."""

from __future__ import annotations

from data_plane.broker.offline_recovery import ReopenBackoff


def test_an_offline_replica_is_tried_after_a_wait_that_doubles_while_it_fails() -> None:
    backoff = ReopenBackoff(first_s=1.0, max_s=4.0)
    tp = ("t", 0)
    assert backoff.due([tp], now=0.0) == []  # just went offline: tried after first_s
    assert backoff.due([tp], now=1.0) == [tp]
    assert [backoff.failed(tp, now) for now in (1.0, 3.0, 7.0, 11.0)] == [2.0, 4.0, 4.0, 4.0]
    assert backoff.due([tp], now=14.9) == [] and backoff.due([tp], now=15.0) == [tp]
    assert backoff.due([], now=16.0) == []  # back online: forgotten
    assert backoff.due([tp], now=16.0) == [] and backoff.due([tp], now=17.0) == [tp]  # offline again: a fresh first wait
