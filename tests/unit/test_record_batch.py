"""The record batch codec: round trips for arbitrary records, and rejection of damaged bytes."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_plane import record_batch as rb
from data_plane.record_batch import (
    HEADER_SIZE,
    CorruptBatchError,
    Record,
    decode_batch,
    decode_batches,
    encode_batch,
    iter_batches,
    iter_headers,
    read_header,
    InvalidRecordError,
    InvalidTimestampError,
    set_log_append_time,
    stamp_batch,
    validate_batch,
    validate_for_append,
)

maybe_bytes = st.none() | st.binary(max_size=40)
header_list = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3)
# Deltas from the first record must fit an int32: two draws from [-2**30, 2**30) differ by less than 2**31.
record = st.tuples(maybe_bytes, maybe_bytes, header_list, st.integers(-(1 << 30), (1 << 30) - 1))


@st.composite
def batches(draw: st.DrawFn) -> tuple[list, bytes, dict]:
    records = draw(st.lists(record, min_size=1, max_size=25))
    options = {
        "compression": draw(st.sampled_from(["none", "lz4", "zstd"])),
        "producer_id": draw(st.integers(-1, 1 << 40)),
        "producer_epoch": draw(st.integers(-1, 1000)),
        "base_sequence": draw(st.integers(-1, 1 << 30)),
    }
    base_ts = draw(st.integers(0, 1 << 42))
    data = encode_batch(
        [v for _, v, _, _ in records],
        keys=[k for k, _, _, _ in records],
        headers=[h for _, _, h, _ in records],
        timestamps_ms=[base_ts + delta for *_, delta in records],
        **options,
    )
    return [(k, v, tuple(h), base_ts + d) for k, v, h, d in records], data, options


@settings(max_examples=200, deadline=None)
@given(batches(), st.integers(0, 1 << 50), st.integers(-1, 1 << 20), st.booleans())
def test_arbitrary_records_round_trip(drawn, base_offset, epoch, log_append_time) -> None:
    records, data, options = drawn
    buf = bytearray(data)
    stamp_batch(buf, 0, base_offset, epoch)
    if log_append_time:
        set_log_append_time(buf, 0, 1_700_000_000_000)
    batch = decode_batch(buf)
    header = batch.header
    assert (header.base_offset, header.leader_epoch, header.record_count) == (base_offset, epoch, len(records))
    assert header.compression == options["compression"]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        options["producer_id"], options["producer_epoch"], options["base_sequence"],
    )
    expected_ts = [1_700_000_000_000] * len(records) if log_append_time else [ts for *_, ts in records]
    assert header.timestamp_type == (rb.LOG_APPEND_TIME if log_append_time else rb.CREATE_TIME)
    assert batch.records() == [
        Record(base_offset + i, ts, k, v, h) for i, ((k, v, h, _), ts) in enumerate(zip(records, expected_ts))
    ]


@settings(max_examples=100, deadline=None)
@given(batches())
def test_layout_locates_the_key_and_value_columns(drawn) -> None:
    records, data, _ = drawn
    batch = decode_batch(data)
    layout = batch.layout
    n = layout.record_count

    def column(lengths_at: int, blob_at: int) -> list[bytes | None]:
        items, pos = [], blob_at
        for length in struct.unpack_from(f"<{n}i", layout.body, lengths_at):
            items.append(None if length < 0 else layout.body[pos : pos + length])
            pos += max(length, 0)
        return items

    assert column(layout.key_lengths_at, layout.keys_at) == [k for k, _, _, _ in records]
    assert column(layout.value_lengths_at, layout.values_at) == [v for _, v, _, _ in records]
    assert (layout.key_nulls, layout.value_nulls) == (
        sum(k is None for k, _, _, _ in records), sum(v is None for _, v, _, _ in records),
    )
    # Columns cut on first read equal a batch built from the same lists.
    same = rb.DecodedBatch(batch.header, batch.offsets, batch.timestamps, batch.keys, batch.values, batch.headers)
    assert same == batch and same.layout is None


@settings(max_examples=100, deadline=None)
@given(batches(), st.data())
def test_any_flipped_byte_from_magic_on_is_rejected(drawn, data) -> None:
    _, encoded, _ = drawn
    pos = data.draw(st.integers(16, len(encoded) - 1))  # magic, crc and everything the crc covers
    damaged = bytearray(encoded)
    damaged[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptBatchError):
        validate_batch(damaged)


@settings(max_examples=100, deadline=None)
@given(batches(), st.data())
def test_truncated_batch_is_rejected(drawn, data) -> None:
    _, encoded, _ = drawn
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CorruptBatchError, match="bytes left|runs past"):
        validate_batch(encoded[:cut])


@settings(max_examples=50, deadline=None)
@given(batches(), st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 31), (1 << 31) - 1))
def test_stamping_keeps_the_crc_valid(drawn, base_offset, epoch) -> None:
    _, encoded, _ = drawn
    buf = bytearray(encoded)
    stamp_batch(buf, 0, base_offset, epoch)
    header = validate_batch(buf)
    assert (header.base_offset, header.leader_epoch, header.crc) == (base_offset, epoch, read_header(encoded).crc)


def test_bad_magic_is_named() -> None:
    buf = bytearray(encode_batch([b"x"]))
    buf[16] = 1
    with pytest.raises(CorruptBatchError, match="magic 1, expected 2"):
        validate_batch(buf)


def test_bad_crc_is_named() -> None:
    buf = bytearray(encode_batch([b"x"]))
    buf[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate_batch(buf)


def test_fast_path_without_keys_headers_or_timestamps() -> None:
    batch = decode_batch(encode_batch([b"a", b"", None], timestamps_ms=7))
    assert batch.keys == [None, None, None]
    assert batch.values == [b"a", b"", None]
    assert batch.headers == [(), (), ()]
    assert batch.timestamps == [7, 7, 7]
    assert batch.offsets == [0, 1, 2]
    assert (batch.header.base_offset, batch.header.leader_epoch) == (0, -1)


def test_a_batch_decoded_from_bytes_shares_them_and_one_from_a_bytearray_does_not() -> None:
    """Decoding immutable bytes keeps a view of them (no copy of the body); decoding a
    bytearray copies, so a later write to the buffer (a reused read buffer, a LogAppendTime
    stamp) cannot change a decoded batch, and the buffer can still be resized."""
    encoded = encode_batch([b"value-0", b"value-1"], keys=[b"k", None], headers=[[("h", b"x")], []])
    shared = decode_batch(encoded)
    assert isinstance(shared.layout.body, memoryview) and shared.layout.body.obj is encoded
    assert (shared.keys, shared.values, shared.headers) == ([b"k", None], [b"value-0", b"value-1"], [(("h", b"x"),), ()])
    assert all(type(v) is bytes for v in shared.values)

    buf = bytearray(encoded)
    copied = decode_batch(buf)
    buf[buf.index(b"value-0") : buf.index(b"value-0") + 7] = b"XXXXXXX"
    buf.extend(b"more")  # refused while a view of it is alive
    assert copied.values == [b"value-0", b"value-1"]


def test_now_ms_is_the_default_timestamp() -> None:
    assert decode_batch(encode_batch([b"a"], now_ms=123)).timestamps == [123]


def test_concatenated_batches_iterate_with_positions() -> None:
    first, second = encode_batch([b"a"] * 3), encode_batch([b"b"], compression="lz4")
    buf = bytearray(first + second)
    stamp_batch(buf, len(first), 3, 0)
    assert [pos for pos, _ in iter_batches(buf)] == [0, len(first)]
    assert [pos for pos, _ in iter_headers(buf)] == [0, len(first)]
    assert [b.offsets for b in decode_batches(buf)] == [[0, 1, 2], [3]]


def test_header_counts_inconsistent_with_last_offset_delta_are_rejected() -> None:
    buf = bytearray(encode_batch([b"a", b"b"]))
    struct.pack_into("<i", buf, 23, 5)  # last_offset_delta
    struct.pack_into("<I", buf, 17, zlib.crc32(buf[21:]))
    with pytest.raises(CorruptBatchError, match="last_offset_delta"):
        validate_batch(buf)


def test_crc_valid_body_with_wrong_lengths_fails_to_decode() -> None:
    buf = bytearray(encode_batch([b"abc"]))
    struct.pack_into("<i", buf, HEADER_SIZE + 8, 50)  # value length beyond the body
    struct.pack_into("<I", buf, 17, zlib.crc32(buf[21:]))
    validate_batch(buf)  # the broker does not look inside
    with pytest.raises(CorruptBatchError, match="past the end"):
        decode_batch(buf)


def test_validate_within_a_region() -> None:
    data = encode_batch([b"abc"])
    with pytest.raises(CorruptBatchError, match="runs past"):
        validate_batch(data + b"tail", 0, max_bytes=len(data) - 1)
    assert validate_batch(data + b"tail", 0, max_bytes=len(data)).record_count == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"values": []}, "at least one record"),
        ({"values": [b"a"], "compression": "gzip"}, "unknown compression"),
        ({"values": [b"a"], "keys": [b"k", b"k"]}, "keys for 1 values"),
        ({"values": [b"a", b"b"], "timestamps_ms": [0, 1 << 40]}, "24 days"),
        ({"values": [b"a"], "timestamps_ms": [1, 2]}, "timestamps for 1 values"),
    ],
)
def test_encode_refuses_bad_input(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        encode_batch(**kwargs)


# ---------------------------------------------------------------------------------- append checks


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into("<I", buf, 17, zlib.crc32(buf[21:]))
    return bytes(buf)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_append_check_accepts_exactly_consistent_producer_fields_and_timestamps(drawn) -> None:
    records, data, options = drawn
    pid, epoch, seq = options["producer_id"], options["producer_epoch"], options["base_sequence"]
    producer_ok = (pid, epoch, seq) == (-1, -1, -1) or min(pid, epoch, seq) >= 0
    timestamps_ok = min(ts for *_, ts in records) >= 0
    if producer_ok and timestamps_ok:
        assert validate_for_append(data).record_count == len(records)
    else:
        with pytest.raises(InvalidTimestampError if producer_ok else InvalidRecordError):
            validate_for_append(data)


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_whatever_the_append_check_accepts_decodes(drawn, data) -> None:
    """A body changed under a recomputed CRC is refused on
    append unless every reader can still decode it."""
    _, encoded, options = drawn
    if options["compression"] != "none":
        return
    buf = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(HEADER_SIZE, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    mutated = _recrc(buf)
    try:
        validate_for_append(mutated)
    except InvalidRecordError:
        return
    decode_batch(mutated)


@pytest.mark.parametrize(
    "edit, message",
    [
        pytest.param(lambda b: struct.pack_into("<i", b, HEADER_SIZE + 12, -5), "negative header count", id="header-count"),
        pytest.param(lambda b: struct.pack_into("<i", b, HEADER_SIZE + 8, 50), "past the end", id="value-length"),
        pytest.param(lambda b: struct.pack_into("<i", b, HEADER_SIZE + 4, -3), "other than -1", id="key-length"),
        pytest.param(lambda b: b.extend(b"junk"), "add up to", id="trailing-bytes"),
    ],
)
def test_crc_valid_body_that_does_not_parse_is_refused_on_append(edit, message) -> None:
    buf = bytearray(encode_batch([b"abc"], keys=[b"k"]))
    edit(buf)
    struct.pack_into("<i", buf, 8, len(buf))  # batch_length follows the edit
    with pytest.raises(InvalidRecordError, match=f"CRC matches but its body does not parse: .*{message}"):
        validate_for_append(_recrc(buf))


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"producer_id": 7, "producer_epoch": 0, "base_sequence": -7}, InvalidRecordError),
        ({"producer_id": 7, "producer_epoch": -3, "base_sequence": 0}, InvalidRecordError),
        ({"producer_id": -5, "producer_epoch": 0, "base_sequence": 0}, InvalidRecordError),
        ({"producer_id": -1, "producer_epoch": 0, "base_sequence": -1}, InvalidRecordError),
        ({"timestamps_ms": -1}, InvalidTimestampError),
    ],
)
def test_producer_fields_and_timestamps_out_of_range_are_refused(fields, error) -> None:
    with pytest.raises(error, match="must|needs"):
        validate_for_append(encode_batch([b"v"], **fields))


def test_max_timestamp_must_lie_within_the_deltas_range() -> None:
    buf = bytearray(encode_batch([b"a", b"b"], timestamps_ms=[10, 20]))
    struct.pack_into("<q", buf, 35, 9)
    with pytest.raises(InvalidTimestampError, match="max_timestamp 9 must lie between first_timestamp 10"):
        validate_for_append(_recrc(buf))


@pytest.mark.parametrize("codec, magic", [("lz4", b"\x04\x22\x4d\x18"), ("zstd", b"\x28\xb5\x2f\xfd")])
def test_compressed_body_is_checked_after_decompression(codec, magic) -> None:
    good = encode_batch([b"x" * 100] * 5, compression=codec)
    assert validate_for_append(good).record_count == 5
    assert good[HEADER_SIZE : HEADER_SIZE + 4] == magic
    garbage = bytearray(good[:HEADER_SIZE]) + magic + b"garbage-not-a-frame"
    struct.pack_into("<i", garbage, 8, len(garbage))
    with pytest.raises(InvalidRecordError, match=codec):
        validate_for_append(_recrc(garbage))
    with pytest.raises(CorruptBatchError, match=codec):
        decode_batch(_recrc(garbage))


def test_non_utf8_header_key_is_refused() -> None:
    buf = bytearray(encode_batch([b"v"], headers=[[("k", b"v")]]))
    buf[buf.index(b"kv")] = 0xFF
    with pytest.raises(InvalidRecordError, match="utf-8"):
        validate_for_append(_recrc(buf))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(-1), st.integers(0, (1 << 31) - 1), st.integers(-(1 << 31), -2)), max_size=300))
def test_column_total_agrees_with_a_plain_sum(values) -> None:
    """The big-int column sum behind the body checks, against the obvious per-item code."""
    column = memoryview(struct.pack(f"<{len(values)}i", *values))
    if any(v < -1 for v in values):
        with pytest.raises(CorruptBatchError, match="other than -1"):
            rb._int32_total(column)
    else:
        assert rb._int32_total(column) == (sum(v for v in values if v != -1), values.count(-1))


@pytest.mark.parametrize("value", [-1, 0, 100, (1 << 31) - 1, -2, -(1 << 31)])
@pytest.mark.parametrize("count", [1, 2, 1000])
def test_column_of_one_repeated_length_agrees_with_a_plain_sum(value, count) -> None:
    """Columns whose items all have one length take a shortcut (one comparison): the same
    answer, and the same refusal of negative lengths other than -1."""
    column = memoryview(struct.pack(f"<{count}i", *[value] * count))
    if value < -1:
        with pytest.raises(CorruptBatchError, match="other than -1"):
            rb._int32_total(column)
    else:
        assert rb._int32_total(column) == ((0, count) if value == -1 else (value * count, 0))
