import time
from collections import Counter

import pytest

from tests.spark.conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _stream(spark, bootstrap, topic, **options):
    reader = spark.readStream.format("kraftlog").option("bootstrap", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def test_available_now_respects_max_offsets_per_trigger(spark, cluster, tmp_path):
    cluster.create_topic("stream3", 3, 1)
    produce(cluster.bootstrap, "stream3", 3, 50)
    batches = []

    def collect(df, batch_id):
        batches.append([(r.partition, r.offset, r.value) for r in df.collect()])

    query = (
        _stream(spark, cluster.bootstrap, "stream3", startingOffsets="earliest", maxOffsetsPerTrigger=40)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    sizes = [len(b) for b in batches if b]
    assert sizes and max(sizes) <= 40 and sum(sizes) == 150, sizes
    assert len(sizes) >= 4
    seen = Counter((p, o) for b in batches for p, o, _ in b)
    assert set(seen) == {(p, o) for p in range(3) for o in range(50)}
    assert max(seen.values()) == 1
    for b in batches:
        for p, o, v in b:
            assert v == f"{p}-{o}".encode()


def test_exactly_once_across_restart(spark, cluster, tmp_path):
    cluster.create_topic("restart3", 3, 1)
    produce(cluster.bootstrap, "restart3", 3, 100)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def start(trigger):
        df = _stream(spark, cluster.bootstrap, "restart3", startingOffsets="earliest", maxOffsetsPerTrigger=30)
        writer = df.select("partition", "offset", "value").writeStream.format("parquet")
        return writer.option("path", out).option("checkpointLocation", ckpt).trigger(**trigger).start()

    query = start({"processingTime": "0 seconds"})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress and progress["batchId"] >= 3:
            break
        time.sleep(0.1)
    query.stop()
    assert query.exception() is None
    first = spark.read.parquet(out).count()
    assert 0 < first < 300, first

    produce(cluster.bootstrap, "restart3", 3, 50, start=100)
    query = start({"availableNow": True})
    assert query.awaitTermination(120)
    assert query.exception() is None

    rows = spark.read.parquet(out).collect()
    counts = Counter((r.partition, r.offset) for r in rows)
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:5]
    assert set(counts) == {(p, o) for p in range(3) for o in range(150)}
    for r in rows:
        assert r.value == f"{r.partition}-{r.offset}".encode()


def test_new_partition_topic_via_pattern_and_bad_option(spark, cluster, tmp_path):
    cluster.create_topic("pat-a", 1, 1)
    produce(cluster.bootstrap, "pat-a", 1, 5)
    got = []

    def collect(df, batch_id):
        got.extend((r.topic, r.offset) for r in df.collect())

    def run():
        q = (
            spark.readStream.format("kraftlog")
            .option("bootstrap", cluster.bootstrap)
            .option("subscribePattern", "pat-.*")
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None

    run()
    cluster.create_topic("pat-b", 1, 1)
    produce(cluster.bootstrap, "pat-b", 1, 3)
    produce(cluster.bootstrap, "pat-a", 1, 2, start=5)
    run()
    assert sorted(got) == [("pat-a", o) for o in range(7)] + [("pat-b", o) for o in range(3)]

    with pytest.raises(Exception, match="(?i)maxOffsetsPerTrigger"):
        (
            spark.readStream.format("kraftlog")
            .option("bootstrap", cluster.bootstrap)
            .option("subscribe", "pat-a")
            .option("maxOffsetsPerTrigger", "-5")
            .load()
            .writeStream.format("noop")
            .start()
            .awaitTermination(30)
        )


def test_stream_write_copies_topic(spark, cluster, tmp_path):
    cluster.create_topic("copy-src", 2, 1)
    cluster.create_topic("copy-dst", 2, 1)
    produce(cluster.bootstrap, "copy-src", 2, 30)
    query = (
        _stream(spark, cluster.bootstrap, "copy-src", startingOffsets="earliest")
        .selectExpr("key", "value", "partition")
        .writeStream.format("kraftlog")
        .option("bootstrap", cluster.bootstrap)
        .option("topic", "copy-dst")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.read.format("kraftlog").option("bootstrap", cluster.bootstrap).option("subscribe", "copy-dst").load().collect()
    assert sorted((r.partition, r.value) for r in rows) == sorted((p, f"{p}-{i}".encode()) for p in range(2) for i in range(30))
