"""Batching rules: when a partition is ready, how drains group by broker, retries, expiry,
and the memory budget that makes `send` block instead of growing without bound."""

import threading
import time

import pytest

from data_plane.client.buffer_memory import BufferMemory
from data_plane.client.errors import KraftlogError
from data_plane.client.producer_batch import ProducerBatch, record_size_bytes
from data_plane.client.producer_options import ProducerOptions
from data_plane.client.record_accumulator import RecordAccumulator
from server_common.waiting import wait_for

LEADERS = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1}


def leader_of(tp):
    return LEADERS.get(tp)


def make(batch_size=1000, linger_ms=5, request_max=10_000, in_flight_max=1):
    return RecordAccumulator(ProducerOptions(batch_size=batch_size, linger_ms=linger_ms, max_request_size=request_max,
                                             max_in_flight_per_partition=in_flight_max))


def add(acc, tp, now, value=b"x" * 84, key=None, **kw):
    size = record_size_bytes(value, key, None)
    return acc.append(tp, value, key, None, 0, size, now, **kw)


def in_flight(acc, tp, now=0):
    """Put one request for ``tp`` in flight (a first record, drained), so that the next
    batch of ``tp`` lingers."""
    add(acc, tp, now=now)
    assert [b.tp for b in acc.drain({LEADERS[tp]}, leader_of, now)[LEADERS[tp]]] == [tp]


def test_a_lone_record_is_ready_at_once():
    acc = make(linger_ms=5)
    add(acc, ("a", 0), now=100)
    assert acc.ready(100, leader_of).ready_nodes == {1}


def test_batch_waits_for_linger_while_a_request_is_in_flight_then_is_ready():
    acc = make(linger_ms=5, in_flight_max=2)
    in_flight(acc, ("a", 0), now=99)
    add(acc, ("a", 0), now=100)
    check = acc.ready(102, leader_of)
    assert check.ready_nodes == set() and check.next_ready_ms == 105
    assert acc.ready(105, leader_of).ready_nodes == {1}
    acc.request_done(("a", 0))  # the answer came back first: nothing to wait for now
    assert acc.ready(102, leader_of).ready_nodes == {1}


def test_full_batch_is_ready_at_once_and_the_next_record_opens_a_new_batch():
    acc = make(batch_size=1000)
    results = [add(acc, ("a", 0), now=100) for _ in range(10)]  # 10 x 100 bytes
    assert results[-1].wake_sender and not results[5].wake_sender
    assert acc.ready(100, leader_of).ready_nodes == {1}
    eleventh = add(acc, ("a", 0), now=100)
    assert eleventh.batch is not results[0].batch and eleventh.index == 0 and eleventh.wake_sender


def test_flush_close_and_memory_pressure_make_everything_ready():
    acc = make(in_flight_max=2)
    in_flight(acc, ("a", 0), now=100)
    add(acc, ("a", 0), now=100)
    assert acc.ready(100, leader_of, memory_waiters=1).ready_nodes == {1}
    pending = acc.begin_flush()
    assert len(pending) == 2 and acc.ready(100, leader_of).ready_nodes == {1}  # the one in flight too
    acc.end_flush()
    assert acc.ready(100, leader_of).ready_nodes == set()
    acc.begin_close()
    assert acc.ready(100, leader_of).ready_nodes == {1}


def test_unknown_leader_is_reported_not_drained():
    acc = make()
    add(acc, ("c", 0), now=0)
    check = acc.ready(1000, leader_of)
    assert check.unknown_leaders == {("c", 0)} and not check.ready_nodes


def test_drain_groups_by_leader_and_piggybacks_partitions_not_yet_ready():
    acc = make(linger_ms=5, in_flight_max=2)
    in_flight(acc, ("b", 0), now=9)
    add(acc, ("a", 0), now=0)
    add(acc, ("b", 0), now=9)  # same leader, not lingered enough: rides along
    add(acc, ("a", 1), now=0)
    assert acc.ready(10, leader_of).ready_nodes == {1, 2}
    drained = acc.drain({1}, leader_of, 10)
    assert sorted(b.tp for b in drained[1]) == [("a", 0), ("b", 0)]
    assert 2 not in drained
    assert all(b.closed for b in drained[1])


def test_drain_respects_request_size_but_always_sends_one_batch():
    acc = make(batch_size=1000, request_max=2500)
    for _ in range(50):  # five full batches of 1000 bytes
        add(acc, ("a", 0), now=0)
    drained = acc.drain({1}, leader_of, 0)[1]
    assert [b.size_bytes for b in drained] == [1000, 1000]
    big = make(batch_size=1000, request_max=1000)
    add(big, ("a", 0), now=0, value=b"x" * 5000)  # a single oversized record gets its own batch
    assert len(big.drain({1}, leader_of, 0)[1]) == 1


def test_bulk_batch_keeps_order_with_send():
    acc = make()
    first = add(acc, ("a", 0), now=0)
    acc.append_bulk(ProducerBatch.bulk(("a", 0), 0, [b"1", b"2"], None, 40, 0))
    after = add(acc, ("a", 0), now=0)
    assert after.batch is not first.batch
    drained = acc.drain({1}, leader_of, 100)[1]
    assert [b.record_count for b in drained] == [1, 2, 1]


