"""The Spark sink writes tombstones: a null in the value column goes out as a record with a null
value (a delete on a compacted topic), keyed rows keep their key."""

from __future__ import annotations

import pyarrow as pa

from spark_source.writer import _BulkSender, _Rows
from tests.spark.test_units import _RecordingProducer


def test_null_values_are_sent_as_tombstones():
    batch = pa.RecordBatch.from_pydict(
        {"key": pa.array([b"a", b"b", b"a"], pa.binary()), "value": pa.array([b"1", None, None], pa.binary())}
    )
    producer = _RecordingProducer(partitions=1)
    _BulkSender(producer).send(_Rows(batch, "compacted"))
    sent = [(k, v) for _, _, values, keys in producer.sent for k, v in zip(keys, values)]
    assert sent == [(b"a", b"1"), (b"b", None), (b"a", None)]
