"""Options of Spark's Kafka source against a real broker: per-partition and ending
timestamps, minOffsetsPerTrigger with maxTriggerDelay, maxRecordsPerPartition, `kafka.*`
client options, and partitions and topics (subscribePattern) added while a streaming
query runs."""

import json
import time
from contextlib import contextmanager

import pytest

from server_common.waiting import wait_for
from spark_source.options import parse_source
from spark_source.stream_reader import KraftlogStreamReader
from tests.spark.conftest import load, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def stamped(cluster):
    """Topic `ts2`: 2 partitions, record i of each stamped t0 + 1000*i ms."""
    cluster.create_topic("ts2", 2, 1)
    t0 = time.time_ns() // 1_000_000 - 60_000  # recent: retention by time never applies
    produce(cluster.bootstrap, "ts2", 2, 10, timestamp_ms=lambda p, i: t0 + 1000 * i)
    return t0


def _offsets(spark, bootstrap, **options) -> list[tuple[int, int]]:
    df = load(spark.read, bootstrap=bootstrap, subscribe="ts2", **options)
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_timestamps_per_partition_and_ending(spark, cluster, stamped):
    t0 = stamped
    by_ts = json.dumps({"ts2": {"0": t0 + 5000, "1": t0 + 2500}})
    assert _offsets(spark, cluster.bootstrap, startingOffsetsByTimestamp=by_ts) == [(0, o) for o in range(5, 10)] + [(1, o) for o in range(3, 10)]
    # endingTimestamp: up to (not including) the first record stamped at or after it.
    assert _offsets(spark, cluster.bootstrap, endingTimestamp=t0 + 4000) == [(p, o) for p in range(2) for o in range(4)]
    # endingOffsetsByTimestamp past every record: the high watermark, as Spark does.
    ends = json.dumps({"ts2": {"0": t0 + 1500, "1": t0 + 99_000}})
    assert _offsets(spark, cluster.bootstrap, startingTimestamp=t0 + 1000, endingOffsetsByTimestamp=ends) == [(0, 1)] + [(1, o) for o in range(1, 10)]
    with pytest.raises(Exception, match="(?s)endingOffsetsByTimestamp.*every partition.*ts2-1"):
        _offsets(spark, cluster.bootstrap, endingOffsetsByTimestamp=json.dumps({"ts2": {"0": t0}}))


def test_max_records_per_partition_and_kafka_options(spark, cluster, stamped):
    df = load(
        spark.read,
        **{"kafka.bootstrap.servers": cluster.bootstrap, "kafka.max.partition.fetch.bytes": "64", "kafka.client.id": "spark-job"},
        subscribe="ts2",
        maxRecordsPerPartition=3,
    )
    assert df.rdd.getNumPartitions() == 8  # 10 records per partition, at most 3 each: 4 pieces of each
    assert sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()) == [(p, o) for p in range(2) for o in range(10)]
    with pytest.raises(Exception, match="(?s)kafka.group.id.*no consumer group"):
        load(spark.read, bootstrap=cluster.bootstrap, subscribe="ts2", **{"kafka.group.id": "g"}).collect()


def test_write_with_kafka_producer_options(spark, cluster):
    cluster.create_topic("acks1", 1, 1)
    df = spark.createDataFrame([(f"v{i}",) for i in range(10)], "value string")
    df.write.format("kraftlog").mode("append").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", "acks1").option(
        "kafka.acks", "1"
    ).option("kafka.compression.type", "lz4").save()
    assert sorted(r.value for r in load(spark.read, bootstrap=cluster.bootstrap, subscribe="acks1").collect()) == sorted(
        f"v{i}".encode() for i in range(10)
    )


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(cluster):
    """The stream reader's own planning against the broker, on a clock the test moves: the
    first micro-batch goes at once, then one waits until 30 records are new or 1 h passed."""
    cluster.create_topic("minrows", 1, 1)
    produce(cluster.bootstrap, "minrows", 1, 5)
    opts = parse_source(
        {"bootstrap": cluster.bootstrap, "subscribe": "minrows", "startingOffsets": "earliest", "minOffsetsPerTrigger": "30", "maxTriggerDelay": "1h"},
        streaming=True,
    )
    reader = KraftlogStreamReader(opts)
    clock = [10_000_000.0]
    reader._now_ms = lambda: clock[0]
    try:
        limit = reader.getDefaultReadLimit()

        def latest(start):
            reader._latest_at = 0.0  # no cached high watermark: the broker's answer now
            return reader.latestOffset(start, limit)

        start = reader.initialOffset()
        first = latest(start)
        assert first == {"minrows": {"0": 5}}  # the first batch is never held back
        produce(cluster.bootstrap, "minrows", 1, 10, start=5)
        assert latest(first) == first  # 10 new < 30: no batch
        clock[0] += 59 * 60 * 1000
        assert latest(first) == first  # 59 min: still waiting
        produce(cluster.bootstrap, "minrows", 1, 20, start=15)
        assert latest(first) == {"minrows": {"0": 35}}  # 30 new: the batch goes
        produce(cluster.bootstrap, "minrows", 1, 1, start=35)
        assert latest({"minrows": {"0": 35}}) == {"minrows": {"0": 35}}
        clock[0] += 60 * 60 * 1000
        assert latest({"minrows": {"0": 35}}) == {"minrows": {"0": 36}}  # 1 h since the last batch
        produce(cluster.bootstrap, "minrows", 1, 1, start=36)
        reader.prepareForTriggerAvailableNow()
        assert latest({"minrows": {"0": 36}}) == {"minrows": {"0": 37}}  # AvailableNow never waits
    finally:
        reader.stop()


