"""pyarrow RecordBatches in the exact schema Spark expects, built from DecodedBatch columns."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from data_plane.record_batch import DecodedBatch

SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"

_HEADER_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
_TS_TYPE = pa.timestamp("us", tz="UTC")


def schema_ddl(include_headers: bool) -> str:
    return SCHEMA_DDL + (HEADERS_DDL if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TS_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADER_TYPE))
    return pa.schema(fields)


def to_record_batch(
    topic: str, partition: int, batches: Sequence[DecodedBatch], include_headers: bool = False
) -> pa.RecordBatch:
    """One RecordBatch holding every record of `batches` (one partition's, in offset order)."""
    keys: list = []
    values: list = []
    offsets: list[int] = []
    timestamps: list[int] = []
    ts_types: list[int] = []
    headers: list = []
    for b in batches:
        keys.extend(b.keys)
        values.extend(b.values)
        offsets.extend(b.offsets)
        timestamps.extend(b.timestamps)
        ts_types.extend([b.header.timestamp_type] * len(b.offsets))
        if include_headers:
            headers.extend(b.headers)
    n = len(offsets)
    ts_ms = pa.array(timestamps, pa.int64())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pc.multiply(ts_ms, 1000).cast(_TS_TYPE),
        pa.array(ts_types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], _HEADER_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
