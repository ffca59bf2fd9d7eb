"""Kafka record batch v2 <-> kraftlog batch: records, headers, timestamps and producer fields
survive both ways; the Kafka side is built and read by kafka-python's ``kafka.record`` (the
codec Kafka's own Python client sends with), CRC-32C checked."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from data_plane import record_batch
from data_plane.control_batch import ControlType, encode_marker
from data_plane.kafka.batches import ConvertedBatches, KafkaBatchError, converted_produce, split_batches, to_kafka, to_kraftlog

CODECS = {"none": 0, "gzip": 1, "lz4": 3, "zstd": 4}


def kafka_batch(n: int = 3, compression: str = "none", transactional: bool = False, producer=(7, 1, 5)) -> bytes:
    builder = DefaultRecordBatchBuilder(2, CODECS[compression], transactional, *producer, 1 << 20)
    for i in range(n):
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i if i else None, b"value-%d" % i * 20,
                       [("h", b"%d" % i), ("null", None)])
    return bytes(builder.build())


def stored(data: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """``data`` as the leader stores it: offsets and leader epoch stamped."""
    out = bytearray(data)
    record_batch.stamp_batch(out, 0, base_offset, leader_epoch)
    return bytes(out)


@pytest.mark.parametrize("compression", list(CODECS))
def test_a_produced_batch_keeps_records_and_producer_fields_both_ways(compression):
    sent = kafka_batch(compression=compression, transactional=True)
    kept = record_batch.decode_batch(stored(to_kraftlog(sent, now_ms=0), 100, 3))
    assert (kept.header.producer_id, kept.header.producer_epoch, kept.header.base_sequence) == (7, 1, 5)
    assert kept.header.is_transactional
    assert kept.header.compression == (compression if compression in ("lz4", "zstd") else "none")
    assert [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in kept.records()] == [
        (100 + i, 1_700_000_000_000 + i, b"k%d" % i if i else None, b"value-%d" % i * 20, [("h", b"%d" % i), ("null", None)])
        for i in range(3)]

    back = DefaultRecordBatch(to_kafka(stored(to_kraftlog(sent, now_ms=0), 100, 3)))
    assert back.validate_crc()
    assert (back.base_offset, back.leader_epoch, back.producer_id, back.producer_epoch, back.base_sequence) == (100, 3, 7, 1, 5)
    assert back.is_transactional and not back.is_control_batch
    original = DefaultRecordBatch(sent)
    assert [(r.offset - 100, r.timestamp, r.key, r.value, r.headers) for r in back] == \
        [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in original]


def test_a_batch_without_a_producer_id_is_taken_whatever_its_sequence_says():
    """aiokafka's non-idempotent producer sends producer id -1 with base sequence 0 (Kafka's
    brokers ignore both fields without a producer id): the door stores -1, -1, -1."""
    kept = to_kraftlog(kafka_batch(producer=(-1, -1, 0)), now_ms=0)
    header = record_batch.validate_for_append(kept)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)


def test_an_uncompressed_batch_goes_back_out_byte_for_byte_after_the_prefix():
    sent = kafka_batch()
    back = to_kafka(stored(to_kraftlog(sent, now_ms=0), 0, 0))
    assert back[:12] == sent[:12] and back[16:] == sent[16:]  # all but the leader epoch the broker stamps


def test_a_transaction_marker_goes_out_as_a_kafka_control_batch():
    marker = stored(encode_marker(ControlType.COMMIT, 7, 2, 4, 1_700_000_000_000), 42, 1)
    back = DefaultRecordBatch(to_kafka(marker))
    assert back.validate_crc() and back.is_control_batch and back.is_transactional
    (record,) = list(back)
    assert (record.offset, record.commit) == (42, True)
    assert struct.unpack(">hi", record.value) == (0, 4)


def test_log_append_time_batches_say_so_with_the_append_time():
    data = bytearray(stored(to_kraftlog(kafka_batch(), now_ms=0), 10, 0))
    record_batch.set_log_append_time(data, 0, 1_800_000_000_000)
    back = DefaultRecordBatch(to_kafka(bytes(data)))
    assert back.validate_crc() and back.timestamp_type == 1
    assert {r.timestamp for r in back} == {1_800_000_000_000}


def test_several_stored_batches_become_several_kafka_batches_at_their_offsets():
    data = stored(to_kraftlog(kafka_batch(2), 0), 0, 0) + stored(to_kraftlog(kafka_batch(3), 0), 2, 0)
    first, second = (DefaultRecordBatch(raw) for raw in split_batches(to_kafka(data)))
    assert [r.offset for r in first] + [r.offset for r in second] == [0, 1, 2, 3, 4]


def test_damaged_foreign_or_control_batches_are_refused_with_what_to_do():
    sent = bytearray(kafka_batch())
    sent[-1] ^= 0xFF
    with pytest.raises(KafkaBatchError, match="CRC-32C"):
        to_kraftlog(bytes(sent), 0)
    old = bytearray(kafka_batch())
    old[16] = 1
    with pytest.raises(KafkaBatchError, match="magic 2"):
        to_kraftlog(bytes(old), 0)
    with pytest.raises(KafkaBatchError, match="trailing bytes"):
        to_kraftlog(kafka_batch() + b"\0\0\0", 0)
    control = bytearray(kafka_batch(1, transactional=True))
    control[22] |= 0x20  # the control bit, then a CRC that matches again
    struct.pack_into(">I", control, 17, calc_crc32c(bytes(control[21:])))
    with pytest.raises(KafkaBatchError, match="control batch"):
        to_kraftlog(bytes(control), 0)


_items = st.one_of(st.none(), st.binary(max_size=40), st.integers(16_380, 16_400).map(bytes))  # across the varint table end
_record = st.tuples(st.integers(-10_000, 10_000), _items, _items,
                    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=20), st.booleans())
def test_a_stored_batch_goes_out_as_kafka_python_would_build_it(records, transactional):
    """The door's column encoder against kafka-python's builder, the codec Kafka's Python
    client sends with: the same bytes after the prefix, for any keys, values, headers and
    timestamp deltas (negative and beyond one varint byte included)."""
    first = 1_700_000_000_000
    data = record_batch.encode_batch([v for _, _, v, _ in records], keys=[k for _, k, _, _ in records],
                                     headers=[h for *_, h in records], timestamps_ms=[first + d for d, *_ in records],
                                     producer_id=9, producer_epoch=2, base_sequence=11, transactional=transactional)
    builder = DefaultRecordBatchBuilder(2, 0, transactional, 9, 2, 11, 1 << 30)
    for i, (delta, key, value, headers) in enumerate(records):
        builder.append(i, first + delta, key, value, headers)
    expected = bytes(builder.build())
    assert to_kafka(stored(data, 0, 0))[16:] == expected[16:]


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=20), st.sampled_from(["none", "gzip", "lz4", "zstd"]))
def test_a_produced_batch_reads_as_kafka_python_reads_it(records, compression):
    """The door's row reader against kafka-python's reader, for any keys, values, headers and
    timestamp deltas, through every codec the door reads."""
    builder = DefaultRecordBatchBuilder(2, CODECS[compression], False, 3, 0, 40, 1 << 30)
    for i, (delta, key, value, headers) in enumerate(records):
        builder.append(i, 1_700_000_000_000 + delta, key, value, headers)
    sent = bytes(builder.build())
    kept = record_batch.decode_batch(stored(to_kraftlog(sent, now_ms=0), 0, 0))
    assert [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in kept.records()] == \
        [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in DefaultRecordBatch(sent)]


def test_a_record_that_runs_past_its_batch_is_refused_even_with_a_good_crc():
    out = bytearray(kafka_batch(2))
    struct.pack_into(">i", out, 57, 3)  # the batch now says it holds three records
    struct.pack_into(">I", out, 17, calc_crc32c(memoryview(out)[21:]))
    with pytest.raises(KafkaBatchError, match="do not parse"):
        to_kraftlog(bytes(out), now_ms=0)


def test_converted_batches_are_remembered_up_to_their_budget_and_keyed_by_their_content():
    one = stored(to_kraftlog(kafka_batch(3), now_ms=0), 0, 0)
    two = stored(to_kraftlog(kafka_batch(3), now_ms=0), 3, 1)  # the same records at other offsets, another leader epoch
    other = stored(to_kraftlog(kafka_batch(2), now_ms=0), 6, 1)
    cache = ConvertedBatches(max_bytes=10 * (len(one) + len(to_kafka(one))))
    assert cache.to_kafka(one + two) == to_kafka(one + two)
    assert cache.to_kafka(two) == to_kafka(two) and cache.to_kafka(one) == to_kafka(one)  # hits, each at its own offset
    assert len(cache._kafka) == 1
    small = ConvertedBatches(max_bytes=len(one) + len(to_kafka(one)))
    assert small.to_kafka(one + other) == to_kafka(one + other)
    assert list(small._kafka) == [other[16:]]  # the least recently fetched went out


def test_a_produced_batch_is_fetched_as_the_client_sent_it_at_its_stored_offset():
    """What a client sent is its records' Kafka form (as Kafka's brokers hand out what producers
    wrote): remembered at the produce, a fetch answers it with the stored offset and leader
    epoch and converts nothing; a batch stored other than sent (gzip stored uncompressed, a
    batch without a producer id stored with epoch and sequence -1) is converted as before."""
    cache = ConvertedBatches(max_bytes=1 << 20)
    for sent in (kafka_batch(3, "lz4"), kafka_batch(3), kafka_batch(3, "gzip"), kafka_batch(3, producer=(-1, -1, 0))):
        ((_, kept),) = converted_produce(sent, now_ms=0)
        cache.remember_produced(sent, kept)
        answer = cache.to_kafka(stored(kept, 40, 2))
        assert DefaultRecordBatch(answer).validate_crc() and [(r.offset, r.key, r.value, r.headers) for r in DefaultRecordBatch(answer)] == [
            (r.offset, r.key, r.value, r.headers) for r in DefaultRecordBatch(to_kafka(stored(kept, 40, 2)))]
        assert struct.unpack_from(">qii", answer) == (40, len(answer) - 12, 2)
        kept_as_sent = sent[22] & 0x07 != 1 and sent[43:51] != bytes.fromhex("ffffffffffffffff")
        assert (answer[16:] == sent[16:]) == kept_as_sent


def test_converted_batches_stop_at_the_bytes_asked_for_but_give_one_batch_to_move_on():
    one = stored(to_kraftlog(kafka_batch(3), now_ms=0), 0, 0)
    two = stored(to_kraftlog(kafka_batch(3), now_ms=0), 3, 0)
    size = len(to_kafka(one))
    cache = ConvertedBatches(max_bytes=1 << 20)
    assert cache.to_kafka(one + two, max_bytes=2 * size) == to_kafka(one + two)
    assert cache.to_kafka(one + two, max_bytes=2 * size - 1) == to_kafka(one)  # the client fetches from offset 3 next
    assert cache.to_kafka(one + two, max_bytes=1) == to_kafka(one)  # larger than asked, but the consumer moves on
    assert cache.to_kafka(one + two, max_bytes=1, at_least_one=False) == b""  # an earlier partition took the response's bytes



def successive(count: int) -> list[bytes]:
    """``count`` stored batches of three records each, one after the other (distinct
    sequences: each its own content, so its own entry in a cache)."""
    return [stored(to_kraftlog(kafka_batch(3, producer=(7, 1, 3 * i)), now_ms=0), 3 * i, 0) for i in range(count)]


def test_an_answer_converts_no_more_once_it_holds_the_records_asked_for_and_says_where_it_stopped():
    """A cold partition's answer is a slice of conversion: batches go in while the answer holds
    fewer than ``convert_from`` records, and remembered batches go on after it (they cost no
    conversion). Where it stopped is where the door converts ahead from."""
    batches = successive(4)
    data, two = b"".join(batches), len(batches[0]) + len(batches[1])
    cache = ConvertedBatches(max_bytes=1 << 20)
    assert cache.answer(data, convert_from=4) == (to_kafka(data[:two]), two)
    assert cache.answer(data, convert_from=1) == (to_kafka(data[:two]), two)  # both remembered, the third not
    assert cache.answer(data) == (to_kafka(data), len(data))  # no bound: all of it
    cold = ConvertedBatches(max_bytes=1 << 20)
    assert cold.answer(data, convert_from=0) == (to_kafka(batches[0]), len(batches[0]))  # the first batch, to move on
    assert cold.answer(data, max_bytes=1, at_least_one=False) == (b"", 0)


def test_converting_ahead_remembers_the_next_records_a_batch_a_step_and_skips_what_a_fetch_converted():
    batches = successive(5)
    data = b"".join(batches[:4])
    cache = ConvertedBatches(max_bytes=1 << 20)
    cache.answer(batches[1])  # converted by a fetch meanwhile
    assert len(list(cache.convert_ahead(data, records=6))) == 1  # the first six records: the second batch remembered
    assert len(list(cache.convert_ahead(data, records=9))) == 1  # the third batch
    assert len(cache._kafka) == 3
    assert len(list(cache.convert_ahead(b"".join(batches), records=100))) == 2  # the two not remembered
    assert cache.answer(b"".join(batches), convert_from=0) == (to_kafka(b"".join(batches)), len(b"".join(batches)))
