"""Control batches (transaction markers): encoding, decoding, and the refusal of a client's."""

from __future__ import annotations

import struct

import pytest

from data_plane.control_batch import ControlType, decode_marker, encode_marker, validate_marker
from data_plane.record_batch import (
    CONTROL_BIT,
    HEADER_SIZE,
    TRANSACTIONAL_BIT,
    InvalidRecordError,
    decode_batch,
    encode_batch,
    read_header,
    stamp_batch,
    validate_for_append,
)

T0 = 1_767_225_600_000


@pytest.mark.parametrize("control_type", list(ControlType))
def test_marker_round_trip_with_kafka_fields(control_type: ControlType) -> None:
    data = bytearray(encode_marker(control_type, 4001, 3, 9, T0))
    stamp_batch(data, 0, 120, 5)
    header = validate_marker(data)
    assert header.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT) == CONTROL_BIT | TRANSACTIONAL_BIT
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (4001, 3, -1, 1)
    batch = decode_batch(data)
    assert batch.keys[0] == struct.pack("<hh", 0, int(control_type))  # version 0, type
    assert batch.values[0] == struct.pack("<hi", 0, 9)  # version 0, coordinator epoch
    marker = decode_marker(batch)
    assert (marker.control_type, marker.coordinator_epoch, marker.offset) == (control_type, 9, 120)
    assert marker.commit == (control_type is ControlType.COMMIT)


def test_a_client_cannot_produce_a_control_batch() -> None:
    with pytest.raises(InvalidRecordError, match="cannot be produced by a client.*clear bit 5"):
        validate_for_append(encode_marker(ControlType.COMMIT, 1, 0, 0, T0))


def test_transactional_batch_needs_a_producer_id() -> None:
    data = encode_batch([b"v"], timestamps_ms=T0, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    assert read_header(data).is_transactional and not read_header(data).is_control
    assert validate_for_append(data).producer_id == 7
    with pytest.raises(ValueError, match="needs a producer id"):
        encode_batch([b"v"], timestamps_ms=T0, transactional=True)
    # a forged header (bit 4 without a producer id) is the vector "transactional-without-producer-id"


def test_malformed_markers_are_refused() -> None:
    ordinary = decode_batch(encode_batch([b"v"], timestamps_ms=T0, producer_id=1, producer_epoch=0, base_sequence=0))
    with pytest.raises(InvalidRecordError, match="not a transaction marker"):
        decode_marker(ordinary)
    cases = {
        "only version 0": (struct.pack("<hh", 1, 1), struct.pack("<hi", 0, 0)),
        "type 2": (struct.pack("<hh", 0, 2), struct.pack("<hi", 0, 0)),
        "key is 4 bytes": (b"\x00", struct.pack("<hi", 0, 0)),
    }
    for message, (key, value) in cases.items():
        data = encode_batch([value], keys=[key], timestamps_ms=T0, producer_id=1, producer_epoch=0, base_sequence=-1,
                            transactional=True, control=True)
        with pytest.raises(InvalidRecordError, match=message):
            validate_marker(data)
    two = encode_batch([struct.pack("<hi", 0, 0)] * 2, keys=[struct.pack("<hh", 0, 1)] * 2, timestamps_ms=T0,
                       producer_id=1, producer_epoch=0, base_sequence=-1, transactional=True, control=True)
    with pytest.raises(InvalidRecordError, match="exactly one record"):
        validate_marker(two)
    assert len(two) > HEADER_SIZE
