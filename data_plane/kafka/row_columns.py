"""Kafka's varint record rows to kraftlog's columns and back, a whole batch per numpy call.

A Kafka record is a row of zigzag varints and bytes (length, attributes, timestamp delta,
offset delta, key, value, header count, headers); kraftlog keeps the same fields as columns
(docs/protocol.md, "Record batch format"). Converting row by row in Python costs a few
microseconds per record, paid by every Kafka client on every produce and fetch; here each
field is read or written for all of a batch's records at once: varints byte lane by byte
lane (``_MAX_VARINT`` lanes), keys and values moved between their blobs and the rows with
one masked copy each. Only the walk from one row's start to the next (a row's length says
where the next begins) stays a Python loop, and a short one.

Records of one size are the common case (fixed-size values, keys of one size or none, a
batch's timestamps milliseconds apart): their rows differ only in the offset and timestamp
deltas. Such rows are found as runs one stride apart (whole-array compares of their length
varints) when read, and written as 2-D blocks, a row per line, where every field is a
column range: one strided write per field for all the rows, no scattered writes or masks.

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
    delta_sizes = _varint_sizes(fields[0])
    runs = _layout_runs(delta_sizes, key_lengths, value_lengths)
    if runs is not None:
        return _rows_by_layout_runs(runs, fields, delta_sizes, columns)
    sizes = [delta_sizes] + [_varint_sizes(z) for z in fields[1:]]
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


# Runs of rows of one layout a batch is written as, at most: records of one size make one to
# four (offset deltas' varints grow a byte at 64 and 8,192, a timestamp delta's at 64 ms);
# records of many sizes are written field by field over the whole batch instead.
_MOST_LAYOUT_RUNS = 8
_OFFSET_DELTA_GROWS = (64, 8_192, 1 << 20, 1 << 27)  # where an offset delta's zigzag varint takes one byte more


def _layout_runs(*per_row: np.ndarray) -> list[int] | None:
    """Where the runs of rows with one layout begin (rows alike in every ``per_row`` column
    and in their offset delta's varint size), and the row count at the end; None for more
    than ``_MOST_LAYOUT_RUNS`` runs."""
    n = len(per_row[0])
    change = np.zeros(n, bool)
    for column in per_row:
        change[1:] |= column[1:] != column[:-1]
    begins = np.flatnonzero(change)
    if len(begins) >= _MOST_LAYOUT_RUNS:
        return None
    edges = {0, n, *begins.tolist(), *(grows for grows in _OFFSET_DELTA_GROWS if grows < n)}
    return sorted(edges) if len(edges) - 1 <= _MOST_LAYOUT_RUNS else None


def _rows_by_layout_runs(runs: list[int], fields: list[np.ndarray], delta_sizes: np.ndarray, columns: Columns) -> bytes:
    """``kafka_rows`` for a batch of a few runs of rows with one layout: each run is a 2-D block
    of the output, a row per line (``_put_row_block``)."""
    blocks = []
    keys, values = np.frombuffer(columns.keys, np.uint8), np.frombuffer(columns.values, np.uint8)
    key_at = value_at = 0
    for a, b in zip(runs[:-1], runs[1:]):
        m = b - a
        kb, vb = max(int(columns.key_lengths[a]), 0), max(int(columns.value_lengths[a]), 0)
        sizes = [int(delta_sizes[a])] + [len(_varint_bytes(int(z[a]))) for z in fields[1:]]
        row = 2 + sum(sizes) + kb + vb
        block = np.zeros((m, len(_varint_bytes(row << 1)) + row), np.uint8)
        _put_row_block(block, row << 1, (fields[0][a:b], fields[1][a:b]), (sizes[0], sizes[1]),
                       int(fields[2][a]), keys[key_at:key_at + m * kb], int(fields[3][a]), values[value_at:value_at + m * vb])
        blocks.append(block.tobytes())
        key_at, value_at = key_at + m * kb, value_at + m * vb
    return b"".join(blocks)


def _varint_bytes(z: int) -> np.ndarray:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return np.frombuffer(bytes(out), np.uint8)


def _put_row_block(block: np.ndarray, row_z: int, varying: tuple[np.ndarray, np.ndarray],
                   varying_sizes: tuple[int, int], key_z: int, keys: np.ndarray, value_z: int, values: np.ndarray) -> None:
    """Rows of one layout, one per line of ``block`` (zeroed): every field is a column range of
    it, so each is one strided write for all the rows (the length, the key's and the value's
    length: the same bytes in every row; the timestamp and offset deltas: one write per
    varint byte; the key and the value: one 2-D copy each) instead of a scattered write per
    field. ``row_z``, ``key_z``, ``value_z``: the zigzag lengths, alike in every row."""
    m = len(block)
    length = _varint_bytes(row_z)
    block[:, :len(length)] = length
    col = len(length) + 1  # the attributes: 0
    for z, size in zip(varying, varying_sizes):
        for k in range(size):
            block[:, col + k] = ((z >> (7 * k)) & 0x7F) | (0x80 if k < size - 1 else 0)
        col += size
    for item_z, items in ((key_z, keys), (value_z, values)):
        head = _varint_bytes(item_z)
        block[:, col:col + len(head)] = head
        col += len(head)
        width = len(items) // m
        if width:
            block[:, col:col + width] = items.reshape(m, width)
        col += width


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
