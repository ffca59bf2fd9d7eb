"""Kafka's record batch v2 to kraftlog's batch format and back, at the door.

Both formats carry the same fields (base offset, leader epoch, attributes, timestamps,
producer id/epoch/base sequence, keys, values, headers); they differ in byte order, CRC
(Kafka: CRC-32C, kraftlog: CRC-32) and record layout (Kafka: varint rows, kraftlog: columns).
A produced Kafka batch becomes one kraftlog batch with the same records and producer fields,
so idempotence and transactions see what the client sent; a stored batch goes back out as
one Kafka batch at the same base offset, compressed as it is stored (lz4, zstd or none).
kafka-python's ``kafka.record`` reads and builds the Kafka side (CRC checks and the
producer's gzip, snappy, lz4 and zstd included). Batches of many records without headers
are converted whole (``row_columns``), the rest row by row.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from typing import Iterator

import numpy as np
from kafka.codec import gzip_decode, lz4_decode, lz4_encode, snappy_decode, zstd_decode, zstd_encode
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from data_plane import record_batch
from data_plane.control_batch import decode_marker
from data_plane.kafka import row_columns

MAGIC = 2
_LENGTH = struct.Struct(">qi")  # base offset, batch length (the bytes after this field)
_MAGIC_AT = 16
_PREFIX = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_CONTENT_AT = 16  # a stored batch's magic: what follows is its content, what precedes the leader stamps
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21  # the first byte the CRC covers
_CRC_AT = 17
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_KAFKA_LZ4, _KAFKA_ZSTD = 3, 4
# Kafka's codecs (attribute bits 0-2) as kafka-python decodes them (snappy with its xerial framing).
_DECODERS = {0: bytes, 1: gzip_decode, 2: snappy_decode, _KAFKA_LZ4: lz4_decode, _KAFKA_ZSTD: zstd_decode}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
# kraftlog's codecs as Kafka's compression codes, and the encoders a fetched batch goes out with.
_KAFKA_CODECS = {"lz4": _KAFKA_LZ4, "zstd": _KAFKA_ZSTD}
_ENCODERS = {_KAFKA_LZ4: lz4_encode, _KAFKA_ZSTD: zstd_encode}
_NO_LIMIT = 1 << 62  # the builder's batch size bound: the stored batch decides its size
# From how many records a batch is converted whole (``row_columns``): below it the few dozen
# numpy calls a batch costs take longer than converting its rows one by one (one record
# produced at a time, a consumer at the tail).
_COLUMNS_FROM = 128


class KafkaBatchError(ValueError):
    """A produced batch kraftlog cannot take (its message says what to send instead)."""


def split_batches(data: bytes) -> Iterator[bytes]:
    """The Kafka batches concatenated in a produce's ``records``, each checked whole."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < _LENGTH.size + 5:
            raise KafkaBatchError(f"{len(data) - pos} trailing bytes are not a record batch")
        _, length = _LENGTH.unpack_from(data, pos)
        end = pos + _LENGTH.size + length
        if length < 0 or end > len(data):
            raise KafkaBatchError(f"a record batch says it is {length} bytes long, {len(data) - pos - _LENGTH.size} follow")
        if data[pos + _MAGIC_AT] != MAGIC:
            raise KafkaBatchError(f"record batch magic {data[pos + _MAGIC_AT]}: kraftlog takes magic 2 (Kafka 0.11 on) only")
        yield data[pos:end]
        pos = end


def to_kraftlog(data: bytes, now_ms: int) -> bytes:
    """The kraftlog batches for the Kafka batches of one partition's produce."""
    return b"".join(stored for _, stored in converted_produce(data, now_ms))


def converted_produce(data: bytes, now_ms: int) -> list[tuple[bytes, bytes]]:
    """(the Kafka batch sent, the kraftlog batch for it) for each batch of one partition's
    produce: the pairs ``ConvertedBatches.remember_produced`` takes once the append succeeded."""
    return [(raw, _one_to_kraftlog(raw, now_ms)) for raw in split_batches(data)]


