"""The record batch: kraftlog's unit of storage, replication and transfer.

One format serves the producer (encode), the broker (validate, stamp offsets, store and send
the bytes untouched) and the consumer (decode). A batch is a fixed little-endian header and
a columnar body, so that n records are encoded and decoded with a handful of C-level calls
(``struct.pack`` over a length array, ``b"".join``, slicing driven by
``itertools.accumulate``) rather than n rounds of per-record varint code. Decoding checks
the lengths with sums and cuts the per-record columns only when they are read, so readers
that want another columnar form (Arrow) can take the buffers as they are (``BodyLayout``).

Header (``HEADER_SIZE`` = 61 bytes)::

    base_offset int64 | batch_length int32 | leader_epoch int32 | magic int8 | crc uint32   <- prefix
    attributes int16 | last_offset_delta int32 | first_timestamp int64 | max_timestamp int64
    producer_id int64 | producer_epoch int16 | base_sequence int32 | record_count int32

The CRC (CRC-32 as ``zlib.crc32`` computes it, as in zip and Ethernet, not Kafka's CRC-32C)
covers everything after the crc field to the end of the batch. It is computed with
zlib-ng's vectorised ``crc32``: the same function, about ten times faster than the system
zlib's on this project's machines, and every batch is checked by the producer, the leader,
each follower and the consumer. The prefix stays outside it so the
leader can stamp ``base_offset`` and ``leader_epoch`` without touching the CRC. The one
exception is LogAppendTime: the broker sets attribute bit 3 and ``max_timestamp`` (both
covered) and recomputes the CRC (``set_log_append_time``). Readers of a LogAppendTime batch
see every record stamped with ``max_timestamp``. docs/protocol.md ("Record batch format")
specifies the format for other languages; proto/testdata/record_batches.json holds test
vectors (``record_batch_vectors``).

Attributes: bits 0-2 compression (0 none, 1 lz4, 2 zstd), bit 3 timestamp type (0 CreateTime,
1 LogAppendTime), bit 4 transactional, bit 5 control (a transaction marker: ``control_batch``;
clients may not produce one).

Body (compressed as a whole into one lz4 or zstd *frame* when compressed, see
``batch_compression``), n records, h headers::

    n x int32 timestamp delta from first_timestamp | n x int32 key length (-1 = null)
    n x int32 value length (-1 = null)             | n x int32 header count
    h x int32 header-key length                    | h x int32 header-value length (-1 = null)
    key bytes | value bytes | header keys (utf-8) | header values
"""

from __future__ import annotations

import codecs
import struct
import sys
import time
from array import array
from dataclasses import dataclass
from itertools import accumulate, chain, islice, repeat
from operator import add, sub
from typing import ClassVar, Iterator, NamedTuple, Sequence

from zlib_ng.zlib_ng import crc32

from data_plane.batch_compression import BodyCompressionError, compress, decompress
from data_plane.batch_compression import CODES as COMPRESSION_CODES
from data_plane.batch_compression import NAMES as COMPRESSION_NAMES
from server_common.errors import ErrorCode

MAGIC = 2

