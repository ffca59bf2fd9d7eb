"""A streaming source that does no work: it yields slices of one prebuilt Arrow batch in
the kraftlog schema. The benchmark runs it next to the kraftlog source so a reader sees how
much of a micro-batch is Spark's own cost (Python worker to JVM, rows into the sink) on
the same machine at the same moment."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spark_source.arrow_rows import arrow_schema, schema_ddl

BATCH_ROWS = 65_536  # about what one 8 MiB fetch of 100-byte records holds
_batch: pa.RecordBatch | None = None


def prebuilt_batch(value_bytes: int) -> pa.RecordBatch:
    """One batch like a fetch of `value_bytes`-byte values without keys (built once per worker)."""
    global _batch
    if _batch is None:
        n = BATCH_ROWS
        _batch = pa.RecordBatch.from_arrays(
            [
                pa.nulls(n, pa.binary()),
                pa.array([b"%0*d" % (value_bytes, i) for i in range(n)], pa.binary()),
                pa.repeat(pa.scalar("floor", pa.string()), n),
                pa.repeat(pa.scalar(0, pa.int32()), n),
                pa.array(range(n), pa.int64()),
                pa.repeat(pa.scalar(0, pa.timestamp("us", tz="UTC")), n),
                pa.repeat(pa.scalar(0, pa.int32()), n),
            ],
            schema=arrow_schema(False),
        )
    return _batch


class _Rows(InputPartition):
    def __init__(self, count: int, value_bytes: int) -> None:
        self.count = count
        self.value_bytes = value_bytes


class _FloorStreamReader(DataSourceStreamReader):
    """Every micro-batch admits `rows` more rows, split evenly over `tasks` tasks."""

    def __init__(self, rows: int, tasks: int, value_bytes: int) -> None:
        self.rows, self.tasks, self.value_bytes = rows, tasks, value_bytes

    def initialOffset(self) -> dict:
        return {"rows": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"rows": start["rows"] + self.rows}  # from the batch's start: however often Spark asks

    def partitions(self, start: dict, end: dict) -> list[_Rows]:
        count = (end["rows"] - start["rows"]) // self.tasks
        return [_Rows(count, self.value_bytes) for _ in range(self.tasks)]

    def read(self, partition: _Rows):
        batch = prebuilt_batch(partition.value_bytes)
        for first in range(0, partition.count, BATCH_ROWS):
            yield batch.slice(0, min(BATCH_ROWS, partition.count - first))

    def commit(self, end: dict) -> None:
        pass  # nothing to release


class ArrowFloorSource(DataSource):
    """format("kraftlog_bench_floor") with options rows, tasks and valueBytes."""

    @classmethod
    def name(cls) -> str:
        return "kraftlog_bench_floor"

    def schema(self) -> str:
        return schema_ddl(False)

    def streamReader(self, schema) -> _FloorStreamReader:
        return _FloorStreamReader(int(self.options["rows"]), int(self.options["tasks"]), int(self.options["valuebytes"]))