def _one_to_kraftlog(raw: bytes, now_ms: int) -> bytes:
    (_, _, _, _, crc, attributes, _, first_timestamp, _, producer_id, producer_epoch, base_sequence,
     count) = _KAFKA_HEADER.unpack_from(raw)
    if calc_crc32c(memoryview(raw)[_ATTRIBUTES_AT:]) != crc:
        raise KafkaBatchError("a record batch's CRC-32C does not match its bytes: the batch was damaged on the way")
    if attributes & record_batch.CONTROL_BIT:
        raise KafkaBatchError("a client may not produce a control batch: transaction markers are written by the coordinator")
    codec = attributes & 0x07
    if codec not in _DECODERS:
        raise KafkaBatchError(f"record batch compression codec {codec} is not one of Kafka's (none, gzip, snappy, lz4, zstd)")
    if producer_id == record_batch.NO_PRODUCER_ID:
        # Without a producer id Kafka's brokers ignore the epoch and sequence, and aiokafka's
        # non-idempotent producer sends base sequence 0: kraftlog's format wants -1 for both there.
        producer_epoch = base_sequence = -1
    body = raw[_KAFKA_HEADER.size:]
    compression = {_KAFKA_LZ4: "lz4", _KAFKA_ZSTD: "zstd"}.get(codec, "none")
    transactional = bool(attributes & record_batch.TRANSACTIONAL_BIT)
    try:
        rows = _DECODERS[codec](body) if codec else body
        if count >= _COLUMNS_FROM:
            try:
                return _columns_to_kraftlog(row_columns.kraftlog_columns(rows, count), first_timestamp, compression,
                                            producer_id, producer_epoch, base_sequence, transactional)
            except row_columns.Unfit:  # headers, or bytes to word an error for: row by row
                pass
        deltas, keys, values, headers = _read_rows(rows, count)
        return record_batch.encode_batch(
            values, keys=keys, headers=headers, timestamps_ms=[first_timestamp + d for d in deltas],
            compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=base_sequence, transactional=transactional, now_ms=now_ms,
        )
    except KafkaBatchError:
        raise
    except NotImplementedError as exc:  # kafka-python without the codec's library (python-snappy)
        raise KafkaBatchError(f"{exc}: send the batch with lz4, zstd, gzip or no compression") from None
    except (ValueError, IndexError, UnicodeDecodeError) as exc:  # truncated rows, a bad frame, a bad header name
        raise KafkaBatchError(f"a record batch's records do not parse ({exc}): the batch was damaged or is not Kafka's v2") from None


def _columns_to_kraftlog(columns: row_columns.Columns, first_timestamp: int, compression: str, producer_id: int,
                         producer_epoch: int, base_sequence: int, transactional: bool) -> bytes:
    """The kraftlog batch of a Kafka batch's columns, laid out as ``record_batch.encode_batch``
    lays out the same records (its first record's timestamp first, deltas from it)."""
    deltas = columns.timestamp_deltas
    n = len(deltas)
    first, relative = first_timestamp + int(deltas[0]), deltas - deltas[0]
    if len(relative) and not _INT32_MIN <= int(relative.min()) <= int(relative.max()) <= _INT32_MAX:
        raise row_columns.Unfit("timestamps too far apart for one kraftlog batch")  # encode_batch words the error
    body = b"".join([relative.astype("<i4").tobytes(), columns.key_lengths.astype("<i4").tobytes(),
                     columns.value_lengths.astype("<i4").tobytes(), bytes(4 * n), columns.keys, columns.values])
    return record_batch.seal_batch(body, n, first, first_timestamp + int(deltas.max()), compression=compression,
                                   producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                                   transactional=transactional)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Kafka's zigzag varint at ``pos``, and the position after it."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos + 1
        shift += 7
        if shift > 63:
            raise KafkaBatchError("a varint in a record batch runs past 10 bytes")


def _read_sized(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise IndexError(f"an item of {length} bytes runs past the records")
    return buf[pos:end], end


def _read_rows(buf: bytes, count: int) -> tuple[list[int], list, list, list]:
    """The timestamp deltas, keys, values and headers of ``count`` Kafka record rows."""
    deltas: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[tuple[str, bytes | None]]] = []
    pos = 0
    for expected in range(count):
        length, pos = _read_varint(buf, pos)
        end = pos + length
        delta, pos = _read_varint(buf, pos + 1)  # past the record's attributes, unused in v2
        offset_delta, pos = _read_varint(buf, pos)
        if offset_delta != expected:
            raise KafkaBatchError("a produced batch's records carry offset deltas 0, 1, 2, ...: renumber them")
        key, pos = _read_sized(buf, pos)
        value, pos = _read_sized(buf, pos)
        header_count, pos = _read_varint(buf, pos)
        row_headers = []
        for _ in range(header_count):
            name, pos = _read_sized(buf, pos)
            if name is None:
                raise KafkaBatchError("a record header has a null name")
            header_value, pos = _read_sized(buf, pos)
            row_headers.append((name.decode(), header_value))
        if pos != end:
            raise KafkaBatchError(f"a record says it is {length} bytes long and holds {length + pos - end}")
        deltas.append(delta)
        keys.append(key)
        values.append(value)
        headers.append(row_headers)
    if pos != len(buf):
        raise KafkaBatchError(f"{len(buf) - pos} bytes follow the {count} records a record batch says it holds")
    return deltas, keys, values, headers


def to_kafka(data: bytes) -> bytes:
    """Kafka batches, at the same offsets, for kraftlog batches read from a log."""
    return b"".join(_one_to_kafka(record_batch.decode_batch(data, pos)) for pos, _ in record_batch.iter_headers(data))


class ConvertedBatches:
    """``to_kafka`` remembering the Kafka form of stored batches, up to ``max_bytes`` of it,
    least recently used out first: consumers of the same records (several groups on one
    topic, a consumer reading again) pay for the conversion once, and records produced
    through the door are not converted at all while remembered (``remember_produced``: the
    client's own batch is their Kafka form, as Kafka's brokers hand out what producers sent).

    Keyed by the stored batch's bytes from its magic on (its content: records, timestamps,
    producer fields, attributes, under its CRC), not by its base offset and leader epoch,
    which the leader stamps at the append and which every answer takes from the stored
    batch. So a hit is the same records whatever was truncated, compacted or rewritten since
    (a dict compares the bytes after their hash), and a produced batch's key is known before
    the append gives it its offset."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._kafka: OrderedDict[bytes, bytes] = OrderedDict()

    def to_kafka(self, data: bytes, max_bytes: int = _NO_LIMIT, at_least_one: bool = True) -> bytes:
        """The Kafka batches of ``data``'s first stored batches, as many as fit ``max_bytes``
        in Kafka's form (the first whatever its size when ``at_least_one``, as Kafka answers
        so a consumer always moves on). The stored read was bounded in stored bytes; the
        Kafka form has its own size (varint rows, Kafka's framing of the codec, gzip and
        snappy batches stored uncompressed), and the client sized its buffers for what it
        receives. Batches cut off here are fetched next: a consumer asks again from the
        offset after the last record it got."""
        return self.answer(data, max_bytes, at_least_one)[0]

    def answer(self, data: bytes, max_bytes: int = _NO_LIMIT, at_least_one: bool = True,
               convert_from: int = _NO_LIMIT) -> tuple[bytes, int]:
        """``to_kafka``, and where in ``data`` the answer stopped (``len(data)``: all of it).

        ``convert_from``: an answer holding this many records converts no more; it stops
        before the next batch not remembered (remembered ones go on to ``max_bytes``). A
        fetch of a cold partition then answers after a slice of conversion, not after all of
        what was read (lz4 records compress so well that 1 MiB of them is a whole
        partition of the benchmark's): the client takes in one slice while the door
        converts the next (``convert_ahead``), where it otherwise waited for the whole read
        to be converted before it saw a record."""
        out: list[bytes | memoryview] = []
        total = records = 0
        for pos, header in record_batch.iter_headers(data):
            key = data[pos + _CONTENT_AT:pos + header.batch_length]
            kafka = self._kafka.get(key)
            if kafka is None:
                if records >= convert_from and out:
                    return b"".join(out), pos
                kafka = _one_to_kafka(record_batch.decode_batch(data, pos))
                self._remember(key, kafka)
            else:
                self._kafka.move_to_end(key)
            total += len(kafka)
            if total > max_bytes and (out or not at_least_one):
                return b"".join(out), pos
            records += header.record_count
            out.append(_PREFIX.pack(header.base_offset, len(kafka) - _LENGTH.size, header.leader_epoch))
            out.append(memoryview(kafka)[_PREFIX.size:])
        return b"".join(out), len(data)

    def convert_ahead(self, data: bytes, records: int) -> Iterator[None]:
        """Convert and remember the batches of ``data``'s first ``records`` records that are
        not remembered yet, one batch per step: the batches after a fetch answer, which a
        consumer reading on asks for next. Stepped, so the broker's event loop serves other
        requests between batches; a batch a fetch converted meanwhile is skipped, and
        remembered batches count too, so a read of remembered batches costs a look at a slice
        of them, not at all that was read."""
        seen = 0
        for pos, header in record_batch.iter_headers(data):
            if seen >= records:
                return
            seen += header.record_count
            key = data[pos + _CONTENT_AT:pos + header.batch_length]
            if key not in self._kafka:
                self._remember(key, _one_to_kafka(record_batch.decode_batch(data, pos)))
                yield

    def remember_produced(self, sent: bytes, stored: bytes) -> None:
        """Remember the Kafka batch a client ``sent`` as the Kafka form of the batch the door
        ``stored`` for it (``to_kraftlog``), when the two say the same: the same codec (gzip
        and snappy batches are stored uncompressed, and go out so) and the same producer
        fields (a batch without a producer id is stored with epoch and sequence -1)."""
        (_, _, _, _, _, attributes, _, _, _, producer_id, producer_epoch, base_sequence, count) = _KAFKA_HEADER.unpack_from(sent)
        header = record_batch.read_header(stored)
        if ((attributes & 0x07) == _KAFKA_CODECS.get(header.compression, 0)
                and (producer_id, producer_epoch, base_sequence, count)
                == (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count)):
            self._remember(stored[_CONTENT_AT:], sent)

    def _remember(self, key: bytes, kafka: bytes) -> None:
        size = len(key) + len(kafka)
        if size > self._max_bytes:
            return
        old = self._kafka.pop(key, None)
        if old is not None:
            self._bytes -= len(key) + len(old)
        self._kafka[key] = kafka
        self._bytes += size
        while self._bytes > self._max_bytes:
            old_key, old_kafka = self._kafka.popitem(last=False)
            self._bytes -= len(old_key) + len(old_kafka)


def _one_to_kafka(batch: record_batch.DecodedBatch) -> bytes:
    header = batch.header
    if not header.is_control:
        return _records_to_kafka(batch)
    builder = DefaultRecordBatchBuilder(MAGIC, 0, header.is_transactional, header.producer_id, header.producer_epoch,
                                        header.base_sequence, _NO_LIMIT)
    if header.is_control:
        marker = decode_marker(batch)
        builder.append(0, header.first_timestamp, _CONTROL_KEY.pack(0, int(marker.control_type)),
                       _CONTROL_VALUE.pack(0, marker.coordinator_epoch), [])
    out = builder.build()
    _PREFIX.pack_into(out, 0, header.base_offset, len(out) - _LENGTH.size, header.leader_epoch)
    extra = header.attributes & (record_batch.TIMESTAMP_TYPE_BIT | record_batch.CONTROL_BIT)
    if extra:  # bits the builder leaves to brokers: set them, and the max timestamp, under a new CRC
        (attributes,) = _ATTRIBUTES.unpack_from(out, _ATTRIBUTES_AT)
        _ATTRIBUTES.pack_into(out, _ATTRIBUTES_AT, attributes | extra)
        _MAX_TIMESTAMP.pack_into(out, _MAX_TIMESTAMP_AT, header.max_timestamp)
        struct.pack_into(">I", out, _CRC_AT, calc_crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


# Kafka's batch header (magic 2): base offset, batch length, partition leader epoch, magic, CRC-32C,
# then what the CRC covers: attributes, last offset delta, base and max timestamp, producer id,
# producer epoch, base sequence, record count.
_KAFKA_HEADER = struct.Struct(">qiibIhiqqqhii")
# The bits a stored batch keeps in Kafka's attributes (timestamp type, transactional, control:
# the same positions in both formats); the compression bits are Kafka's code for the stored codec.
_KEPT_ATTRIBUTES = record_batch.TIMESTAMP_TYPE_BIT | record_batch.TRANSACTIONAL_BIT | record_batch.CONTROL_BIT


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Kafka's varints for -1 (null) up to 16,382: every offset delta and length of a typical
# record is one table lookup rather than a loop.
_VARINT_TABLE_END = 16_383
_VARINTS = [_zigzag_varint(n) for n in range(-1, _VARINT_TABLE_END)]


def _varint(n: int) -> bytes:
    return _VARINTS[n + 1] if -1 <= n < _VARINT_TABLE_END else _zigzag_varint(n)


def _sized(item: bytes | None) -> bytes:
    """Kafka's length-prefixed bytes: a varint length (-1: null) and the bytes."""
    return _VARINTS[0] if item is None else _varint(len(item)) + item


def _kafka_headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    return _varint(len(headers)) + b"".join(_sized(name.encode()) + _sized(value) for name, value in headers)


def _records_to_kafka(batch: record_batch.DecodedBatch) -> bytes:
    """A data batch as one Kafka batch, built from its columns: the records are Kafka's varint
    rows (length, attributes 0, timestamp delta, offset delta, key, value, headers), compressed
    with the stored batch's codec as Kafka would send them (a consumer's fetch sizes count
    these bytes: uncompressed, a 1 MiB fetch of lz4 records was many MiB on the wire), the
    header carries the stored batch's offsets, timestamps and producer fields."""
    header = batch.header
    first = header.first_timestamp
    layout = batch.layout
    whole = layout is not None and not layout.header_count and header.record_count >= _COLUMNS_FROM
    records = _columns_to_rows(batch) if whole else _rows(batch)
    codec = _KAFKA_CODECS.get(header.compression)
    if codec is not None:
        records = _ENCODERS[codec](records)
    out = bytearray(_KAFKA_HEADER.size + len(records))
    _KAFKA_HEADER.pack_into(
        out, 0, header.base_offset, len(out) - _LENGTH.size, header.leader_epoch, MAGIC, 0,
        (header.attributes & _KEPT_ATTRIBUTES) | (codec or 0), header.last_offset_delta, first, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, header.record_count,
    )
    out[_KAFKA_HEADER.size:] = records
    struct.pack_into(">I", out, _CRC_AT, calc_crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


def _columns_to_rows(batch: record_batch.DecodedBatch) -> bytes:
    """The Kafka rows of a batch without headers, straight from its stored columns."""
    header, layout = batch.header, batch.layout
    n, body = header.record_count, layout.body
    lengths = np.frombuffer(body, "<i4", 3 * n).astype(np.int64)
    if header.timestamp_type == record_batch.LOG_APPEND_TIME:  # every record reads as stamped at the append
        deltas = np.full(n, header.max_timestamp - header.first_timestamp, np.int64)
    else:
        deltas = lengths[:n]
    columns = row_columns.Columns(deltas, lengths[n:2 * n], lengths[2 * n:], bytes(body[layout.keys_at:layout.values_at]),
                                  bytes(body[layout.values_at:layout.header_names_at]))
    try:
        return row_columns.kafka_rows(columns)
    except row_columns.Unfit:  # a varint wider than 32 bits
        return _rows(batch)


def _rows(batch: record_batch.DecodedBatch) -> bytes:
    """The Kafka rows of any data batch, record by record."""
    first = batch.header.first_timestamp
    no_headers = _VARINTS[1]
    rows = []
    for delta, (timestamp, key, value, headers) in enumerate(zip(batch.timestamps, batch.keys, batch.values, batch.headers)):
        row = b"".join((b"\x00", _varint(timestamp - first), _varint(delta), _sized(key), _sized(value),
                        _kafka_headers(headers) if headers else no_headers))
        rows.append(_varint(len(row)))
        rows.append(row)
    return b"".join(rows)
