"""The door's whole-batch converter against its row-by-row one: the same kraftlog batch from
a produced Kafka batch, the same Kafka rows from a stored batch, for any records without
headers; anything else is left to the row-by-row converter (``Unfit``)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from data_plane import record_batch
from data_plane.kafka import batches, row_columns

_items = st.one_of(st.none(), st.binary(max_size=40), st.integers(16_380, 16_400).map(bytes))  # across 2- and 3-byte varints
_records = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), _items, _items), min_size=1, max_size=30)


def kafka_rows_of(records, codec: int = 0) -> tuple[bytes, bytes]:
    """(the Kafka batch, its uncompressed rows) for (timestamp delta, key, value) records."""
    builder = DefaultRecordBatchBuilder(2, codec, False, 3, 0, 40, 1 << 30)
    for i, (delta, key, value) in enumerate(records):
        builder.append(i, 1_700_000_000_000 + delta, key, value, [])
    sent = bytes(builder.build())
    used = sent[22] & 0x07  # kafka-python sends a batch uncompressed when compressing does not make it smaller
    return sent, batches._DECODERS[used](sent[61:]) if used else sent[61:]


@settings(max_examples=100, deadline=None)
@given(_records, st.sampled_from([0, 3]))
def test_a_produced_batch_converts_to_the_bytes_the_row_reader_gives(records, codec):
    sent, rows = kafka_rows_of(records, codec)
    deltas, keys, values, headers = batches._read_rows(rows, len(records))
    (first,) = struct.unpack_from(">q", sent, 27)  # the batch's first timestamp: the rows' deltas are from it
    try:
        by_rows = record_batch.encode_batch(values, keys=keys, headers=headers, timestamps_ms=[first + d for d in deltas],
                                            compression="lz4" if sent[22] & 0x07 else "none", producer_id=3, producer_epoch=0, base_sequence=40)
    except ValueError:  # timestamps too far apart for one batch: left to the row reader, which words the refusal
        with pytest.raises(row_columns.Unfit):
            batches._columns_to_kraftlog(row_columns.kraftlog_columns(rows, len(records)), first, "none", 3, 0, 40, False)
        with pytest.raises(batches.KafkaBatchError, match="24 days"):
            batches.to_kraftlog(sent, 0)
        return
    columns = row_columns.kraftlog_columns(rows, len(records))
    assert columns.keys == b"".join(k for k in keys if k is not None) and columns.values == b"".join(v for v in values if v is not None)
    assert batches._columns_to_kraftlog(columns, first, "lz4" if sent[22] & 0x07 else "none", 3, 0, 40, False) == by_rows
    assert batches.to_kraftlog(sent, 0) == by_rows


@settings(max_examples=100, deadline=None)
@given(_records, st.booleans())
def test_a_stored_batch_converts_to_the_rows_the_row_writer_gives(records, log_append_time):
    first = 1_700_000_000_000
    small = [(d % 1_000_000, k, v) for d, k, v in records]
    data = bytearray(record_batch.encode_batch([v for *_, v in small], keys=[k for _, k, _ in small],
                                               timestamps_ms=[first + d for d, *_ in small]))
    if log_append_time:
        record_batch.set_log_append_time(data, 0, first + 5)
    batch = record_batch.decode_batch(bytes(data))
    assert row_columns.kafka_rows(_columns_of(batch)) == batches._rows(batch)
    assert batches._columns_to_rows(batch) == batches._rows(batch)


def _columns_of(batch: record_batch.DecodedBatch) -> row_columns.Columns:
    first = batch.header.first_timestamp
    return row_columns.Columns(np.array([t - first for t in batch.timestamps], np.int64),
                               np.array([-1 if k is None else len(k) for k in batch.keys], np.int64),
                               np.array([-1 if v is None else len(v) for v in batch.values], np.int64),
                               b"".join(k for k in batch.keys if k is not None), b"".join(v for v in batch.values if v is not None))


def test_headers_renumbered_offsets_and_damaged_rows_are_left_to_the_row_reader():
    builder = DefaultRecordBatchBuilder(2, 0, False, 3, 0, 40, 1 << 30)
    builder.append(0, 1, None, b"v", [("h", b"x")])
    with pytest.raises(row_columns.Unfit, match="headers"):
        row_columns.kraftlog_columns(bytes(builder.build())[61:], 1)
    sent, rows = kafka_rows_of([(0, None, b"a"), (1, b"k", b"bb")])
    for damaged, count in [(rows[:-1], 2), (rows + b"\0", 2), (rows, 3), (rows, 0), (b"\x01" + rows[1:], 2)]:
        with pytest.raises(row_columns.Unfit):
            row_columns.kraftlog_columns(damaged, count)
    renumbered = bytearray(rows)
    renumbered[3] = 2  # the first record's offset delta: 1 (zigzag 2), not 0
    with pytest.raises(row_columns.Unfit, match="offset deltas"):
        row_columns.kraftlog_columns(bytes(renumbered), 2)


@pytest.mark.parametrize("codec", [0, 3])
def test_a_large_batch_goes_through_whole_and_reads_back_the_same(codec, monkeypatch):
    records = [(i * 7 % 300, None if i % 5 else b"k%d" % i, bytes(i % 150)) for i in range(300)]
    sent, rows = kafka_rows_of(records, codec)
    (first,) = struct.unpack_from(">q", sent, 27)
    deltas, keys, values, headers = batches._read_rows(rows, len(records))
    expected = record_batch.encode_batch(values, keys=keys, headers=headers, timestamps_ms=[first + d for d in deltas],
                                         compression="lz4" if sent[22] & 0x07 else "none", producer_id=3, producer_epoch=0,
                                         base_sequence=40)
    expected_rows = batches._rows(record_batch.decode_batch(expected))

    def row_by_row(*_):
        raise AssertionError("converted row by row")

    monkeypatch.setattr(batches, "_read_rows", row_by_row)
    monkeypatch.setattr(batches, "_rows", row_by_row)
    kept = batches.to_kraftlog(sent, 0)
    assert kept == expected
    back = batches.to_kafka(kept)
    assert back[22] & 0x07 == sent[22] & 0x07  # sent back with the codec it came in with
    assert batches._DECODERS[back[22] & 0x07](back[61:]) == expected_rows  # the rows after Kafka's batch header


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.lists(st.tuples(st.integers(0, 299), st.integers(0, 40)), max_size=12), st.integers(0, 3))
def test_rows_of_one_size_with_some_of_another_read_as_the_row_reader_reads_them(count, odd_sizes, delta_step):
    """Fixed-size records are found as runs of rows one stride apart: rows that grow a byte
    (offset deltas from 64 on), rows of another size among them, and timestamps whose
    varints grow give the same columns as the row-by-row reader."""
    sizes = dict(odd_sizes)
    records = [(i * delta_step, None, bytes(sizes.get(i, 20))) for i in range(count)]
    _, rows = kafka_rows_of(records)
    columns = row_columns.kraftlog_columns(rows, count)
    deltas, keys, values, _ = batches._read_rows(rows, count)
    assert columns.timestamp_deltas.tolist() == deltas and columns.values == b"".join(values)
    assert columns.value_lengths.tolist() == [len(v) for v in values] and columns.key_lengths.tolist() == [-1] * count


def test_a_damaged_row_length_inside_a_run_of_one_size_is_left_to_the_row_reader():
    _, rows = kafka_rows_of([(0, None, bytes(20))] * 100)
    stride = len(rows) // 100
    for damaged in (bytes([rows[0] + 2]), b"\x01"):  # a row two bytes longer than its neighbours; a negative length
        bad = rows[:50 * stride] + damaged + rows[50 * stride + 1:]
        with pytest.raises(row_columns.Unfit):
            row_columns.kraftlog_columns(bad, 100)
        with pytest.raises(batches.KafkaBatchError):
            batches._read_rows(bad, 100)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.sampled_from([None, b"", b"key"]), st.integers(0, 300), st.integers(0, 3),
       st.lists(st.integers(0, 299), max_size=10))
def test_stored_records_of_one_layout_are_written_as_the_row_writer_writes_them(count, key, size, delta_step, odd):
    """Records alike in layout are written as blocks of rows (a run per layout: offset deltas
    from 64 on and timestamp deltas from 64 ms on take a byte more); a few records of another
    size make more runs, many make the field-by-field path: the same bytes either way."""
    values = [bytes(size + 7 if i in odd else size) for i in range(count)]
    data = record_batch.encode_batch(values, keys=[key] * count, timestamps_ms=[1_700_000_000_000 + i * delta_step for i in range(count)])
    batch = record_batch.decode_batch(data)
    assert row_columns.kafka_rows(_columns_of(batch)) == batches._rows(batch)
