"""Producer, consumer and admin I/O against an in-memory broker: batching into few
requests, retries on leader errors, failures that must not be retried, and fetch positions."""

import time

import pytest

from data_plane.client import Admin, Consumer, KraftlogError, Producer
from kraftlog_proto import common_pb2
from tests.unit.client.fake_broker import FakeBroker


@pytest.fixture
def broker():
    with FakeBroker({"t": 3, "one": 1}) as fake:
        yield fake


def consume_all(address, tps, count, timeout_s=10):
    records = []
    with Consumer(address) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            records += consumer.poll(200)
    return records


def test_send_batches_many_records_into_few_requests_and_reads_back_in_order(broker):
    with Producer(broker.address, linger_ms=20) as producer:
        futures = [producer.send("t", b"%d" % i, key=b"%d" % (i % 7)) for i in range(5000)]
        producer.flush(10)
    assert broker.produce_requests <= 10
    metadata = [f.result() for f in futures]
    records = consume_all(broker.address, [("t", p) for p in range(3)], 5000)
    by_offset = {(r.partition, r.offset): r.value for r in records}
    assert all(by_offset[(m.partition, m.offset)] == b"%d" % i for i, m in enumerate(metadata))
    for p in range(3):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == list(range(len(offsets)))


def test_round_robin_producer_sends_record_after_record_to_the_next_partition(broker):
    with Producer(broker.address, linger_ms=20, partitioner="round-robin") as producer:
        futures = [producer.send("t", b"%d" % i, key=b"k" if i % 2 else None) for i in range(30)]
        producer.flush(10)
    assert [f.result().partition for f in futures] == [i % 3 for i in range(30)]
    assert all(f.result().offset == i // 3 for i, f in enumerate(futures))


def test_an_unknown_partitioner_is_refused(broker):
    with pytest.raises(ValueError, match="partitioner='hash'"):
        Producer(broker.address, partitioner="hash")


def test_send_batch_offsets_and_on_delivery(broker):
    delivered = []
    with Producer(broker.address) as producer:
        first = producer.send_batch("one", 0, [b"a", b"b", b"c"])
        single = producer.send("one", b"d", on_delivery=lambda err, md: delivered.append((err, md)))
        producer.flush(10)
    assert first.result().offset == 0 and single.result().offset == 3
    assert delivered == [(None, single.result())]


def test_not_leader_is_retried_after_the_hint(broker):
    broker.fail_produce[("one", 0)].extend([common_pb2.NOT_LEADER_OR_FOLLOWER, common_pb2.NOT_ENOUGH_REPLICAS])
    with Producer(broker.address, retry_backoff_ms=10) as producer:
        assert producer.send("one", b"v").result(10).offset == 0
    assert broker.produce_requests == 3


def test_non_retriable_error_fails_the_records(broker):
    broker.fail_produce[("one", 0)].append(common_pb2.CORRUPT_MESSAGE)
    with Producer(broker.address) as producer:
        future = producer.send("one", b"v")
        with pytest.raises(KraftlogError) as err:
            future.result(10)
    assert err.value.code == "CORRUPT_MESSAGE" and not err.value.retriable


def test_retries_stop_at_the_delivery_timeout(broker):
    broker.fail_produce[("one", 0)].extend([common_pb2.NOT_ENOUGH_REPLICAS] * 1000)
    with Producer(broker.address, retry_backoff_ms=20, delivery_timeout_ms=300) as producer:
        future = producer.send("one", b"v")
        with pytest.raises(KraftlogError) as err:
            future.result(10)
    assert err.value.code == "DELIVERY_TIMEOUT" and "NOT_ENOUGH_REPLICAS" in str(err.value)


def test_a_cluster_that_cannot_hand_out_producer_ids_is_waited_out(broker):
    """Every broker restarting at once: records time out meanwhile, the producer does not die."""
    broker.init_producer_id_error = common_pb2.BROKER_NOT_AVAILABLE
    with Producer(broker.address, retry_backoff_ms=20, delivery_timeout_ms=300) as producer:
        with pytest.raises(KraftlogError) as err:
            producer.send("one", b"early").result(10)
        assert err.value.code == "DELIVERY_TIMEOUT" and "BROKER_NOT_AVAILABLE" in str(err.value)
        broker.init_producer_id_error = None
        assert producer.send("one", b"later").result(10).offset == 0


def test_acks_zero_reports_offset_minus_one(broker):
    with Producer(broker.address, acks=0) as producer:
        assert producer.send("one", b"v").result(10).offset == -1


def test_unknown_topic_blocks_up_to_max_block_ms(broker):
    with Producer(broker.address, max_block_ms=300) as producer:
        with pytest.raises(KraftlogError) as err:
            producer.send("nope", b"v")
    assert err.value.code == "UNKNOWN_TOPIC_OR_PARTITION"


def test_a_wrong_address_is_reported_as_one_not_as_a_missing_topic():
    """A typo in the address must not send the user off to create a topic that exists."""
    with Producer("127.0.0.1:1", max_block_ms=300, enable_idempotence=False) as producer:
        with pytest.raises(KraftlogError) as err:
            producer.send("events", b"v")
    assert err.value.code == "NO_BROKER_REACHABLE", err.value
    assert "kraftlog cluster status" in str(err.value) and "create the topic" not in str(err.value)


def test_send_blocks_then_raises_when_buffer_memory_is_full():
    with Producer("127.0.0.1:1", buffer_memory=1000, max_block_ms=100, enable_idempotence=False) as producer:
        producer._metadata.want(["t"])
        with FakeBroker({"t": 1}) as fake:  # learn the topic, then lose the broker
            producer._metadata.bootstrap = [fake.address]
            producer.partitions_for("t")
        producer._metadata.invalidate(("t", 0))
        producer.send("t", b"x" * 900)
        with pytest.raises(KraftlogError) as err:
            producer.send("t", b"x" * 200)
        assert err.value.code == "BUFFER_EXHAUSTED"
        producer.close(timeout=0)


def test_consumer_seek_skips_records_below_the_position_inside_a_batch(broker):
    with Producer(broker.address) as producer:
        producer.send_batch("one", 0, [b"%d" % i for i in range(10)]).result(10)
    with Consumer(broker.address) as consumer:
        consumer.assign([("one", 0)])
        consumer.seek(("one", 0), 4)
        batches = consumer.poll_batches(2000)[("one", 0)]
        assert batches[0].offsets[0] == 4 and batches[0].header.record_count == 6
        assert consumer.position(("one", 0)) == 10
        consumer.seek(("one", 0), 7)
        assert [r.value for r in consumer.poll(2000)] == [b"7", b"8", b"9"]
        assert consumer.high_watermark(("one", 0)) == 10


def test_consumer_without_position_or_with_bad_offset_raises_clearly(broker):
    with Consumer(broker.address) as consumer:
        consumer.assign([("one", 0)])
        with pytest.raises(KraftlogError) as err:
            consumer.poll(10)
        assert err.value.code == "NO_POSITION"
        consumer.seek(("one", 0), 50)
        with pytest.raises(KraftlogError) as err:
            consumer.poll(2000)
        assert err.value.code == "OFFSET_OUT_OF_RANGE" and "seek_to_beginning" in str(err.value)


def test_consumer_auto_reset_latest_waits_for_new_records(broker):
    with Producer(broker.address) as producer:
        producer.send("one", b"old").result(10)
        with Consumer(broker.address, auto_offset_reset="latest", fetch_max_wait_ms=100) as consumer:
            consumer.assign([("one", 0)])
            assert consumer.poll(50) == [] and consumer.position(("one", 0)) == 1
            producer.send("one", b"new").result(10)
            deadline = time.monotonic() + 5
            records = []
            while not records and time.monotonic() < deadline:
                records = consumer.poll(200)
            assert [r.value for r in records] == [b"new"]


def test_admin_reads(broker):
    with Producer(broker.address) as producer:
        producer.send("t", b"v", partition=2).result(10)
    with Admin(broker.address) as admin:
        topics = admin.describe_topics()
        assert sorted(topics) == ["one", "t"] and sorted(topics["t"].partitions) == [0, 1, 2]
        assert admin.list_offsets({("t", 2): -1, ("t", 0): -2}) == {("t", 2): (1, -1), ("t", 0): (0, -1)}
        assert admin.describe_logs()[1].partitions[0].log_end_offset == 1
        assert admin.controller_endpoints() == [(1000, "127.0.0.1", 1)]
        with pytest.raises(KraftlogError) as err:
            admin.describe_topics(["missing"])
        assert err.value.code == "UNKNOWN_TOPIC_OR_PARTITION"
