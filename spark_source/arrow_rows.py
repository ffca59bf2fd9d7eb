"""pyarrow RecordBatches in the exact schema Spark expects, built from decoded record batches.

A fetch brings tens of thousands of records per partition; turning each into Python
objects would cost more than everything else a task does. Batches decoded from bytes keep
their body's layout (`record_batch.BodyLayout`: little-endian int32 length columns and
blobs), which is almost Arrow's binary layout already: the lengths of a whole run of
batches are joined into one int32 array, a cumulative sum turns them into Arrow offsets,
the blobs are joined into the data buffer, and `pa.Array.from_buffers` wraps the result.
Offsets, timestamps and timestamp types come from per-batch header values spread over
their records with run-end decoding. That is a fixed number of C-level calls per fetch,
whatever its record count. Batches built from lists (the consumer cuts the first batch of a
fetch that starts inside it) are turned into the same buffers from Python lists.

Nothing here calls `pa.array` or `pa.scalar` on Python values except for the opt-in headers
column: both first ask pandas whether their argument is one of its arrays, which imports
pandas, about 0.2 s of CPU in every new Spark Python worker, i.e. in the first micro-batch of
every query (`tests/spark/test_units.py` checks that reading leaves pandas unimported).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, groupby, repeat

import pyarrow as pa
import pyarrow.compute as pc

from data_plane.record_batch import LOG_APPEND_TIME, DecodedBatch

_ARRAY_CODES = {pa.int32(): "i", pa.int64(): "q"}


def _ints(values: Iterable[int], type_: pa.DataType) -> pa.Array:
    """An int32 or int64 Arrow array of Python ints, without `pa.array` (see the module's
    docstring): `array.array` packs them in the host's byte order, as Arrow wants."""
    packed = array(_ARRAY_CODES[type_], values)
    return pa.Array.from_buffers(type_, len(packed), [None, pa.py_buffer(packed)])


def _string(text: str) -> pa.Scalar:
    """A string scalar, without `pa.scalar` (which imports pandas as `pa.array` does)."""
    data = text.encode()
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(array("i", [0, len(data)])), pa.py_buffer(data)])[0]


SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"

_HEADER_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
_TS_TYPE = pa.timestamp("us", tz="UTC")
_ZERO_OFFSET = _ints([0], pa.int32())
_ZERO_LENGTH = _ints([0], pa.int32())[0]
_NULL_LENGTH = _ints([-1], pa.int32())[0]
_ONE = _ints([1], pa.int64())[0]
_THOUSAND = _ints([1000], pa.int64())[0]
# The body's int32 columns are little-endian and Arrow uses the host's order.
_BUFFERS_ARE_ARROW = sys.byteorder == "little"