_HEADER = struct.Struct("<qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size
_CRC_FIELD = struct.Struct("<I")
_CRC_POS = 17  # offset of the crc field inside the header
_CRC_START = 21  # first byte covered by the CRC
_ATTRIBUTES = struct.Struct("<h")
_MAX_TIMESTAMP = struct.Struct("<q")
_MAX_TIMESTAMP_POS = 35
_BASE_OFFSET = struct.Struct("<q")
_LEADER_EPOCH = struct.Struct("<i")
_LEADER_EPOCH_POS = 12
assert HEADER_SIZE == 61 and array("i").itemsize == 4

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1

_NULL_LENGTH = struct.pack("<i", -1)
_INT32 = struct.Struct("<i")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


class CorruptBatchError(ValueError):
    """Bytes that are not a valid record batch; the message says what is wrong and where."""


class InvalidRecordError(CorruptBatchError):
    """A batch whose CRC matches but whose fields or body break the format: its writer encoded
    it wrong, so no reader could use it. ``error_code`` is the protocol's answer."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_RECORD


class InvalidTimestampError(InvalidRecordError):
    """A batch whose timestamps are negative or disagree with its header."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_TIMESTAMP


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset right after this batch's last record."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> str:
        """``"none"``, ``"lz4"`` or ``"zstd"`` (the names ``encode_batch`` takes), ``"unknown"`` for another code."""
        return COMPRESSION_NAMES.get(self.attributes & COMPRESSION_MASK, "unknown")

    @property
    def timestamp_type(self) -> int:
        """``CREATE_TIME`` (0) or ``LOG_APPEND_TIME`` (1), as in the protocol's ``timestamp_type``."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class BodyLayout(NamedTuple):
    """Where the columns of one decompressed batch body lie: byte positions in ``body``.

    For building another columnar form (Arrow arrays) straight from the buffers, with no
    per-record objects. The int32 columns are little-endian: timestamp deltas at
    ``[0, 4n)``, key lengths at ``[4n, 8n)``, value lengths at ``[8n, 12n)`` (-1 = null);
    the key blob is ``[keys_at, values_at)`` and the value blob ``[values_at,
    header_names_at)``, items back to back in record order, nulls taking no bytes.
    """

    body: bytes | memoryview  # a view of the batch's immutable bytes, or its own copy
    record_count: int
    header_count: int
    key_nulls: int
    value_nulls: int
    keys_at: int
    values_at: int
    header_names_at: int
    header_values_at: int

    @property
    def key_lengths_at(self) -> int:
        return 4 * self.record_count

    @property
    def value_lengths_at(self) -> int:
        return 8 * self.record_count


class DecodedBatch:
    """One batch's header and its records as parallel columns (one list per field).

    ``decode_batch`` validates the whole body at once but cuts the offset, timestamp, key
    and value columns out of it only when they are first read, and keeps the body's
    ``layout``: a reader that turns the body into another columnar form (the Spark source
    builds Arrow arrays from it) never pays for n bytes objects. A batch built from lists
    (``DecodedBatch(header, offsets, ...)``, as the consumer does when it cuts a batch) has
    no layout.
    """

    __slots__ = ("header", "layout", "headers", "_offsets", "_timestamps", "_keys", "_values")
    __hash__ = None  # equality compares mutable columns

    def __init__(
        self,
        header: BatchHeader,
        offsets: list[int],
        timestamps: list[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        headers: list[tuple[tuple[str, bytes | None], ...]],
    ) -> None:
        self.header = header
        self.layout: BodyLayout | None = None
        self._offsets: list[int] | None = offsets
        self._timestamps: list[int] | None = timestamps
        self._keys: list[bytes | None] | None = keys
        self._values: list[bytes | None] | None = values
        self.headers = headers

    @classmethod
    def from_layout(
        cls, header: BatchHeader, layout: BodyLayout, headers: list[tuple[tuple[str, bytes | None], ...]]
    ) -> DecodedBatch:
        """A batch whose offset, timestamp, key and value columns come from a validated body on demand."""
        batch = cls.__new__(cls)
        batch.header = header
        batch.layout = layout
        batch._offsets = batch._timestamps = batch._keys = batch._values = None
        batch.headers = headers
        return batch

    @property
    def offsets(self) -> list[int]:
        if self._offsets is None:
            base = self.header.base_offset
            self._offsets = list(range(base, base + self.header.record_count))
        return self._offsets

    @property
    def timestamps(self) -> list[int]:
        if self._timestamps is None:
            header, n = self.header, self.header.record_count
            if header.timestamp_type == LOG_APPEND_TIME:
                self._timestamps = [header.max_timestamp] * n
            else:
                deltas = _unpack_int32s(self.layout.body, 0, n)
                self._timestamps = list(map(add, deltas, repeat(header.first_timestamp)))
        return self._timestamps

    @property
    def keys(self) -> list[bytes | None]:
        if self._keys is None:
            self._keys = self._cut(self.layout.key_lengths_at, self.layout.keys_at)
        return self._keys

    @property
    def values(self) -> list[bytes | None]:
        if self._values is None:
            self._values = self._cut(self.layout.value_lengths_at, self.layout.values_at)
        return self._values

    def _cut(self, lengths_at: int, blob_at: int) -> list[bytes | None]:
        body = self.layout.body
        return _cut_column(body, _unpack_int32s(body, lengths_at, self.header.record_count), blob_at)

    def records(self) -> list[Record]:
        return list(map(Record, self.offsets, self.timestamps, self.keys, self.values, self.headers))

    def _columns(self) -> tuple:
        return (self.header, self.offsets, self.timestamps, self.keys, self.values, self.headers)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._columns() == other._columns()

    def __repr__(self) -> str:
        return (
            f"DecodedBatch(header={self.header!r}, offsets={self.offsets!r}, timestamps={self.timestamps!r}, "
            f"keys={self.keys!r}, values={self.values!r}, headers={self.headers!r})"
        )


# ---------------------------------------------------------------------------------- encode


def encode_batch(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    timestamps_ms: Sequence[int] | int | None = None,
    *,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    now_ms: int | None = None,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode records into one batch with base offset 0 and leader epoch -1 (the leader stamps both).

    ``timestamps_ms`` is one timestamp per record, one for all, or None for ``now_ms``
    (default: the wall clock). ``transactional`` sets attribute bit 4 (the records belong to
    the producer's open transaction; it needs a producer id); ``control`` sets bit 5 and is
    for ``control_batch`` alone (markers). Raises ValueError for input that cannot be encoded.
    """
    n = len(values)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    if compression not in COMPRESSION_CODES:
        raise ValueError(f"unknown compression {compression!r}: use one of {', '.join(COMPRESSION_CODES)}")
    first_ts, max_ts, ts_column = _timestamp_column(n, timestamps_ms, now_ms)
    value_lengths, value_blob = _bytes_column(values)
    key_lengths, key_blob = _key_column(n, keys)
    header_columns = _header_columns(n, headers)
    body = b"".join([ts_column, key_lengths, value_lengths, *header_columns[:3], key_blob, value_blob, *header_columns[3:]])
    return seal_batch(body, n, first_ts, max_ts, compression=compression, producer_id=producer_id,
                      producer_epoch=producer_epoch, base_sequence=base_sequence, transactional=transactional, control=control)


def seal_batch(
    body: bytes,
    record_count: int,
    first_timestamp: int,
    max_timestamp: int,
    *,
    compression: str,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """The batch around an uncompressed ``body`` of ``record_count`` records (its columns laid
    out as the module docstring says): compressed, headed and CRC'd, at base offset 0 and
    leader epoch -1. For converters that build the columns themselves (the Kafka door);
    ``encode_batch`` is the checked way in from records."""
    if (transactional or control) and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id (from InitProducerId)")
    attributes = COMPRESSION_CODES[compression] | (TRANSACTIONAL_BIT if transactional else 0)
    attributes |= CONTROL_BIT if control else 0
    body = compress(compression, body)
    covered = _HEADER.pack(
        0, HEADER_SIZE + len(body), -1, MAGIC, 0, attributes, record_count - 1, first_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, record_count,
    )
    crc = crc32(body, crc32(memoryview(covered)[_CRC_START:]))
    return b"".join([covered[:_CRC_POS], _CRC_FIELD.pack(crc), covered[_CRC_START:], body])


def _pack_int32s(ints: Sequence[int] | Iterator[int]) -> bytes:
    """Little-endian int32 array; OverflowError when a value does not fit."""
    packed = array("i", ints)
    if not _LITTLE_ENDIAN_HOST:
        packed.byteswap()
    return packed.tobytes()


def _timestamp_column(n: int, timestamps_ms: Sequence[int] | int | None, now_ms: int | None) -> tuple[int, int, bytes]:
    if timestamps_ms is None:
        timestamps_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    if isinstance(timestamps_ms, int):
        return timestamps_ms, timestamps_ms, bytes(4 * n)
    if len(timestamps_ms) != n:
        raise ValueError(f"got {len(timestamps_ms)} timestamps for {n} values: pass one per record, one int, or None")
    first = timestamps_ms[0]
    try:
        column = _pack_int32s(map(sub, timestamps_ms, repeat(first)))
    except OverflowError:
        raise ValueError("timestamps in one batch must lie within about 24 days of the first record's: split the batch") from None
    return first, max(timestamps_ms), column


def _bytes_column(items: Sequence[bytes | None]) -> tuple[bytes, bytes]:
    """(packed lengths with -1 for None, concatenated bytes)."""
    if None in items:
        lengths = [-1 if item is None else len(item) for item in items]
        return _pack_int32s(lengths), b"".join([item for item in items if item is not None])
    return _pack_int32s(map(len, items)), b"".join(items)


def _key_column(n: int, keys: Sequence[bytes | None] | None) -> tuple[bytes, bytes]:
    if keys is None:
        return _NULL_LENGTH * n, b""
    if len(keys) != n:
        raise ValueError(f"got {len(keys)} keys for {n} values: pass one key (or None) per record")
    return _bytes_column(keys)


def _header_columns(n: int, headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None) -> list[bytes]:
    """[counts, key lengths, value lengths, key blob, value blob]."""
    if headers is None:
        return [bytes(4 * n), b"", b"", b"", b""]
    if len(headers) != n:
        raise ValueError(f"got {len(headers)} header lists for {n} values: pass one (possibly empty) list per record")
    per_record = [h or () for h in headers]
    flat = list(chain.from_iterable(per_record))
    names = [name.encode("utf-8") for name, _ in flat]
    name_lengths, name_blob = _bytes_column(names)
    value_lengths, value_blob = _bytes_column([value for _, value in flat])
    return [_pack_int32s(map(len, per_record)), name_lengths, value_lengths, name_blob, value_blob]


# ---------------------------------------------------------------------------------- header


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos`` without any check (the caller knows the bytes are whole)."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def first_base_offset(buf: bytes | bytearray | memoryview) -> int:
    """The base offset of the first batch in ``buf``; -1 when it holds no whole header (the
    receiver's checks of the batches themselves come later, at the append)."""
    return read_header(buf).base_offset if len(buf) >= _HEADER.size else -1


def _checked_header(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int | None) -> BatchHeader:
    """Header at ``pos`` after the structural checks (length fits, magic, counts); no CRC."""
    available = len(buf) - pos if max_bytes is None else min(max_bytes, len(buf) - pos)
    if available < HEADER_SIZE:
        raise CorruptBatchError(f"batch at position {pos}: only {available} bytes left, a batch header needs {HEADER_SIZE}")
    header = read_header(buf, pos)
    if header.magic != MAGIC:
        raise CorruptBatchError(f"batch at position {pos}: magic {header.magic}, expected {MAGIC} (not a kraftlog batch or corrupt)")
    if not HEADER_SIZE <= header.batch_length <= available:
        raise CorruptBatchError(
            f"batch at position {pos}: batch_length {header.batch_length} runs past the {available} bytes available (truncated?)"
            if header.batch_length > available
            else f"batch at position {pos}: batch_length {header.batch_length} is shorter than the {HEADER_SIZE}-byte header"
        )
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise CorruptBatchError(
            f"batch at position {pos}: record_count {header.record_count} and last_offset_delta "
            f"{header.last_offset_delta} disagree (need record_count > 0 and last_offset_delta = record_count - 1)"
        )
    if header.compression == "unknown":
        raise CorruptBatchError(f"batch at position {pos}: unknown compression code {header.attributes & COMPRESSION_MASK}")
    return header


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int | None = None) -> BatchHeader:
    """Check the batch at ``pos`` (within ``max_bytes`` of it, default: to the end of ``buf``).

    Checks that the length fits, the magic, the record count, the compression code and the
    CRC; raises CorruptBatchError saying which failed.
    """
    header = _checked_header(buf, pos, max_bytes)
    crc = crc32(memoryview(buf)[pos + _CRC_START : pos + header.batch_length])
    if crc != header.crc:
        raise CorruptBatchError(f"batch at position {pos} (base offset {header.base_offset}): CRC {crc:#010x} does not match stored {header.crc:#010x}")
    return header


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each of the concatenated batches in ``buf``, each fully validated."""
    pos = 0
    while pos < len(buf):
        header = validate_batch(buf, pos)
        yield pos, header
        pos += header.batch_length


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Like ``iter_batches`` but without the CRC: for bytes already validated (read from our own log)."""
    pos = 0
    while pos < len(buf):
        header = _checked_header(buf, pos, None)
        yield pos, header
        pos += header.batch_length


# ---------------------------------------------------------------------------------- append checks


def validate_for_append(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Everything the leader checks before storing the batch at ``pos``: ``validate_batch``
    (length, magic, counts, CRC), then the producer and timestamp fields, then the body's
    structure, so that every batch it stores is one every reader can decode.

    The body check reads only the four int32 length columns (C-level ``min``/``sum`` over
    arrays, no per-record Python work): header counts >= 0, lengths >= -1, and the lengths
    adding up to exactly the body's size. A compressed body is decompressed once for this
    (lz4 runs at GB/s, on the order of the CRC; zstd at around 1 GB/s) and the result dropped:
    the stored batch stays compressed as the producer sent it. Timestamps: see
    ``_check_timestamps``. Raises CorruptBatchError for a CRC failure, InvalidRecordError (or
    InvalidTimestampError) for a batch whose CRC matches but whose content is wrong.
    """
    header = validate_batch(buf, pos)
    try:
        _check_producer_fields(header)
        body = memoryview(buf)[pos + HEADER_SIZE : pos + header.batch_length]
        if header.compression != "none":
            body = memoryview(_decompressed(header, body))
        _check_header_keys(*_body_layout(header, body))
        if header.timestamp_type == CREATE_TIME:
            _check_timestamps(header, body)
    except InvalidRecordError as exc:
        raise type(exc)(f"batch at position {pos}: {exc}") from None
    except CorruptBatchError as exc:
        raise InvalidRecordError(f"batch at position {pos}: its CRC matches but its body does not parse: {exc}") from None
    return header


def _check_producer_fields(header: BatchHeader) -> None:
    if header.is_control:
        raise InvalidRecordError(
            "a control batch (attribute bit 5: a transaction marker) cannot be produced by a client; markers are "
            "written only by the transaction coordinator: clear bit 5"
        )
    if header.is_transactional and header.producer_id == NO_PRODUCER_ID:
        raise InvalidRecordError(
            "a transactional batch (attribute bit 4) needs a producer id, epoch and sequence from InitProducerId; "
            "clear bit 4 or set the producer fields"
        )
    if header.producer_id == NO_PRODUCER_ID:
        if header.producer_epoch != -1 or header.base_sequence != -1:
            raise InvalidRecordError(
                f"producer_id -1 (not idempotent) needs producer_epoch -1 and base_sequence -1, got "
                f"{header.producer_epoch} and {header.base_sequence}"
            )
    elif header.producer_id < 0 or header.producer_epoch < 0 or header.base_sequence < 0:
        raise InvalidRecordError(
            f"producer_id {header.producer_id}, producer_epoch {header.producer_epoch} and base_sequence "
            f"{header.base_sequence} must all be >= 0 (an id from InitProducerId), or -1, -1, -1 without idempotence"
        )


def _check_timestamps(header: BatchHeader, body: bytes | memoryview) -> None:
    """Record timestamps (first_timestamp + an int32 delta) must be >= 0: only a first
    timestamp below 2**31 ms (January 1970) lets a delta make one negative, so only then is
    the delta column read. ``max_timestamp`` is checked against the header alone (>= the
    first timestamp, within the int32 delta range), not against each record."""
    first, largest = header.first_timestamp, header.max_timestamp
    if first < 0:
        raise InvalidTimestampError(f"timestamps must be >= 0 (ms since the epoch), got first_timestamp {first}")
    if first <= _INT32_MAX and first + min(_unpack_int32s(body, 0, header.record_count)) < 0:
        raise InvalidTimestampError("timestamps must be >= 0 (ms since the epoch): a record's delta makes its timestamp negative")
    if not first <= largest <= first + _INT32_MAX:
        raise InvalidTimestampError(
            f"max_timestamp {largest} must lie between first_timestamp {first} and {first} + 2**31 - 1 (the deltas' range)"
        )


def _check_header_keys(layout: BodyLayout, null_keys: int) -> None:
    """Header keys are never null and are utf-8: checked over the whole key blob at once (a
    multi-byte character split across two adjacent keys is the one case this lets through)."""
    if null_keys:
        raise InvalidRecordError("a header key is null (only header values may be)")
    try:
        codecs.decode(layout.body[layout.header_names_at : layout.header_values_at], "utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"header keys are not utf-8 ({exc.reason} at byte {exc.start} of the key blob)") from None


def _decompressed(header: BatchHeader, body: bytes | memoryview) -> bytes:
    """The batch's body decompressed (one whole frame within ``batch_compression``'s size limit, else InvalidRecordError)."""
    try:
        return decompress(header.compression, body)
    except BodyCompressionError as exc:
        raise InvalidRecordError(str(exc)) from None


# ---------------------------------------------------------------------------------- broker edits


def stamp_batch(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Write base offset and leader epoch into the batch at ``pos`` (outside the CRC's span)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _LEADER_EPOCH.pack_into(buf, pos + _LEADER_EPOCH_POS, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, ts_ms: int) -> None:
    """Mark the batch at ``pos`` LogAppendTime with ``max_timestamp = ts_ms`` and recompute its CRC.

    The only edit inside the CRC's span: the batch must already be validated.
    """
    header = read_header(buf, pos)
    _ATTRIBUTES.pack_into(buf, pos + _CRC_START, header.attributes | TIMESTAMP_TYPE_BIT)
    _MAX_TIMESTAMP.pack_into(buf, pos + _MAX_TIMESTAMP_POS, ts_ms)
    crc = crc32(memoryview(buf)[pos + _CRC_START : pos + header.batch_length])
    _CRC_FIELD.pack_into(buf, pos + _CRC_POS, crc)


# ---------------------------------------------------------------------------------- decode


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> DecodedBatch:
    """Validate and decode the batch at ``pos`` into columns."""
    header = validate_batch(buf, pos)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.batch_length]
    # A view of immutable bytes costs no copy (the consumer's fetched bytes: the batch keeps
    # them alive); anything mutable is copied, so later writes to ``buf`` cannot change it.
    if not isinstance(buf, bytes):
        body = bytes(body)
    try:
        if header.compression != "none":
            body = _decompressed(header, body)
        return _decode_body(header, body)
    except CorruptBatchError as exc:
        raise CorruptBatchError(f"batch at position {pos} (base offset {header.base_offset}): {exc}") from None


def decode_batches(buf: bytes | bytearray | memoryview) -> Iterator[DecodedBatch]:
    """Each of the concatenated batches in ``buf``, validated (CRC once) and decoded."""
    pos = 0
    while pos < len(buf):
        batch = decode_batch(buf, pos)
        yield batch
        pos += batch.header.batch_length


def _unpack_int32s(body: bytes | memoryview, start: int, count: int) -> array:
    if start + 4 * count > len(body):
        raise CorruptBatchError(f"body of {len(body)} bytes is too short for its length columns")
    ints = array("i")
    ints.frombytes(body[start : start + 4 * count])
    if not _LITTLE_ENDIAN_HOST:
        ints.byteswap()
    return ints


def _body_layout(header: BatchHeader, body: bytes | memoryview) -> tuple[BodyLayout, int]:
    """(layout, null header keys) after checking every length against the body, with
    ``_int32_total`` over whole columns (no per-record work). Ends are monotonic (every
    item takes >= 0 bytes), so the final end matching the body's size bounds all of them.
    Shared by decoding and the append check."""
    n, size = header.record_count, len(body)
    if 16 * n > size:
        raise CorruptBatchError(f"body of {size} bytes is too short for its length columns")
    view = memoryview(body)
    try:
        h, negative_counts = _int32_total(view[12 * n : 16 * n])
    except CorruptBatchError:
        negative_counts = 1
    if negative_counts:
        raise CorruptBatchError("negative header count")
    keys_at = 16 * n + 8 * h
    if keys_at > size:
        raise CorruptBatchError(f"body of {size} bytes is too short for its length columns")
    key_bytes, key_nulls = _int32_total(view[4 * n : 8 * n])
    value_bytes, value_nulls = _int32_total(view[8 * n : 12 * n])
    name_bytes, name_nulls = _int32_total(view[16 * n : 16 * n + 4 * h])
    header_value_bytes, _ = _int32_total(view[16 * n + 4 * h : keys_at])
    values_at = keys_at + key_bytes
    names_at = values_at + value_bytes
    header_values_at = names_at + name_bytes
    end = header_values_at + header_value_bytes
    if end > size:
        raise CorruptBatchError(f"lengths run past the end of the {size}-byte body")
    if end != size:
        raise CorruptBatchError(f"lengths add up to {end} bytes but the body holds {size}")
    layout = BodyLayout(body, n, h, key_nulls, value_nulls, keys_at, values_at, names_at, header_values_at)  # type: ignore[arg-type]
    return layout, name_nulls


_NEGATIVE_TOP_BYTE = bytes(0xFF if b >= 0x80 else 0 for b in range(256))  # translate table: sign of a top byte


def _int32_total(column: memoryview) -> tuple[int, int]:
    """(sum counting -1 as 0, number of -1s) of a little-endian int32 column; CorruptBatchError
    for any other negative value. All C-level work, whatever the column's length: the sign
    comes from the top byte lane (``bytes.translate``), the -1 check from big-int masks, and
    the sum from widening each value to 64 bits (extended-slice assignment) and reading the
    column as one big integer modulo 2**64 - 1 ("casting out" in base 2**64: exact, since the
    true sum of fewer than 2**31 unsigned 32-bit values is below the modulus)."""
    count = len(column) // 4
    if not count:
        return 0, 0
    data = bytes(column)  # one copy: strided slices of bytes are C loops, of a memoryview generic and slow
    if data == data[:4] * count:
        # Every item the same length (one memcmp): keys are often all null, values often
        # of one size, header counts often all 0.
        (length,) = _INT32.unpack_from(data)
        if length == -1:
            return 0, count
        if length < 0:
            raise CorruptBatchError("negative length other than -1 (null)")
        return length * count, 0
    lanes = [data[k::4] for k in range(4)]
    negative = lanes[3].translate(_NEGATIVE_TOP_BYTE)
    nulls = negative.count(0xFF)
    if nulls:
        mask = int.from_bytes(negative, "little")
        if any(int.from_bytes(lane, "little") & mask != mask for lane in lanes):
            raise CorruptBatchError("negative length other than -1 (null)")
    wide = bytearray(8 * count)
    for k, lane in enumerate(lanes):
        wide[k::8] = lane
    unsigned_sum = _casting_out_64(int.from_bytes(wide, "little"))
    return unsigned_sum - nulls * (1 << 32) + nulls, nulls


def _casting_out_64(x: int) -> int:
    """``x % (2**64 - 1)`` by folding halves (2**(64k) = 1 modulo 2**64 - 1): linear big-int
    shifts and adds, where one big-int ``%`` by a 64-bit divisor is many times slower."""
    while x.bit_length() > 128:
        half = x.bit_length() // 128 * 64
        x = (x >> half) + (x & ((1 << half) - 1))
    return x % ((1 << 64) - 1)


def _decode_body(header: BatchHeader, body: bytes | memoryview) -> DecodedBatch:
    """Checks the body (``_body_layout``) and keeps the layout; only header keys and values
    are cut here (they need a utf-8 check)."""
    n = header.record_count
    layout, _ = _body_layout(header, body)
    h = layout.header_count
    if h == 0:
        return DecodedBatch.from_layout(header, layout, [()] * n)
    header_counts = _unpack_int32s(body, 12 * n, n)
    header_lengths = _unpack_int32s(body, 16 * n, 2 * h)
    names = _cut_column(body, header_lengths[:h], layout.header_names_at)
    header_values = _cut_column(body, header_lengths[h:], layout.header_values_at)
    return DecodedBatch.from_layout(header, layout, _group_headers(n, header_counts, h, names, header_values))


def _cut_column(body: bytes | memoryview, lengths: array, start: int) -> list[bytes | None]:
    """Cut ``len(lengths)`` items (-1 = None) out of ``body`` from ``start`` (already checked
    by ``_body_layout``). A view's bytes are taken out once, up to the column's end, so the
    items are ``bytes`` cut from one copy."""
    if not lengths:
        return []
    nulls = lengths.count(-1)
    if nulls == len(lengths):
        return [None] * nulls
    sizes = map(max, lengths, repeat(0)) if nulls else lengths
    ends = list(accumulate(sizes, initial=start))
    source = body if isinstance(body, bytes) else bytes(body[: ends[-1]])
    items: list[bytes | None] = list(map(source.__getitem__, map(slice, ends, islice(ends, 1, None))))
    if nulls:
        items = [None if length == -1 else item for length, item in zip(lengths, items)]
    return items


def _group_headers(
    n: int, counts: array, h: int, names: list[bytes | None], values: list[bytes | None]
) -> list[tuple[tuple[str, bytes | None], ...]]:
    if h == 0:
        return [()] * n
    if None in names:
        raise CorruptBatchError("a header key is null")
    try:
        pairs = list(zip(map(bytes.decode, names), values))  # type: ignore[arg-type]
    except UnicodeDecodeError as exc:
        raise CorruptBatchError(f"a header key is not utf-8 ({exc})") from None
    bounds = list(accumulate(counts, initial=0))
    return list(map(tuple, map(pairs.__getitem__, map(slice, bounds, islice(bounds, 1, None)))))
