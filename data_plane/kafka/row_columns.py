"""Kafka's varint record rows to kraftlog's columns and back, a whole batch per numpy call.

A Kafka record is a row of zigzag varints and bytes (length, attributes, timestamp delta,
offset delta, key, value, header count, headers); kraftlog keeps the same fields as columns
(docs/protocol.md, "Record batch format"). Converting row by row in Python costs a few
microseconds per record, paid by every Kafka client on every produce and fetch; here each
field is read or written for all of a batch's records at once: varints byte lane by byte
lane (``_MAX_VARINT`` lanes), keys and values moved between their blobs and the rows with
one masked copy each. Only the walk from one row's start to the next (a row's length says
where the next begins) stays a Python loop, and a short one.

Records with headers, varints wider than 32 bits, and anything that does not check out are
not handled here: the functions raise ``Unfit`` and ``batches`` converts that batch row by row,
which also words the error for bytes that are damaged. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import numpy as np

# Every field read or written here fits 32 bits before zigzag encoding: 5 bytes of 7 bits.
_MAX_VARINT = 5
_FITS = 1 << (7 * _MAX_VARINT)
_PADDING = bytes(_MAX_VARINT)
_VARINT_BOUNDS = np.array([1 << (7 * k) for k in range(1, _MAX_VARINT)], np.int64)  # from each, one byte more


class Unfit(Exception):
    """A batch this module does not convert (headers, wide varints, bytes that do not check
    out): the caller converts it row by row."""


class Columns(NamedTuple):
    """A batch's records as kraftlog stores them: int64 arrays (-1: a null key or value) and
    the key and value bytes back to back, nulls taking none."""

    timestamp_deltas: np.ndarray
    key_lengths: np.ndarray
    value_lengths: np.ndarray
    keys: bytes
    values: bytes


def _zigzag(x: np.ndarray) -> np.ndarray:
    return (x << 1) ^ (x >> 63)


def _varint_sizes(z: np.ndarray) -> np.ndarray:
    """How many bytes each zigzag value's varint takes: one ``searchsorted`` over the bounds
    where a varint grows a byte (one call, not a compare per byte: batches of a few hundred
    records pay numpy's per-call cost more than the work)."""
    if len(z) and int(z.max()) >= _FITS:
        raise Unfit("a varint wider than 32 bits")
    return np.searchsorted(_VARINT_BOUNDS, z, side="right") + 1


def _put_varints(out: np.ndarray, at: np.ndarray, z: np.ndarray, sizes: np.ndarray) -> None:
    """Writes the zigzag varints ``z`` (of ``sizes`` bytes) at ``at`` in ``out``: the first
    lane for every varint at once, each further lane only for those still going (most are
    one byte, so the later lanes touch few)."""
    out[at] = (z & 0x7F) | ((sizes > 1) << 7)
    going = np.flatnonzero(sizes > 1)
    for k in range(1, _MAX_VARINT):
        if not len(going):
            return
        more = sizes[going] > k + 1
        out[at[going] + k] = ((z[going] >> (7 * k)) & 0x7F) | (more << 7)
        going = going[more]


def _get_varints(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, sizes) of the zigzag varints at ``at`` in ``buf`` (padded with ``_MAX_VARINT``
    bytes, so a read near the end stays inside it; positions past it are clipped and caught
    by the caller's end checks). Lane by lane, each lane only for the varints still going:
    most are one byte."""
    at = np.minimum(at, len(buf) - _MAX_VARINT)
    lane = buf[at]
    z = (lane & 0x7F).astype(np.int64)
    sizes = np.ones(len(at), np.int64)
    going = np.flatnonzero(lane >= 0x80)
    for k in range(1, _MAX_VARINT + 1):
        if not len(going):
            return (z >> 1) ^ -(z & 1), sizes
        if k == _MAX_VARINT:
            break
        lane = buf[at[going] + k]
        z[going] |= (lane & 0x7F).astype(np.int64) << (7 * k)
        sizes[going] += 1
        going = going[lane >= 0x80]
    raise Unfit("a varint wider than 32 bits")


def _spans(total: int, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A mask of ``total`` bytes, True inside each span [start, start + length); the spans are
    disjoint and in order, so a masked copy moves a blob's items to (or from) them in order.
    Built as runs (gap, span, gap, span, ..., gap) of False and True: one ``np.repeat`` of
    the alternating pattern (odd indices: spans)."""
    runs = np.empty(2 * len(starts) + 1, np.int64)
    ends = starts + lengths
    runs[0] = starts[0]
    runs[1::2] = lengths
    runs[2:-1:2] = starts[1:] - ends[:-1]
    runs[-1] = total - ends[-1]
    return np.repeat((np.arange(len(runs)) & 1).astype(bool), runs)


def kafka_rows(columns: Columns) -> bytes:
    """The Kafka rows (attributes 0, offset deltas 0, 1, ..., no headers) of ``columns``."""
    deltas, key_lengths, value_lengths = columns.timestamp_deltas, columns.key_lengths, columns.value_lengths
    n = len(deltas)
    fields = [_zigzag(deltas), np.arange(n, dtype=np.int64) << 1, _zigzag(key_lengths), _zigzag(value_lengths)]
    sizes = [_varint_sizes(z) for z in fields]
    key_bytes, value_bytes = np.maximum(key_lengths, 0), np.maximum(value_lengths, 0)
    row = 2 + sizes[0] + sizes[1] + sizes[2] + key_bytes + sizes[3] + value_bytes  # + attributes and header count
    row_z = row << 1
    row_sizes = _varint_sizes(row_z)
    ends = np.cumsum(row_sizes + row)
    total = int(ends[-1])
    starts = ends - row_sizes - row
    out = np.zeros(total, np.uint8)  # the attributes and the header count are zero bytes
    _put_varints(out, starts, row_z, row_sizes)
    at = starts + row_sizes + 1
    for z, size in zip(fields[:3], sizes[:3]):
        _put_varints(out, at, z, size)
        at = at + size
    key_at, at = at, at + key_bytes
    _put_varints(out, at, fields[3], sizes[3])
    at = at + sizes[3]
    if columns.keys:
        out[_spans(total, key_at, key_bytes)] = np.frombuffer(columns.keys, np.uint8)
    if columns.values:
        out[_spans(total, at, value_bytes)] = np.frombuffer(columns.values, np.uint8)
    return out.tobytes()


def _row_length(rows: bytes, pos: int) -> tuple[int, int]:
    """(length, varint size) of the row at ``pos``: its zigzag length varint."""
    z = shift = size = 0
    while True:
        if size == _MAX_VARINT:
            raise Unfit("a row length wider than 32 bits")
        byte = rows[pos + size]
        z |= (byte & 0x7F) << shift
        shift, size = shift + 7, size + 1
        if byte < 0x80:
            return z >> 1, size


def _same_stride(buf: np.ndarray, pos: int, stride: int, head: bytes, most: int) -> int:
    """How many of the (at most ``most``) rows after the one at ``pos`` start with the same
    length varint (``head``) one ``stride`` after another, i.e. take as many bytes: one
    compare per varint byte over all of them at once."""
    most = min(most, (len(buf) - _MAX_VARINT - 1 - pos) // stride)
    if most <= 0:
        return 0
    at = pos + stride * np.arange(1, most + 1)
    same = buf[at] == head[0]
    for k in range(1, len(head)):
        same &= buf[at + k] == head[k]
    return most if same.all() else int(np.argmin(same))


# Fixed-stride runs tried per batch, and the shortest that is worth another try: records of
# one size make a few long runs (a row grows a byte where its offset delta's varint does, at
# 64 and 8,192); records of many sizes fall back to the loop after one or two tries.
_RUNS_TRIED = 8
_RUN_WORTH_IT = 4


def _row_starts(rows: bytes, buf: np.ndarray, count: int) -> np.ndarray:
    """Where each of ``count`` rows begins (``buf``: ``rows`` padded): each row's length
    varint says where the next one does. Records of one size are the common case a batch is
    made of (fixed-size values, keys and timestamps' varints of one size), so runs of rows
    one stride apart are found with whole-array compares (``_same_stride``); the rest is
    walked row by row in Python. The caller checks the lengths and where they lead with
    whole-array checks."""
    starts = np.empty(count, np.int64)
    i = pos = 0
    try:
        for _ in range(_RUNS_TRIED):
            if i == count:
                break
            length, size = _row_length(rows, pos)
            stride = size + length
            run = 1 + _same_stride(buf, pos, stride, rows[pos:pos + size], count - i - 1)
            starts[i:i + run] = pos + stride * np.arange(run)
            i, pos = i + run, pos + stride * run
            if run < _RUN_WORTH_IT:
                break
        rest = array("q", bytes(8 * (count - i)))
        for j in range(len(rest)):  # the loop's common steps inline: lengths of one or two bytes
            rest[j] = pos
            byte = rows[pos]
            if byte < 0x80:
                pos += 1 + (byte >> 1)
                continue
            second = rows[pos + 1]
            if second < 0x80:
                pos += 2 + (((byte & 0x7F) | (second << 7)) >> 1)
                continue
            length, size = _row_length(rows, pos)
            pos += size + length
        starts[i:] = np.frombuffer(rest, np.int64)
    except IndexError:
        raise Unfit("rows run past the records") from None
    if pos != len(rows):
        raise Unfit("the rows do not end where the records do")
    return starts


def kraftlog_columns(rows: bytes, count: int) -> Columns:
    """The columns of ``count`` Kafka rows without headers whose offset deltas are 0, 1, ...;
    ``Unfit`` for anything else."""
    if count < 1:
        raise Unfit("no records")
    buf = np.frombuffer(rows + _PADDING, np.uint8)
    starts = _row_starts(rows, buf, count)
    lengths, sizes = _get_varints(buf, starts)
    ends = starts + sizes + lengths
    if int(lengths.min()) < 0 or not np.array_equal(ends[:-1], starts[1:]):
        raise Unfit("a negative row length")
    at = starts + sizes + 1  # past the attributes, unused in v2
    deltas, sizes = _get_varints(buf, at)
    at = at + sizes
    offset_deltas, sizes = _get_varints(buf, at)
    if not np.array_equal(offset_deltas, np.arange(count)):
        raise Unfit("offset deltas other than 0, 1, 2, ...")
    at = at + sizes
    key_lengths, sizes = _get_varints(buf, at)
    key_at = at + sizes
    key_bytes = np.maximum(key_lengths, 0)
    at = key_at + key_bytes
    value_lengths, sizes = _get_varints(buf, at)
    value_at = at + sizes
    value_bytes = np.maximum(value_lengths, 0)
    at = value_at + value_bytes
    header_counts, sizes = _get_varints(buf, at)
    if header_counts.any():
        raise Unfit("records with headers")
    if min(int(key_lengths.min()), int(value_lengths.min())) < -1 or not np.array_equal(at + sizes, ends):
        raise Unfit("rows whose fields do not add up to their lengths")
    # Every position grew from a row's start by non-negative steps to that row's end: the spans lie inside ``rows``.
    body = buf[: len(rows)]
    keys = body[_spans(len(rows), key_at, key_bytes)].tobytes() if key_bytes.any() else b""
    values = body[_spans(len(rows), value_at, value_bytes)].tobytes() if value_bytes.any() else b""
    return Columns(deltas, key_lengths, value_lengths, keys, values)