@contextmanager
def query_from_latest(spark, cluster, tmp_path, topic: str, **subscription):
    """Topic `topic` (1 partition, records 0-4) and a processingTime query of
    `subscription` into foreachBatch started at latest; yields the (topic, partition,
    offset) rows it has collected so far once it has read records 5-6, written after its
    first micro-batch; stops it on exit."""
    cluster.create_topic(topic, 1, 1)
    produce(cluster.bootstrap, topic, 1, 5)
    seen: list[tuple[str, int, int]] = []

    def collect(batch, batch_id):
        seen.extend((r.topic, r.partition, r.offset) for r in batch.select("topic", "partition", "offset").collect())

    df = load(spark.readStream, bootstrap=cluster.bootstrap, startingOffsets="latest", **subscription)
    query = df.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="0 seconds").start()
    try:
        wait_for(lambda: query.lastProgress is not None, 120, "the query's first micro-batch")
        produce(cluster.bootstrap, topic, 1, 2, start=5)
        wait_for(lambda: len(seen) >= 2, 120, "records produced after the start")
        yield seen
        assert query.exception() is None
    finally:
        query.stop()


def test_stream_picks_up_added_partitions_from_earliest(spark, cluster, tmp_path):
    with query_from_latest(spark, cluster, tmp_path, "growing", subscribe="growing") as seen:
        with cluster.controller_client() as controllers:
            controllers.create_partitions({"growing": 3})
        cluster.wait_topic_ready("growing", 3)
        # Written before the query can have noticed the new partitions: read from offset 0 anyway.
        produce(cluster.bootstrap, "growing", 3, 4)
        wait_for(lambda: len(seen) >= 2 + 12, 120, "records of the added partitions")
    assert sorted(seen) == [("growing", 0, o) for o in range(5, 11)] + [("growing", p, o) for p in (1, 2) for o in range(4)]


def test_pattern_picks_up_new_topics_from_earliest(spark, cluster, tmp_path):
    """A running streaming query over subscribePattern reads a topic created after it
    started from offset 0, though the topic's records were written before the query could
    know of it (its metadata is cached for seconds) and the query started at latest; a
    batch query planned afterwards reads it too. Topics not matching are never read."""
    with query_from_latest(spark, cluster, tmp_path, "gain-a", subscribePattern="gain-[ab]") as seen:
        cluster.create_topic("gain-b", 2, 1)
        cluster.create_topic("gain-c", 1, 1)
        produce(cluster.bootstrap, "gain-b", 2, 4)
        produce(cluster.bootstrap, "gain-c", 1, 3)
        wait_for(lambda: len(seen) >= 2 + 8, 120, "records of the new topic")
        produce(cluster.bootstrap, "gain-b", 2, 1, start=4)
        wait_for(lambda: len(seen) >= 2 + 8 + 2, 120, "records written to the new topic later")
    assert sorted(seen) == [("gain-a", 0, 5), ("gain-a", 0, 6)] + [("gain-b", p, o) for p in (0, 1) for o in range(5)]

    batch = load(spark.read, bootstrap=cluster.bootstrap, subscribePattern="gain-[ab]")
    rows = sorted((r.topic, r.partition, r.offset) for r in batch.select("topic", "partition", "offset").collect())
    assert rows == [("gain-a", 0, o) for o in range(7)] + [("gain-b", p, o) for p in (0, 1) for o in range(5)]