def test_reenqueue_goes_first_and_waits_for_backoff():
    acc = make()
    add(acc, ("a", 0), now=0)
    (failed,) = acc.drain({1}, leader_of, 10)[1]
    add(acc, ("a", 0), now=10)
    acc.reenqueue(failed, now_ms=20, backoff_ms=100)
    acc.request_done(("a", 0))
    check = acc.ready(50, leader_of)
    assert not check.ready_nodes and check.next_ready_ms == 120
    assert acc.drain({1}, leader_of, 50) == {}
    drained = acc.drain({1}, leader_of, 120)[1]
    assert drained[0] is failed and failed.attempts == 1


def test_a_retry_skips_its_backoff_once_the_partition_has_a_newer_leader():
    """KIP-951: after a failover the back-off only lengthens the stall; a refresh showing
    the same leader epoch leaves the back-off in place."""
    acc = make()
    add(acc, ("a", 0), now=0)
    (failed,) = acc.drain({1}, leader_of, 10)[1]
    failed.leader_epoch = 4
    acc.reenqueue(failed, now_ms=20, backoff_ms=100)
    acc.request_done(("a", 0))
    acc.retry_where_leader_moved(lambda tp: 4)
    assert acc.ready(50, leader_of).ready_nodes == set()
    acc.retry_where_leader_moved(lambda tp: 5)
    assert acc.ready(50, leader_of).ready_nodes == {1}
    assert acc.drain({1}, leader_of, 50)[1] == [failed]


def test_expire_removes_batches_older_than_delivery_timeout():
    acc = make()
    add(acc, ("c", 0), now=0)  # no leader: would wait forever without expiry
    assert acc.expire(now_ms=999, delivery_timeout_ms=1000) == []
    (expired,) = acc.expire(now_ms=1000, delivery_timeout_ms=1000)
    assert expired.tp == ("c", 0) and not acc.has_queued()


def test_a_partition_has_one_request_in_flight_so_its_records_stay_in_order():
    acc = make(batch_size=100)
    add(acc, ("a", 0), now=0)
    add(acc, ("b", 0), now=0)
    assert len(acc.drain({1}, leader_of, 10)[1]) == 2
    add(acc, ("a", 0), now=10)
    add(acc, ("b", 0), now=10)
    acc.request_done(("b", 0))  # b's request came back, a's has not
    assert acc.ready(20, leader_of).ready_nodes == {1}
    assert [b.tp for b in acc.drain({1}, leader_of, 20)[1]] == [("b", 0)]


def test_idempotent_drain_assigns_sequences_once():
    acc = make(batch_size=100)
    acc.producer_id, acc.producer_epoch = 7, 0
    add(acc, ("a", 0), now=0)
    (first,) = acc.drain({1}, leader_of, 10)[1]  # alone: the leader does not know the producer id yet
    acc.completed(first, delivered=True)
    acc.request_done(("a", 0))
    for _ in range(3):
        add(acc, ("a", 0), now=0)
    drained = acc.drain({1}, leader_of, 10)[1]
    assert [b.base_sequence for b in drained] == [1, 2, 3]
    for batch in reversed(drained):
        acc.reenqueue(batch, 10, 0)
    acc.request_done(("a", 0))
    add(acc, ("a", 0), now=10)
    resent = []
    for _ in range(4):
        batches = acc.drain({1}, leader_of, 10)[1]
        assert len(batches) == 1  # a retry goes alone (and the new batch after the retries)
        resent += batches
        acc.completed(batches[0], delivered=True)  # the next retry waits until this one is resolved
        acc.request_done(("a", 0))
    assert resent[:3] == drained and [b.base_sequence for b in resent] == [1, 2, 3, 4]  # retries keep theirs


def test_buffer_memory_blocks_then_times_out():
    memory = BufferMemory(1000)
    memory.reserve(900, 0)
    start = time.monotonic()
    with pytest.raises(KraftlogError) as err:
        memory.reserve(200, 0.05)
    assert err.value.code == "BUFFER_EXHAUSTED" and time.monotonic() - start >= 0.05
    assert memory.used_bytes == 900 and memory.waiters == 0


def test_buffer_memory_wakes_a_blocked_reserve_on_release():
    memory = BufferMemory(1000)
    memory.reserve(900, 0)
    done = threading.Event()

    def blocked():
        memory.reserve(200, 5)
        done.set()

    thread = threading.Thread(target=blocked)
    thread.start()
    wait_for(lambda: memory.waiters == 1, 5, "the reserve to block")
    assert not done.is_set()
    memory.release(900)
    thread.join(5)
    assert done.is_set() and memory.used_bytes == 200


def test_record_larger_than_the_buffer_is_refused_at_once():
    with pytest.raises(KraftlogError) as err:
        BufferMemory(100).reserve(101, 10)
    assert err.value.code == "MESSAGE_TOO_LARGE"
