"""The records path's conversions in the broker's service: idempotence fields checked before
they reach the batch header, and decoded fetch answers cut at max_bytes."""

from __future__ import annotations

import pytest

from data_plane import record_batch
from data_plane.partition_errors import MalformedRequest
from data_plane.broker.service import DecodedBytes, batches_to_records, producer_fields, records_to_batch
from kraftlog_proto import broker_pb2, common_pb2

RECORDS = [common_pb2.Record(value=b"v" * 100) for _ in range(50)]


def stored(records, **producer: int) -> bytes:
    """The batch as the leader stores it: at base offset 10."""
    data = bytearray(records_to_batch(records, "lz4", 1_000, **producer))
    record_batch.stamp_batch(data, 0, base_offset=10, leader_epoch=0)
    return bytes(data)


def test_the_idempotence_fields_land_in_the_batch_header() -> None:
    part = broker_pb2.PartitionProduceData(partition=0, records=RECORDS, producer_id=42, producer_epoch=3, base_sequence=7)
    header = record_batch.read_header(stored(RECORDS, **producer_fields("t", part)))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 7)
    assert producer_fields("t", broker_pb2.PartitionProduceData(partition=0, producer_id=-1)) == {}
    assert not header.is_transactional


def test_a_transactional_records_produce_sets_bit_4_and_needs_a_producer() -> None:
    part = broker_pb2.PartitionProduceData(partition=0, records=RECORDS, producer_id=42, producer_epoch=3, base_sequence=0,
                                           transactional=True)
    header = record_batch.read_header(stored(RECORDS, **producer_fields("t", part)))
    assert header.is_transactional and (header.producer_id, header.producer_epoch) == (42, 3)
    with pytest.raises(MalformedRequest, match="transactional produce"):
        producer_fields("t", broker_pb2.PartitionProduceData(partition=0, records=RECORDS, transactional=True))


@pytest.mark.parametrize("fields, words", [
    ({"producer_id": 42}, "together"),
    ({"producer_id": -5, "producer_epoch": 0, "base_sequence": 0}, "producer_id \\(>= 0"),
    ({"producer_id": 42, "producer_epoch": 1 << 15, "base_sequence": 0}, "producer_epoch"),
    ({"producer_id": 42, "producer_epoch": 0, "base_sequence": 0, "batches": b"x"}, "records path"),
])
def test_idempotence_fields_that_cannot_be_honoured_are_refused(fields, words) -> None:
    with pytest.raises(MalformedRequest, match=words):
        producer_fields("t", broker_pb2.PartitionProduceData(partition=0, **fields))


def offsets(records) -> list[int]:
    return [r.offset for r in records]


def test_decoded_answers_stop_before_max_bytes_but_never_come_back_empty() -> None:
    data = stored(RECORDS)
    assert offsets(batches_to_records(data, 10)) == list(range(10, 60))  # no budget: everything
    whole = DecodedBytes(1 << 20)
    assert offsets(batches_to_records(data, 10, whole)) == list(range(10, 60))
    answer = DecodedBytes(1000)
    some = batches_to_records(data, 15, answer)
    assert offsets(some) == list(range(15, 15 + len(some))) and 0 < answer.used_bytes <= 1000 < whole.used_bytes
    assert sum(r.ByteSize() for r in some) <= answer.used_bytes
    assert batches_to_records(data, 15, answer) == [], "the answer is full: a second partition gets nothing"
    assert offsets(batches_to_records(data, 15, DecodedBytes(1))) == [15], "the answer's first record comes alone"
    per_partition = DecodedBytes(1 << 20)
    assert len(batches_to_records(data, 10, per_partition, partition_max_bytes=1000)) == len(some)
    assert len(batches_to_records(data, 10, per_partition, partition_max_bytes=1)) == 0, "only the answer's first record passes a limit"
