"""Streaming word count over a kraftlog topic, written back to another topic.

    kraftlog cluster up --detach
    kraftlog topics create lines --partitions 3 --replication-factor 1
    kraftlog topics create word-counts --partitions 3 --replication-factor 1
    python examples/spark_word_count.py &            # Ctrl-C to stop; restarts resume from --checkpoint
    printf 'to be or not\nto be\n' | kraftlog produce lines
    kraftlog consume word-counts --from-beginning --max-messages 4

Each micro-batch emits the words whose totals changed: key = word, value = running total.
The running totals live in the checkpoint; writes to the output topic are at-least-once
(a batch retried after a crash sends its updates again, with the same totals).
Options: --bootstrap (else KRAFTLOG_BOOTSTRAP, else ./kraftlog-data/cluster.json),
--input, --output, --checkpoint, --available-now (process what is there, then exit).
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--input", default="lines")
    parser.add_argument("--output", default="word-counts")
    parser.add_argument("--checkpoint", default="./kraftlog-data/spark-word-count-checkpoint")
    parser.add_argument("--available-now", action="store_true", help="process the backlog, then stop")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    args = parser.parse_args(argv)

    from cli.bootstrap import BootstrapError, partitions_of, resolve_bootstrap

    bootstrap = resolve_bootstrap(args.bootstrap, None)
    try:  # before Spark starts: a missing topic is one line here, not a trace from inside a query
        for topic in (args.input, args.output):
            partitions_of(bootstrap, topic)
    except BootstrapError as exc:
        raise SystemExit(f"spark_word_count: {exc}") from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_source import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kraftlog-word-count")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)

    lines = (
        spark.readStream.format("kraftlog")
        .option("bootstrap", bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        .load()
    )
    words = lines.select(F.explode(F.split(F.lower(F.col("value").cast("string")), r"\W+")).alias("word")).where("word != ''")
    counts = words.groupBy("word").count()

    def publish(batch_df, batch_id: int) -> None:
        out = batch_df.select(F.col("word").alias("key"), F.col("count").cast("string").alias("value"))
        out.write.format("kraftlog").mode("append").option("bootstrap", bootstrap).option("topic", args.output).save()
        print(f"batch {batch_id}: {out.count()} updated words", flush=True)

    writer = counts.writeStream.outputMode("update").foreachBatch(publish).option("checkpointLocation", args.checkpoint)
    query = writer.trigger(availableNow=True).start() if args.available_now else writer.trigger(processingTime="1 second").start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
