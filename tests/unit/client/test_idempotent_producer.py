"""The idempotent producer against a broker that applies the real sequence rules
(FakeBroker uses data_plane/replication/producer_state.py): lost answers, gaps and refused
sequences end with every partition's values stored once each, in send order, with a new
producer id starting at sequence 0; a gap that cannot heal fails the records within
delivery_timeout_ms instead of retrying forever."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from data_plane.client import KraftlogError, Producer
from data_plane.record_batch import encode_batch
from kraftlog_proto import broker_pb2, common_pb2
from server_common.waiting import wait_for
from tests.unit.client.fake_broker import FakeBroker

TP = ("one", 0)


@pytest.fixture
def broker():
    with FakeBroker({"t": 3, "one": 1}) as fake:
        yield fake


def stored_values(broker, tp):
    return [int(v) for batch in broker.stored(tp) for v in batch.values]


def check_in_order_and_unique(values: list[int]) -> None:
    """What every test here requires of a partition: strictly increasing values."""
    bad = [(a, b) for a, b in zip(values, values[1:]) if b <= a]
    assert not bad, f"values reordered or duplicated at {bad[:5]}"


def test_the_order_check_catches_reordering_and_duplicates():
    check_in_order_and_unique([1, 2, 5])
    for bad in ([1, 3, 2], [1, 2, 2]):
        with pytest.raises(AssertionError):
            check_in_order_and_unique(bad)


def assert_stored_once_in_order(broker, futures, count: int) -> None:
    """Every future succeeded and the partition holds values 0..count-1, each once, in order."""
    assert all(f.exception() is None for f in futures)
    values = stored_values(broker, TP)
    check_in_order_and_unique(values)
    assert values == list(range(count))


def producer_ids_and_first_sequences(broker, tp):
    """Each producer id in the partition's log with the sequence of its first stored batch."""
    firsts: dict[int, int] = {}
    for batch in broker.stored(tp):
        firsts.setdefault(batch.header.producer_id, batch.header.base_sequence)
    return firsts


def test_a_lost_answer_is_retried_and_recognised_as_a_duplicate(broker):
    broker.lose_answer[TP].append(common_pb2.REQUEST_TIMED_OUT)
    with Producer(broker.address, linger_ms=0, retry_backoff_ms=10) as producer:
        futures = [producer.send("one", str(i).encode()) for i in range(50)]
        producer.flush(10)
    assert [f.result().offset for f in futures] == list(range(50))
    assert stored_values(broker, TP) == list(range(50))


def test_out_of_order_answer_renumbers_under_a_new_producer_id_from_zero(broker):
    """The leader lost track of us (as after an unclean restart): the partition moves to a new
    producer id at sequence 0; nothing acknowledged is sent again."""
    with Producer(broker.address, linger_ms=0, retry_backoff_ms=10) as producer:
        for i in range(20):
            producer.send("one", str(i).encode())
        producer.flush(10)
        broker.fail_produce[TP].append(common_pb2.OUT_OF_ORDER_SEQUENCE)
        futures = [producer.send("one", str(i).encode()) for i in range(20, 60)]
        producer.flush(10)
    assert_stored_once_in_order(broker, futures, 60)
    assert producer_ids_and_first_sequences(broker, TP) == {1000: 0, 1001: 0}


def test_a_batch_that_fails_after_it_was_written_leaves_no_gap_no_duplicate_no_reorder(broker):
    """The first batch is written but its answer lost, then its retries are refused until its
    delivery timeout: it fails as 'outcome unknown', the records behind it go out under a new
    producer id, and each value is stored once, in order."""
    broker.lose_answer[TP].append(common_pb2.REQUEST_TIMED_OUT)

    def refuse_from_now_on(tp):
        broker.fail_produce[tp].extend([common_pb2.NOT_LEADER_OR_FOLLOWER] * 10_000)
        broker.on_append = None

    broker.on_append = refuse_from_now_on
    with Producer(broker.address, linger_ms=0, retry_backoff_ms=10, retry_backoff_max_ms=20,
                  delivery_timeout_ms=400) as producer:
        first = producer.send("one", b"0")
        with pytest.raises(KraftlogError) as err:
            first.result(10)
        broker.fail_produce[TP].clear()
        futures = [producer.send("one", str(i).encode()) for i in range(1, 30)]
        producer.flush(10)
    assert err.value.code == "DELIVERY_TIMEOUT" and err.value.outcome_unknown
    assert_stored_once_in_order(broker, futures, 30)  # value 0 was written by the attempt whose answer was lost
    assert producer_ids_and_first_sequences(broker, TP) == {1000: 0, 1001: 0}