# (keys, values, offsets, timestamps in ms, timestamp types) of some records.
Columns = tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]


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
    runs = groupby(batches, key=lambda b: b.layout is not None and _BUFFERS_ARE_ARROW)
    parts = [(_from_layouts if has_layout else _from_lists)(list(run)) for has_layout, run in runs]
    keys, values, offsets, timestamps_ms, timestamp_types = (_concat(column) for column in zip(*parts))
    n = len(offsets)
    columns = [
        keys,
        values,
        pa.repeat(_string(topic), n),
        pa.repeat(_ints([partition], pa.int32())[0], n),
        offsets,
        pc.multiply(timestamps_ms, _THOUSAND).cast(_TS_TYPE),
        timestamp_types,
    ]
    if include_headers:
        records = chain.from_iterable(b.headers for b in batches)
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in records], _HEADER_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _concat(arrays: Sequence[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _from_lists(batches: list[DecodedBatch]) -> Columns:
    """Columns of batches that hold Python lists (no body layout)."""
    return (
        _binary_of(list(chain.from_iterable(b.keys for b in batches))),
        _binary_of(list(chain.from_iterable(b.values for b in batches))),
        _ints(chain.from_iterable(b.offsets for b in batches), pa.int64()),
        _ints(chain.from_iterable(b.timestamps for b in batches), pa.int64()),
        _ints(chain.from_iterable(repeat(b.header.timestamp_type, len(b.offsets)) for b in batches), pa.int32()),
    )


def _binary_of(items: list[bytes | None]) -> pa.Array:
    """A binary array of Python bytes (None = null), through the same buffers as a body's."""
    lengths = array("i", (-1 if item is None else len(item) for item in items))
    return _binary(len(items), lengths.count(-1), [lengths], [b"".join(item for item in items if item is not None)])


def _from_layouts(batches: list[DecodedBatch]) -> Columns:
    """Columns of batches decoded from bytes, straight from their bodies' buffers."""
    headers = [b.header for b in batches]
    layouts = [b.layout for b in batches]
    counts = [layout.record_count for layout in layouts]
    run_ends = list(accumulate(counts))
    n = run_ends[-1]
    keys = _binary(
        n,
        sum(layout.key_nulls for layout in layouts),
        [memoryview(x.body)[x.key_lengths_at : x.key_lengths_at + 4 * x.record_count] for x in layouts],
        [memoryview(x.body)[x.keys_at : x.values_at] for x in layouts],
    )
    values = _binary(
        n,
        sum(layout.value_nulls for layout in layouts),
        [memoryview(x.body)[x.value_lengths_at : x.value_lengths_at + 4 * x.record_count] for x in layouts],
        [memoryview(x.body)[x.values_at : x.header_names_at] for x in layouts],
    )
    # LogAppendTime: every record carries the batch's max_timestamp, whatever its delta says.
    appended = [h.timestamp_type == LOG_APPEND_TIME for h in headers]
    deltas = _int32s(n, [bytes(4 * x.record_count) if a else memoryview(x.body)[: 4 * x.record_count] for x, a in zip(layouts, appended)])
    timestamp_bases = [h.max_timestamp if a else h.first_timestamp for h, a in zip(headers, appended)]
    timestamps_ms = pc.add(deltas.cast(pa.int64()), _per_record(timestamp_bases, run_ends, pa.int64()))
    # Record i of the run is at offset i + (its batch's base offset - the batch's first index in the run).
    shifts = [h.base_offset - first for h, first in zip(headers, chain([0], run_ends))]
    offsets = pc.add(pc.subtract(pc.cumulative_sum(pa.repeat(_ONE, n)), _ONE), _per_record(shifts, run_ends, pa.int64()))
    timestamp_types = _per_record([h.timestamp_type for h in headers], run_ends, pa.int32())
    return keys, values, offsets, timestamps_ms, timestamp_types


def _int32s(n: int, pieces: list) -> pa.Array:
    """One int32 array of the little-endian int32 `pieces` put end to end."""
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(b"".join(pieces))])


def _binary(n: int, nulls: int, length_pieces: list, blob_pieces: list) -> pa.Array:
    """A binary array from the length columns (-1 = null) and blobs of consecutive batches."""
    if nulls == n:
        return pa.nulls(n, pa.binary())
    lengths = _int32s(n, length_pieces)
    validity = None
    if nulls:
        valid = pc.not_equal(lengths, _NULL_LENGTH)
        lengths = pc.if_else(valid, lengths, _ZERO_LENGTH)
        validity = valid.buffers()[1]
    # Arrow offsets: n + 1 int32 positions from 0; the checked sum refuses more than 2 GiB.
    ends = pa.concat_arrays([_ZERO_OFFSET, pc.cumulative_sum_checked(lengths)])
    blob = pa.py_buffer(b"".join(blob_pieces))
    return pa.Array.from_buffers(pa.binary(), n, [validity, ends.buffers()[1], blob], null_count=nulls)


def _per_record(per_batch: list[int], run_ends: list[int], type_: pa.DataType) -> pa.Array:
    """Each batch's value repeated for each of its records."""
    encoded = pa.RunEndEncodedArray.from_buffers(
        pa.run_end_encoded(pa.int32(), type_), run_ends[-1], [None], 0, 0, [_ints(run_ends, pa.int32()), _ints(per_batch, type_)]
    )
    return pc.run_end_decode(encoded)
