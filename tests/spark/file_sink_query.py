"""A streaming query from a kraftlog topic into one JSON-lines file per micro-batch.

The sink is idempotent the way an exactly-once sink must be: batch N's rows go to a
temporary file that is renamed to `batch-N.jsonl` only when complete, so a replayed batch
simply writes its file again and a half-written one never counts.

Run as its own process so a test can SIGKILL it (JVM, Python workers and all) while a
batch is in progress:

    python -m tests.spark.file_sink_query BOOTSTRAP TOPIC OUT_DIR CHECKPOINT_DIR --block-at N

With --block-at, batch N writes half its rows to the temporary file, creates
`OUT_DIR/in-progress-N` and then waits for the kill instead of finishing.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

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


def start_query(spark, bootstrap: str, topic: str, checkpoint: Path, sink: BatchFiles, trigger: dict):
    """The streaming query: every record of `topic` from the earliest offset, in small batches."""
    return (
        spark.readStream.format("kraftlog")
        .option("bootstrap", bootstrap)
        .option("subscribe", topic)
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
    parser.add_argument("--block-at", type=int, required=True)
    args = parser.parse_args(argv)
    from tests.spark.session import start_session

    spark = start_session("kraftlog-killed-query")
    query = start_query(spark, args.bootstrap, args.topic, args.checkpoint, BatchFiles(args.out_dir, args.block_at), {"processingTime": "0 seconds"})
    query.awaitTermination()


if __name__ == "__main__":
    main()
