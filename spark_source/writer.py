"""df.write.format("kraftlog") and writeStream: one Producer per task, acks=all.

Columns: `value` (binary or string, required), optional `key` (binary/string), `topic`
(string; else the `topic` option), `partition` (int), `headers`
(array<struct<key:string,value:binary>>). Batch writes, and streaming writes with
exactlyOnce=false, are at-least-once: a retried task produces its rows again. Streaming
writes are exactly-once by default: spark_source/transactional_writer.py.

Rows go through the producer's bulk path (`Producer.send_batch`: one batch, one future, no
per-record bookkeeping): each Arrow batch is grouped by destination partition, keeping row
order within each, and cut into chunks of at most `CHUNK_BYTES`. The partition is the
`partition` column, else Kafka's key hash (`partition_for_key`, the producer's own rule),
else the topic's sticky partition, which moves on after each Arrow batch (the producer's
rule for records without a key, KIP-480, with a Spark Arrow batch as the unit). `send_batch` takes no headers, so an Arrow batch with any headers
goes record by record through `Producer.send`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType

from data_plane.client import Producer
from data_plane.client.partitioner import StickyPartitioner, partition_for_key
from data_plane.client.producer_batch import RECORD_OVERHEAD_BYTES
from spark_source.options import OptionError, SinkOptions
from spark_source.worker_gc import freeze_long_lived

# Bytes of keys, values and per-record overhead in one send_batch: the producer's default
# batch_size, well under the default max.message.bytes (1 MiB) a broker accepts per batch.
CHUNK_BYTES = 256 * 1024
# Outstanding futures after which a task waits for acknowledgements before going on.
FUTURES_MAX = 100_000


@dataclass
class KraftlogCommitMessage(WriterCommitMessage):
    records: int


def validate_schema(schema: StructType, opts: SinkOptions) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError(f"the kraftlog sink needs a 'value' column (binary or string); got columns {list(fields)}")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (BinaryType, StringType)):
            raise OptionError(f"column {name!r} must be binary or string, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError(f"column 'topic' must be string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], (IntegerType, LongType, ShortType)):
        raise OptionError(f"column 'partition' must be int, not {fields['partition'].simpleString()}")
    if "headers" in fields and not isinstance(fields["headers"], ArrayType):
        raise OptionError("column 'headers' must be array<struct<key:string,value:binary>>")
    if "topic" not in fields and not opts.topic:
        raise OptionError("set the 'topic' option or give the DataFrame a 'topic' column")


class _Rows:
    """One Arrow batch's columns as Python lists (None for a column the DataFrame lacks)."""

    def __init__(self, batch: pa.RecordBatch, default_topic: str | None) -> None:
        self.count = batch.num_rows
        self.values = _column(batch, "value")
        self.keys = _column(batch, "key")
        self.topics = _column(batch, "topic")
        self.partitions = _column(batch, "partition")
        self.headers = _column(batch, "headers")
        self.default_topic = default_topic

    def topic(self, i: int) -> str:
        topic = (self.topics[i] if self.topics else None) or self.default_topic
        if not topic:
            raise ValueError("a row has a null topic and the 'topic' option is not set")
        return topic

    def key(self, i: int) -> bytes | None:
        return self.keys[i] if self.keys else None

    def partition(self, i: int) -> int | None:
        return self.partitions[i] if self.partitions else None

    @property
    def has_headers(self) -> bool:
        return bool(self.headers) and any(self.headers)


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    if name not in batch.schema.names:
        return None
    column = batch.column(name)
    if name in ("key", "value") and pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _chunks(values: list[bytes | None], keys: list[bytes | None] | None) -> Iterator[tuple[int, int]]:
    """[start, end) row ranges of at most CHUNK_BYTES each (a larger row goes alone). The row
    sizes are summed by C-level maps, and each cut found by bisection: one Python step per
    chunk, not per row."""
    sizes = map(add, _lengths(values), repeat(RECORD_OVERHEAD_BYTES))
    if keys:
        sizes = map(add, sizes, _lengths(keys))
    ends = list(accumulate(sizes))  # ends[i]: the bytes of rows 0..i
    start, before = 0, 0
    while start < len(ends):
        end = bisect_right(ends, before + CHUNK_BYTES, lo=start + 1)  # the first row is taken even if it alone is larger
        yield start, end
        start, before = end, ends[end - 1]


