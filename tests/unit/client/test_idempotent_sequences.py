"""The idempotent producer's numbering rules in the accumulator (idempotence.py): a partition
resets only after its in-flight requests came back, resolves batches of unknown outcome under
their old producer id first, then renumbers what is left from 0 in the original order; other
partitions keep their numbering; at most five batches of a partition are unresolved."""

from data_plane.client.idempotence import BATCHES_UNRESOLVED_MAX
from data_plane.client.producer_batch import record_size_bytes
from data_plane.client.producer_options import ProducerOptions
from data_plane.client.record_accumulator import RecordAccumulator

A, B = ("a", 0), ("b", 0)


def leader_of(tp):
    return 1


def make():
    """One 100-byte record fills a batch, so each `add` is one batch."""
    acc = RecordAccumulator(ProducerOptions(batch_size=100, linger_ms=0, max_request_size=10_000, max_in_flight_per_partition=1))
    acc.new_producer_id(7, 0)
    return acc


def add(acc, tp, value):
    value = value.ljust(84, b".")
    acc.append(tp, value, None, None, 0, record_size_bytes(value, None, None), 0)


def numbers(batches):
    return [(b.producer_id, b.base_sequence) for b in batches]


def answer_retriably(acc, batches, now=10):
    """The request came back with a retriable error: re-queue (last first), request done."""
    for batch in reversed(batches):
        acc.reenqueue(batch, now, 0)
    for tp in {batch.tp for batch in batches}:
        acc.request_done(tp)


def drain_all(acc, now=10):
    """Drains until the queues are empty, each request answered with success."""
    out = []
    while batches := acc.drain({1}, leader_of, now).get(1, []):
        out += batches
        for batch in batches:
            acc.completed(batch, delivered=True)
        for tp in {batch.tp for batch in batches}:
            acc.request_done(tp)
    return out


def test_out_of_order_answer_resets_the_partition_from_zero_in_the_original_order():
    acc = make()
    for v in (b"0", b"1", b"2"):
        add(acc, A, v)
    assert numbers(drain_all(acc)[:1]) == [(7, 0)]
    for v in (b"3", b"4", b"5"):
        add(acc, A, v)
    sent = acc.drain({1}, leader_of, 10)[1]
    assert numbers(sent) == [(7, 3), (7, 4), (7, 5)]
    for batch in sent:
        acc.out_of_order(batch, reset=not batch.sent_behind_unresolved)
    answer_retriably(acc, sent)
    assert acc.needs_new_producer_id()
    assert acc.ready(10, leader_of).ready_nodes == set()  # nothing goes out under the old id
    assert acc.drain({1}, leader_of, 10) == {}
    acc.new_producer_id(8, 0)
    assert not acc.needs_new_producer_id()
    resent = drain_all(acc)
    assert resent == sent and numbers(resent) == [(8, 0), (8, 1), (8, 2)]


def test_a_batch_of_unknown_outcome_is_retried_under_its_old_id_before_the_reset():
    acc = make()
    add(acc, A, b"acknowledged")
    drain_all(acc)
    for v in (b"0", b"1"):
        add(acc, A, v)
    sent = acc.drain({1}, leader_of, 10)[1]
    for batch in sent:
        batch.outcome_unknown = True  # the request timed out: both may be in the log
    answer_retriably(acc, sent)
    acc.expire(10_000, 1)  # both expire in the queue; the sender fails the first ...
    first, second = sent
    acc.batch_failed(first)
    acc.completed(first)
    acc.reenqueue(second, 10, 0)  # ... and (for this test) keeps the second
    acc.new_producer_id(8, 0)
    retry = acc.drain({1}, leader_of, 10)[1]
    assert retry == [second] and numbers(retry) == [(7, 2)]  # would be a duplicate if written
    acc.request_done(A)
    acc.out_of_order(second, reset=not second.sent_behind_unresolved)  # it was not written: now it may be renumbered
    acc.reenqueue(second, 10, 0)
    add(acc, A, b"2")
    assert numbers(drain_all(acc)) == [(8, 0), (8, 1)]


def test_the_reset_waits_for_the_partitions_request_in_flight():
    acc = make()
    add(acc, A, b"0")
    in_flight = acc.drain({1}, leader_of, 10)[1]
    add(acc, A, b"1")
    acc.batch_failed(in_flight[0])  # say it failed for good while a later one queues
    acc.new_producer_id(8, 0)
    assert acc.drain({1}, leader_of, 10) == {}  # its request has not come back
    acc.request_done(A)
    assert numbers(drain_all(acc)) == [(8, 0)]


def test_other_partitions_keep_their_producer_id_and_numbering():
    acc = make()
    add(acc, A, b"a0")
    add(acc, B, b"b0")
    first = drain_all(acc)
    acc.batch_failed(next(b for b in first if b.tp == A))
    acc.new_producer_id(8, 0)
    add(acc, A, b"a1")
    add(acc, B, b"b1")
    later = {b.tp: (b.producer_id, b.base_sequence) for b in drain_all(acc)}
    assert later == {A: (8, 0), B: (7, 1)}


def test_a_request_carries_at_most_five_batches_of_a_partition():
    """The leader remembers a producer's last five batches: a retry of any batch that may be
    in the log must still be recognised as a duplicate. Until the leader has acknowledged a
    batch of the producer id, one goes alone (a leader that holds none accepts any sequence)."""
    acc = make()
    for i in range(BATCHES_UNRESOLVED_MAX + 3):
        add(acc, A, str(i).encode())
    (first,) = acc.drain({1}, leader_of, 10)[1]
    acc.completed(first, delivered=True)
    acc.request_done(A)
    assert len(acc.drain({1}, leader_of, 10)[1]) == BATCHES_UNRESOLVED_MAX


def test_a_renumbered_batch_is_encoded_again_with_its_new_numbers():
    from data_plane import record_batch

    acc = make()
    add(acc, A, b"0")
    batch = acc.drain({1}, leader_of, 10)[1][0]
    first = record_batch.decode_batch(batch.encode("lz4"))
    acc.out_of_order(batch, reset=not batch.sent_behind_unresolved)
    answer_retriably(acc, [batch])
    acc.new_producer_id(8, 3)
    assert drain_all(acc) == [batch]
    again = record_batch.decode_batch(batch.encode("lz4"))
    assert (first.header.producer_id, first.header.base_sequence) == (7, 0)
    assert (again.header.producer_id, again.header.producer_epoch, again.header.base_sequence) == (8, 3, 0)
    assert again.values == first.values and again.timestamps == first.timestamps
    assert again.header.compression == "lz4"
