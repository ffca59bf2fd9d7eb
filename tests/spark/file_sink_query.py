"""A streaming query from a kraftlog topic into one JSON-lines file per micro-batch.

The sink is idempotent the way an exactly-once sink must be: batch N's rows go to a
temporary file that is renamed to `batch-N.jsonl` only when complete, so a replayed batch
simply writes its file again and a half-written one never counts.

Run as its own process so a test can SIGKILL it (JVM, Python workers and all) while a
batch is in progress:

    python -m tests.spark.file_sink_query BOOTSTRAP TOPIC OUT_DIR CHECKPOINT_DIR --block-at N

With --block-at, batch N writes half its rows to the temporary file, creates
`OUT_DIR/in-progress-N` and then waits for the kill instead of finishing; without it the
query runs with Trigger.AvailableNow to its end and the process exits. --master runs the
driver against a Spark standalone master instead of local[2]; --trace-dir reads through
`kraftlog_traced` (tests/spark/traced_source.py), which records where each task ran;
--batch-read FILE then also reads the whole topic with spark.read into FILE (JSON rows).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from server_common.waiting import wait_for
from tests.spark.spark_processes import REPO

MAX_OFFSETS_PER_TRIGGER = 60


class BatchFiles:
    """A foreachBatch function writing each batch's (partition, offset, value) rows to its own file."""

    def __init__(self, out_dir: Path, block_at: int | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.block_at = block_at

    def __call__(self, df, batch_id: int) -> None:
        rows = [[r.partition, r.offset, r.value.decode()] for r in df.select("partition", "offset", "value").collect()]
        tmp = self.out_dir / f".batch-{batch_id}.jsonl.tmp"
        if batch_id == self.block_at:
            tmp.write_text("".join(json.dumps(row) + "\n" for row in rows[: len(rows) // 2]))
            (self.out_dir / f"in-progress-{batch_id}").touch()
            threading.Event().wait()  # until SIGKILL: the batch stays in progress
        with open(tmp, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.out_dir / f"batch-{batch_id}.jsonl")


def read_batch_files(out_dir: Path) -> dict[int, list[tuple[int, int, str]]]:
    """{batch id: rows in the order the batch wrote them}, complete batches only."""
    batches = {}
    for path in Path(out_dir).glob("batch-*.jsonl"):
        batch_id = int(path.name.removeprefix("batch-").removesuffix(".jsonl"))
        batches[batch_id] = [tuple(json.loads(line)) for line in path.read_text().splitlines()]
    return batches


def kill_mid_batch(
    bootstrap: str, topic: str, out: Path, checkpoint: Path, log_path: Path, block_at: int = 2, extra_args: tuple[str, ...] = ()
) -> None:
    """Runs this module as its own process until batch `block_at` is half written, then
    SIGKILLs its process group (driver, its JVM and, in local mode, the Python workers):
    only batches before `block_at` are complete, and its temporary file is left behind."""
    out.mkdir(exist_ok=True)
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.file_sink_query", bootstrap, topic, str(out), str(checkpoint), "--block-at", str(block_at), *extra_args],
            cwd=REPO,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the kill takes the JVM and Python workers too
        )
    marker = out / f"in-progress-{block_at}"
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, 240, f"batch {block_at} of the query to be in progress")
        assert marker.exists(), f"the query process exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert sorted(read_batch_files(out)) == list(range(block_at))  # batch `block_at` was never completed
    assert (out / f".batch-{block_at}.jsonl.tmp").exists()


def assert_each_record_once(out: Path, records: dict[int, int]) -> None:
    """The complete batches in `out` hold offsets 0..records[p]-1 of each partition p exactly
    once, in offset order, none larger than maxOffsetsPerTrigger, with the values produced."""
    batches = read_batch_files(out)
    assert sorted(batches) == list(range(len(batches)))
    assert all(0 < len(rows) <= MAX_OFFSETS_PER_TRIGGER for rows in batches.values())
    per_partition: dict[int, list[int]] = {}
    for batch_id in sorted(batches):
        for partition, offset, value in batches[batch_id]:
            assert value == f"{partition}-{offset}"
            per_partition.setdefault(partition, []).append(offset)
    assert per_partition == {p: list(range(n)) for p, n in records.items()}


def _reader(reader, bootstrap: str, topic: str, trace_dir: Path | None):
    """`reader` (spark.read or spark.readStream) of `topic`, traced when `trace_dir` is given."""
    if trace_dir is None:
        reader = reader.format("kraftlog")
    else:
        reader = reader.format("kraftlog_traced").option("traceDir", str(trace_dir))
    return reader.option("bootstrap", bootstrap).option("subscribe", topic)


def start_query(
    spark, bootstrap: str, topic: str, checkpoint: Path, sink: BatchFiles, trigger: dict, trace_dir: Path | None = None
):
    """The streaming query: every record of `topic` from the earliest offset, in small batches."""
    return (
        _reader(spark.readStream, bootstrap, topic, trace_dir)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--block-at", type=int)
    parser.add_argument("--master", help="spark://host:port of a standalone master (default local[2])")
    parser.add_argument("--trace-dir", type=Path)
    parser.add_argument("--batch-read", type=Path)
    args = parser.parse_args(argv)
    from tests.spark.session import start_session
    from tests.spark.spark_processes import standalone_conf
    from tests.spark.traced_source import TracedKraftlogSource

    conf = standalone_conf(args.master, executors=2) if args.master else None
    spark = start_session("kraftlog-file-sink-query", conf)
    spark.dataSource.register(TracedKraftlogSource)
    sink = BatchFiles(args.out_dir, args.block_at)
    trigger = {"processingTime": "0 seconds"} if args.block_at is not None else {"availableNow": True}
    query = start_query(spark, args.bootstrap, args.topic, args.checkpoint, sink, trigger, args.trace_dir)
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    if args.batch_read:
        rows = _reader(spark.read, args.bootstrap, args.topic, args.trace_dir).load().select("partition", "offset", "value")
        args.batch_read.write_text(json.dumps([[r.partition, r.offset, r.value.decode()] for r in rows.collect()]))
    spark.stop()


if __name__ == "__main__":
    main()