def _lengths(items: list[bytes | None]) -> Iterable[int]:
    """len() of each item, 0 for None."""
    return map(len, items) if None not in items else (0 if item is None else len(item) for item in items)


class _BulkSender:
    """Sends the rows of Arrow batches through `send_batch`, one producer for the whole task."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.partitioner = StickyPartitioner(producer.options.batch_size)

    def send(self, rows: _Rows) -> list:
        """Queues every row; returns one future per chunk. Rows of one Arrow batch without a
        key or partition all go to their topic's sticky partition, which moves on once the
        producer's `batch_size` went there (its chunks are closed batches: full, for the rule)."""
        sticky: dict[str, int] = {}
        groups: dict[tuple[str, int], list[int]] = {}
        if not (rows.topics or rows.partitions or rows.keys):
            topic = rows.topic(0)
            sticky[topic] = self._sticky(topic)
            groups[(topic, sticky[topic])] = list(range(rows.count))
        else:
            for i in range(rows.count):
                topic, partition, key = rows.topic(i), rows.partition(i), rows.key(i)
                if partition is None and key is not None:
                    partition = partition_for_key(key, self.producer.partitions_for(topic))
                elif partition is None:
                    partition = sticky.get(topic)
                    if partition is None:
                        partition = sticky[topic] = self._sticky(topic)
                groups.setdefault((topic, partition), []).append(i)
        futures = []
        sent_bytes: dict[tuple[str, int], int] = {}
        for (topic, partition), indexes in groups.items():
            if len(indexes) == rows.count:  # every row to one partition (rows without keys): no copy
                values, keys = rows.values, rows.keys
            else:
                values = [rows.values[i] for i in indexes]
                keys = [rows.keys[i] for i in indexes] if rows.keys else None
            for start, end in _chunks(values, keys):
                chunk_keys = keys[start:end] if keys else None
                futures.append(self.producer.send_batch(topic, partition, values[start:end], chunk_keys))
            if sticky.get(topic) == partition:  # what the sticky partitioner counts
                sent_bytes[(topic, partition)] = sum(_lengths(values)) + (sum(_lengths(keys)) if keys else 0)
        for topic, partition in sticky.items():
            self.partitioner.on_append(topic, partition, sent_bytes[(topic, partition)], True, self.producer.partitions_for(topic))
        return futures

    def _sticky(self, topic: str) -> int:
        return self.partitioner.partition(topic, None, self.producer.partitions_for(topic))


def _send_records(producer: Producer, rows: _Rows) -> list:
    """Record by record (the only producer path that carries headers)."""
    futures = []
    for i in range(rows.count):
        headers = rows.headers[i] if rows.headers else None
        pairs = [(h["key"], _bytes(h["value"])) for h in headers] if headers else None
        futures.append(producer.send(rows.topic(i), rows.values[i], key=rows.key(i), headers=pairs, partition=rows.partition(i)))
    return futures


def _bytes(v: bytes | str | None) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return v.encode("utf-8")


def write_batches(opts: SinkOptions, batches: Iterable[pa.RecordBatch]) -> KraftlogCommitMessage:
    """At-least-once: produces every row of `batches` and waits until each is acknowledged
    (acks=all unless a kafka.acks option says otherwise)."""
    freeze_long_lived()
    with Producer(opts.bootstrap, **{"acks": "all", **opts.producer_config}) as producer:
        return KraftlogCommitMessage(send_rows(producer, opts, batches))


def send_rows(producer: Producer, opts: SinkOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Produces every row of `batches` with `producer` and waits until each is delivered
    (raising the first failure); returns how many rows there were."""
    count = 0
    bulk = _BulkSender(producer)
    futures: list = []
    for batch in batches:
        if not batch.num_rows:
            continue
        rows = _Rows(batch, opts.topic)
        futures.extend(_send_records(producer, rows) if rows.has_headers else bulk.send(rows))
        count += rows.count
        if len(futures) > FUTURES_MAX:
            _wait(producer, futures)
            futures = []
    _wait(producer, futures)
    return count


def _wait(producer: Producer, futures: list) -> None:
    producer.flush()
    for f in futures:
        f.result()


class KraftlogWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator):
        return write_batches(self.opts, iterator)
