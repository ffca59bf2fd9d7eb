from collections import Counter

import pytest

from server_common.waiting import wait_for
from tests.spark.conftest import load, produce, run_available_now
from tests.spark.file_sink_query import BatchFiles, assert_each_record_once, kill_mid_batch, start_query

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_available_now_respects_max_offsets_per_trigger(spark, cluster, tmp_path):
    cluster.create_topic("stream3", 3, 1)
    produce(cluster.bootstrap, "stream3", 3, 50)
    batches = []

    def collect(df, batch_id):
        batches.append([(r.partition, r.offset, r.value) for r in df.collect()])

    df = load(spark.readStream, bootstrap=cluster.bootstrap, subscribe="stream3", startingOffsets="earliest", maxOffsetsPerTrigger=40)
    run_available_now(df, tmp_path / "ckpt", collect)
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
        df = load(spark.readStream, bootstrap=cluster.bootstrap, subscribe="restart3", startingOffsets="earliest", maxOffsetsPerTrigger=30)
        writer = df.select("partition", "offset", "value").writeStream.format("parquet")
        return writer.option("path", out).option("checkpointLocation", ckpt).trigger(**trigger).start()

    query = start({"processingTime": "0 seconds"})
    wait_for(lambda: (query.lastProgress or {}).get("batchId", -1) >= 3, 90, "batch 3 of the first run")
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
        df = load(spark.readStream, bootstrap=cluster.bootstrap, subscribePattern="pat-.*", startingOffsets="earliest")
        run_available_now(df, tmp_path / "ckpt", collect)

    run()
    cluster.create_topic("pat-b", 1, 1)
    produce(cluster.bootstrap, "pat-b", 1, 3)
    produce(cluster.bootstrap, "pat-a", 1, 2, start=5)
    run()
    assert sorted(got) == [("pat-a", o) for o in range(7)] + [("pat-b", o) for o in range(3)]

    with pytest.raises(Exception, match="(?i)maxOffsetsPerTrigger"):
        load(spark.readStream, bootstrap=cluster.bootstrap, subscribe="pat-a", maxOffsetsPerTrigger=-5).writeStream.format("noop").start().awaitTermination(30)


def test_stream_write_copies_topic(spark, cluster, tmp_path):
    cluster.create_topic("copy-src", 2, 1)
    cluster.create_topic("copy-dst", 2, 1)
    produce(cluster.bootstrap, "copy-src", 2, 30)
    query = (
        load(spark.readStream, bootstrap=cluster.bootstrap, subscribe="copy-src", startingOffsets="earliest")
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
    rows = load(spark.read, bootstrap=cluster.bootstrap, subscribe="copy-dst").collect()
    assert sorted((r.partition, r.value) for r in rows) == sorted((p, f"{p}-{i}".encode()) for p in range(2) for i in range(30))


def test_exactly_once_after_kill_mid_batch(spark, cluster, tmp_path):
    """SIGKILL the process running the query (driver, JVM and workers) while batch 2 is half
    written, restart from the checkpoint: each record lands once, in offset order."""
    cluster.create_topic("killed3", 3, 1)
    produce(cluster.bootstrap, "killed3", 3, 100)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    kill_mid_batch(cluster.bootstrap, "killed3", out, ckpt, tmp_path / "query.log")

    produce(cluster.bootstrap, "killed3", 3, 50, start=100)
    query = start_query(spark, cluster.bootstrap, "killed3", ckpt, BatchFiles(out), {"availableNow": True})
    assert query.awaitTermination(180)
    assert query.exception() is None
    assert_each_record_once(out, {p: 150 for p in range(3)})
