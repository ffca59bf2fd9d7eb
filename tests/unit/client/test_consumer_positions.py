"""The consumer's position over answers that carry no record for the application: a stream
message holding only a transaction marker (or aborted records) must still move the position
past it, also when it arrives while the partition's earlier records wait in the buffer for
the next poll. Otherwise the position stays on the marker, every later stream message (sent
from past it) is dropped as stale, and the partition is stuck for good.

And the leader epoch of the record before the position (KIP-320) moves with it: a position
past a marker written in a later epoch, paired with the epoch of the records before the
marker, looks truncated to the next leader (that epoch ends before the position), and with
auto_offset_reset='none' every poll after a leader change raised LogTruncationError."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data_plane.client import Consumer
from data_plane.control_batch import ControlType, encode_marker
from data_plane.record_batch import encode_batch, stamp_batch
from kraftlog_proto import broker_pb2

TP = ("t", 0)


def at(data: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    stamped = bytearray(data)
    stamp_batch(stamped, 0, base_offset, leader_epoch)
    return bytes(stamped)


def answer(data: bytes, high_watermark: int) -> broker_pb2.ConsumePartitionData:
    return broker_pb2.ConsumePartitionData(batches=data, high_watermark=high_watermark)


def deliver(consumer: Consumer, fetch_offset: int, data: broker_pb2.ConsumePartitionData) -> None:
    """Hand ``data`` to the consumer as a stream message's entry for TP."""
    consumer._handle_partition(TP, fetch_offset, data, data.batches, [])


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    """A read_committed consumer of TP that never connects: the answers are handed in."""
    made = Consumer("127.0.0.1:1", isolation_level="read_committed")
    made.assign([TP])
    try:
        yield made
    finally:
        made.close()


def test_a_marker_arriving_behind_buffered_records_moves_the_position_past_it(consumer: Consumer) -> None:
    consumer.seek(TP, 0)
    deliver(consumer, 0, answer(at(encode_batch([b"a", b"b", b"c"]), 0), 3))
    deliver(consumer, 3, answer(at(encode_marker(ControlType.COMMIT, 7, 0, 0, 1_000), 3), 4))  # before poll
    taken = consumer._take_buffered(None)
    assert [o for b in taken[TP] for o in b.offsets] == [0, 1, 2]
    assert consumer.position(TP) == 4, "the position must pass the marker the stream already sent"


def test_an_answer_of_only_a_marker_moves_the_position_past_it(consumer: Consumer) -> None:
    consumer.seek(TP, 3)
    deliver(consumer, 3, answer(at(encode_marker(ControlType.ABORT, 7, 0, 0, 1_000), 3), 4))
    assert consumer.position(TP) == 4


def test_the_epoch_before_the_position_is_the_marker_s_when_the_position_passes_it(consumer: Consumer) -> None:
    consumer.seek(TP, 0)
    deliver(consumer, 0, answer(at(encode_batch([b"a", b"b", b"c"]), 0, leader_epoch=2), 3))
    deliver(consumer, 3, answer(at(encode_marker(ControlType.COMMIT, 7, 0, 0, 1_000), 3, leader_epoch=3), 4))
    consumer._take_buffered(None)
    assert (consumer.position(TP), consumer._last_epochs[TP]) == (4, 3)
    deliver(consumer, 4, answer(at(encode_marker(ControlType.ABORT, 8, 0, 0, 1_000), 4, leader_epoch=5), 5))
    assert (consumer.position(TP), consumer._last_epochs[TP]) == (5, 5)


def test_a_poll_bounded_by_max_records_hands_out_the_rest_next_and_moves_the_position_with_what_it_handed_out(consumer: Consumer) -> None:
    """``max_poll_records``: a backlog arrives in messages of tens of thousands of records;
    handed out whole, an application behind on it polled (and auto-committed) only after
    processing all of them, so a crash re-read everything it had processed."""
    consumer.seek(TP, 0)
    deliver(consumer, 0, answer(at(encode_batch([b"a", b"b", b"c"]), 0, leader_epoch=2), 5))
    deliver(consumer, 3, answer(at(encode_batch([b"d", b"e"]), 3, leader_epoch=2), 5))
    deliver(consumer, 5, answer(at(encode_marker(ControlType.COMMIT, 7, 0, 0, 1_000), 5, leader_epoch=3), 6))
    polls = []
    while consumer._buffered:
        taken = consumer._take_buffered(2)
        polls.append(([v for b in taken[TP] for v in b.values], consumer.position(TP), consumer._last_epochs[TP]))
    assert polls == [([b"a", b"b"], 2, 2), ([b"c", b"d"], 4, 2), ([b"e"], 6, 3)]
