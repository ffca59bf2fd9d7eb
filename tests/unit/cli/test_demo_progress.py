"""The demo's counters hide nothing: failed and unknown outcomes apart, and partitions that
stopped being answered are named."""

from cli.demo import Progress
from data_plane.client.errors import KraftlogError


def test_failed_and_unknown_are_counted_apart():
    progress = Progress(2)
    for p in (0, 0, 1):
        progress.on_sent(p)
    progress.on_answer(0, None, 1.0)
    progress.on_answer(0, KraftlogError("DELIVERY_TIMEOUT", "x"), 1.0)
    progress.on_answer(1, KraftlogError("DELIVERY_TIMEOUT", "y", outcome_unknown=True), 1.0)
    line = progress.line(1.0, 0, 0, 1.0)
    assert (progress.acked, progress.failed, progress.unknown) == (1, 1, 1)
    assert "failed=1" in line and "unknown=1" in line and "last_error=p1: DELIVERY_TIMEOUT" in line


def test_a_partition_without_answers_is_named_until_it_moves():
    progress = Progress(3)
    start = progress.last_ack_s[0]
    for p in (0, 1, 2):
        progress.on_sent(p)
    progress.on_answer(0, None, start + 9)
    assert set(progress.stalled(start + 10, after_s=5)) == {1, 2}  # 0 answered, 1 and 2 silent
    assert "stalled=p1(10s),p2(10s)" in progress.line(10, 0, 0, start + 10)
    progress.on_answer(1, None, start + 11)
    progress.on_sent(0)
    assert set(progress.stalled(start + 12, after_s=5)) == {2}  # 0 waits only 3 s


def test_an_idle_partition_with_nothing_waiting_is_not_stalled():
    progress = Progress(1)
    progress.on_sent(0)
    progress.on_answer(0, None, progress.last_ack_s[0])
    assert progress.stalled(progress.last_ack_s[0] + 60, after_s=5) == {}
