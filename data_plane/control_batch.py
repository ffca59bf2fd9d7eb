"""Control batches: the commit and abort markers that end a transaction on a partition (KIP-98).

A marker is a batch with attribute bits 4 (transactional) and 5 (control) set, the
producer's id and epoch, base sequence -1, and exactly one record whose key and value are
Kafka's control record::

    key   = version int16 (0) | type int16 (0 abort, 1 commit)
    value = version int16 (0) | coordinator_epoch int32

little-endian like every integer of kraftlog's batch format (Kafka writes them big-endian).
Only the transaction coordinator writes markers (``validate_marker`` is its append check);
a client's produce of a control batch is refused (INVALID_RECORD, ``validate_for_append``).
Readers never hand a control record to an application: a consumer skips control batches.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from data_plane.record_batch import (
    BatchHeader,
    DecodedBatch,
    InvalidRecordError,
    decode_batch,
    encode_batch,
    validate_batch,
)

CONTROL_RECORD_VERSION = 0
PRODUCER_EPOCH_MAX = 32767  # int16 in the batch header
_KEY = struct.Struct("<hh")
_VALUE = struct.Struct("<hi")


class ControlType(IntEnum):
    """Kafka's ControlRecordType values for transaction markers."""

    ABORT = 0
    COMMIT = 1


class Marker(NamedTuple):
    """One decoded transaction marker."""

    control_type: ControlType
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    offset: int

    @property
    def commit(self) -> bool:
        return self.control_type is ControlType.COMMIT


def encode_marker(
    control_type: ControlType, producer_id: int, producer_epoch: int, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """One control batch ending ``producer_id``'s transaction on a partition (base offset 0 and
    leader epoch -1: the leader stamps both, as for any batch)."""
    if producer_id < 0 or not 0 <= producer_epoch <= PRODUCER_EPOCH_MAX:
        raise ValueError(f"a marker needs the producer's id (>= 0) and epoch (0..{PRODUCER_EPOCH_MAX}), got "
                         f"{producer_id} and {producer_epoch}")
    key = _KEY.pack(CONTROL_RECORD_VERSION, int(control_type))
    value = _VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch)
    return encode_batch([value], keys=[key], timestamps_ms=timestamp_ms, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=-1, transactional=True, control=True)


def decode_marker(batch: DecodedBatch) -> Marker:
    """The marker a control batch carries; InvalidRecordError if it is not a well-formed one."""
    header = batch.header
    if not (header.is_control and header.is_transactional):
        raise InvalidRecordError("not a transaction marker: a marker has attribute bits 4 and 5 set")
    if header.record_count != 1 or header.producer_id < 0 or header.producer_epoch < 0:
        raise InvalidRecordError(
            f"a marker has exactly one record and the producer's id and epoch, got {header.record_count} records, "
            f"producer id {header.producer_id}, epoch {header.producer_epoch}"
        )
    key, value = batch.keys[0], batch.values[0]
    if key is None or value is None or len(key) != _KEY.size or len(value) != _VALUE.size:
        raise InvalidRecordError(
            f"a control record's key is {_KEY.size} bytes (version, type) and its value {_VALUE.size} bytes "
            f"(version, coordinator epoch), got {None if key is None else len(key)} and {None if value is None else len(value)}"
        )
    key_version, raw_type = _KEY.unpack(key)
    value_version, coordinator_epoch = _VALUE.unpack(value)
    if key_version != CONTROL_RECORD_VERSION or value_version != CONTROL_RECORD_VERSION:
        raise InvalidRecordError(f"control record version {key_version}/{value_version}: only version 0 is known")
    if raw_type not in ControlType._value2member_map_:
        raise InvalidRecordError(f"control record type {raw_type}: only 0 (abort) and 1 (commit) are known")
    return Marker(ControlType(raw_type), coordinator_epoch, header.producer_id, header.producer_epoch, header.base_offset)


def validate_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The append check for a marker written by the coordinator (internal path): the batch
    checks of ``validate_batch`` (CRC included), then a well-formed marker."""
    header = validate_batch(buf, pos)
    decode_marker(decode_batch(buf, pos))
    return header