def test_a_gap_never_becomes_a_livelock(broker):
    """A leader that refuses every sequence: records fail with DELIVERY_TIMEOUT (naming the
    last error) within the timeout, then the producer works again once the leader does."""
    broker.fail_produce[TP].extend([common_pb2.OUT_OF_ORDER_SEQUENCE] * 10_000)
    with Producer(broker.address, linger_ms=0, retry_backoff_ms=10, retry_backoff_max_ms=20,
                  delivery_timeout_ms=500) as producer:
        stuck = [producer.send("one", str(i).encode()) for i in range(5)]
        errors = [f.exception(10) for f in stuck]
        broker.fail_produce[TP].clear()
        later = [producer.send("one", str(i).encode()) for i in range(5, 10)]
        producer.flush(10)
    assert all(e is not None and e.code == "DELIVERY_TIMEOUT" and "OUT_OF_ORDER_SEQUENCE" in str(e) for e in errors)
    assert not any(e.outcome_unknown for e in errors)  # the leader said plainly: not written
    assert all(f.exception() is None for f in later)
    assert stored_values(broker, TP) == list(range(5, 10))


def test_one_in_flight_per_partition_never_carries_one_partition_twice(broker):
    """With max_in_flight_per_partition=1, max_in_flight_per_broker pipelines partitions, but
    one partition is in one request at a time: with a slow partition the others go on and
    every partition stays in order."""
    broker.produce_delay_s[("t", 0)] = 0.05
    with Producer(broker.address, linger_ms=1, batch_size=2000, max_in_flight_per_broker=5,
                  max_in_flight_per_partition=1) as producer:
        for i in range(3000):
            producer.send("t", str(i).encode(), partition=i % 3)
        producer.flush(30)
    assert broker.overlaps == 0
    for p in range(3):
        assert stored_values(broker, ("t", p)) == list(range(p, 3000, 3))


def test_the_overlap_counter_sees_two_requests_for_one_partition(broker):
    """Negative control for the test above: two concurrent requests for one partition count."""
    broker.produce_delay_s[TP] = 0.3
    request = broker_pb2.ProduceRequest(acks=1, topics=[broker_pb2.TopicProduceData(
        topic="one", partitions=[broker_pb2.PartitionProduceData(partition=0, batches=encode_batch([b"1"]))])])
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: broker.Produce(request, None), range(2)))
    assert broker.overlaps == 1


def test_five_in_flight_a_request_overtaken_by_later_ones_keeps_the_partition_in_order(broker):
    """Five requests of one partition in flight; the first is held at the broker so the later
    ones reach the leader before it and are refused (OUT_OF_ORDER_SEQUENCE): they are retried
    in sequence order, the partition keeps its producer id, and its log is in send order."""
    with Producer(broker.address, linger_ms=0, batch_size=100, retry_backoff_ms=5) as producer:
        producer.send("one", b"0").result(10)  # the leader now knows the producer id
        broker.delay_next_s[TP].append(0.5)
        futures = []
        for i in range(1, 6):  # one request each: the next is sent once the broker has the last
            requests = broker.produce_requests
            futures.append(producer.send("one", str(i).encode()))
            wait_for(lambda: broker.produce_requests > requests, 5, "the request to reach the broker")
        futures += [producer.send("one", str(i).encode()) for i in range(6, 40)]
        producer.flush(10)
    assert broker.overlaps > 0  # several requests of the partition were at the broker at once
    assert all(f.exception() is None for f in futures)
    assert stored_values(broker, TP) == list(range(40))
    assert producer_ids_and_first_sequences(broker, TP) == {1000: 0}


def test_no_broker_answering_metadata_while_getting_a_producer_id_is_waited_out(broker):
    """Every broker refusing Metadata (as while all restart) delays the producer id; it does
    not make the producer fail for good."""
    broker.metadata_unavailable = True
    with Producer(broker.address, linger_ms=0, retry_backoff_ms=10) as producer:
        wait_for(lambda: broker.init_producer_ids == 0 and broker.metadata_refusals >= 2, 5, "two refused metadata requests")
        broker.metadata_unavailable = False
        assert producer.send("one", b"0").result(10).offset == 0
    assert stored_values(broker, TP) == [0]


def test_max_in_flight_per_partition_is_refused_above_five_with_idempotence(broker):
    with pytest.raises(ValueError, match="max_in_flight_per_partition=6"):
        Producer(broker.address, max_in_flight_per_partition=6)


def test_a_lost_answer_to_a_request_of_many_batches_duplicates_nothing(broker):
    """A backlog (as after a restart) goes out in one request; its answer is lost. The leader
    remembers five batches per producer, so a request carries at most five of a partition:
    each retry is recognised as a duplicate instead of starting a gap (and a livelock)."""
    broker.produce_delay_s[TP] = 0.3  # the first request is slow: a backlog builds behind it

    def lose_the_answer_once_the_backlog_is_written(tp):
        if len(broker.batches[tp]) > 1:
            broker.lose_answer[tp].append(common_pb2.REQUEST_TIMED_OUT)
            broker.on_append = None
            broker.produce_delay_s.clear()

    broker.on_append = lose_the_answer_once_the_backlog_is_written
    with Producer(broker.address, linger_ms=0, batch_size=200, retry_backoff_ms=10, delivery_timeout_ms=5_000) as producer:
        producer.send("one", b"0")
        futures = [producer.send("one", str(i).encode()) for i in range(1, 200)]
        producer.flush(10)
    assert_stored_once_in_order(broker, futures, 200)
