"""df.write.format("kraftlog") and writeStream: one Producer per task, acks=all.

Columns: `value` (binary or string, required), optional `key` (binary/string), `topic`
(string; else the `topic` option), `partition` (int), `headers`
(array<struct<key:string,value:binary>>). Delivery is at-least-once: a retried task
produces its rows again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType

from data_plane.client import Producer
from spark_source.options import OptionError, SinkOptions


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


def _bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    return v.encode("utf-8")


def write_batches(opts: SinkOptions, iterator) -> KraftlogCommitMessage:
    count = 0
    with Producer(opts.bootstrap, acks="all") as producer:
        futures = []
        for batch in iterator:
            names = batch.schema.names
            cols = {n: batch.column(n).to_pylist() for n in ("key", "value", "topic", "partition", "headers") if n in names}
            n = batch.num_rows
            values = cols["value"]
            keys = cols.get("key") or [None] * n
            topics = cols.get("topic") or [opts.topic] * n
            parts = cols.get("partition") or [None] * n
            headers = cols.get("headers") or [None] * n
            for i in range(n):
                topic = topics[i] or opts.topic
                if not topic:
                    raise ValueError("a row has a null topic and the 'topic' option is not set")
                hdrs = [(h["key"], _bytes(h["value"])) for h in headers[i]] if headers[i] else None
                futures.append(producer.send(topic, _bytes(values[i]), key=_bytes(keys[i]), headers=hdrs, partition=parts[i]))
            count += n
            if len(futures) > 100_000:
                _wait(producer, futures)
                futures = []
        _wait(producer, futures)
    return KraftlogCommitMessage(count)


def _wait(producer: Producer, futures) -> None:
    producer.flush()
    for f in futures:
        f.result()


class KraftlogWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator):
        return write_batches(self.opts, iterator)


class KraftlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator):
        return write_batches(self.opts, iterator)

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass
