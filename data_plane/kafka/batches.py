"""Kafka's record batch v2 to kraftlog's batch format and back, at the door.

Both formats carry the same fields (base offset, leader epoch, attributes, timestamps,
producer id/epoch/base sequence, keys, values, headers); they differ in byte order, CRC
(Kafka: CRC-32C, kraftlog: CRC-32) and record layout (Kafka: varint rows, kraftlog: columns).
A produced Kafka batch becomes one kraftlog batch with the same records and producer fields,
so idempotence and transactions see what the client sent; a stored batch goes back out as
one Kafka batch at the same base offset, uncompressed. kafka-python's ``kafka.record`` reads
and builds the Kafka side (CRC checks and the producer's gzip, snappy, lz4 and zstd included).
"""

from __future__ import annotations

import struct
from typing import Iterator

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from data_plane import record_batch
from data_plane.control_batch import decode_marker

MAGIC = 2
_LENGTH = struct.Struct(">qi")  # base offset, batch length (the bytes after this field)
_MAGIC_AT = 16
_PREFIX = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21  # the first byte the CRC covers
_CRC_AT = 17
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_KAFKA_LZ4, _KAFKA_ZSTD = 3, 4
_NO_LIMIT = 1 << 62  # the builder's batch size bound: the stored batch decides its size


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
    return b"".join(_one_to_kraftlog(DefaultRecordBatch(raw), now_ms) for raw in split_batches(data))


def _one_to_kraftlog(batch: DefaultRecordBatch, now_ms: int) -> bytes:
    if not batch.validate_crc():
        raise KafkaBatchError("a record batch's CRC-32C does not match its bytes: the batch was damaged on the way")
    if batch.is_control_batch:
        raise KafkaBatchError("a client may not produce a control batch: transaction markers are written by the coordinator")
    records = list(batch)
    if [r.offset for r in records] != list(range(batch.base_offset, batch.base_offset + len(records))):
        raise KafkaBatchError("a produced batch's records carry offset deltas 0, 1, 2, ...: renumber them")
    compression = {_KAFKA_LZ4: "lz4", _KAFKA_ZSTD: "zstd"}.get(batch.compression_type, "none")
    try:
        return record_batch.encode_batch(
            [r.value for r in records],
            keys=[r.key for r in records],
            headers=[r.headers for r in records],
            timestamps_ms=[r.timestamp for r in records],
            compression=compression,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            transactional=batch.is_transactional,
            now_ms=now_ms,
        )
    except ValueError as exc:
        raise KafkaBatchError(str(exc)) from None


def to_kafka(data: bytes) -> bytes:
    """Kafka batches, at the same offsets, for kraftlog batches read from a log."""
    return b"".join(_one_to_kafka(record_batch.decode_batch(data, pos)) for pos, _ in record_batch.iter_headers(data))


def _one_to_kafka(batch: record_batch.DecodedBatch) -> bytes:
    header = batch.header
    builder = DefaultRecordBatchBuilder(MAGIC, 0, header.is_transactional, header.producer_id, header.producer_epoch,
                                        header.base_sequence, _NO_LIMIT)
    if header.is_control:
        marker = decode_marker(batch)
        builder.append(0, header.first_timestamp, _CONTROL_KEY.pack(0, int(marker.control_type)),
                       _CONTROL_VALUE.pack(0, marker.coordinator_epoch), [])
    else:
        for record in batch.records():
            builder.append(record.offset - header.base_offset, record.timestamp_ms, record.key, record.value,
                           list(record.headers))
    out = builder.build()
    _PREFIX.pack_into(out, 0, header.base_offset, len(out) - _LENGTH.size, header.leader_epoch)
    extra = header.attributes & (record_batch.TIMESTAMP_TYPE_BIT | record_batch.CONTROL_BIT)
    if extra:  # bits the builder leaves to brokers: set them, and the max timestamp, under a new CRC
        (attributes,) = _ATTRIBUTES.unpack_from(out, _ATTRIBUTES_AT)
        _ATTRIBUTES.pack_into(out, _ATTRIBUTES_AT, attributes | extra)
        _MAX_TIMESTAMP.pack_into(out, _MAX_TIMESTAMP_AT, header.max_timestamp)
        struct.pack_into(">I", out, _CRC_AT, calc_crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)
