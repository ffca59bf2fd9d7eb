"""The pure parts of streaming consume: the credit window that bounds what a broker holds per
stream, and the checks on a stream's `open`."""

from __future__ import annotations

import pytest

from data_plane import record_batch
from data_plane.broker.consume_stream import (
    WINDOW_MESSAGES_DEFAULT,
    CreditWindow,
    MalformedRequest,
    parse_open,
)
from kraftlog_proto import broker_pb2
from server_common.limits import CONSUME_STREAM_BYTES_MAX


def opened(partitions=((0, 0),), **fields) -> broker_pb2.ConsumeRequest:
    parts = [broker_pb2.ConsumePartition(partition=p, offset=o) for p, o in partitions]
    return broker_pb2.ConsumeRequest(open=broker_pb2.ConsumeOpen(topics=[broker_pb2.ConsumeTopic(topic="t", partitions=parts)], **fields))


def test_the_window_never_lets_more_than_its_size_be_outstanding() -> None:
    window = CreditWindow(2)
    window.take()
    window.take()
    assert window.available == 0
    with pytest.raises(AssertionError):
        window.take()  # sending without a credit is a broker bug, not a client's
    window.grant(2)
    assert window.available == 2


@pytest.mark.parametrize("messages", [0, -1, 3])
def test_a_credit_that_is_not_positive_or_exceeds_the_window_is_refused(messages: int) -> None:
    window = CreditWindow(2)
    window.take()
    with pytest.raises(MalformedRequest):
        window.grant(messages)  # 3: one message received, three credits: more than the window of 2
    assert window.available == 1  # nothing applied


def test_open_applies_defaults_and_the_brokers_limits() -> None:
    spec = parse_open(opened(((0, 5), (1, 7))), request_max_bytes=64 << 20)
    assert spec.positions == {("t", 0): 5, ("t", 1): 7} and spec.epochs == {("t", 0): -1, ("t", 1): -1}
    assert spec.window_messages == WINDOW_MESSAGES_DEFAULT and spec.max_bytes_per_message == 1 << 20 and not spec.records
    big = parse_open(opened(max_bytes_per_message=16 << 20, window_messages=64, format=broker_pb2.RECORDS), 64 << 20)
    assert big.window_messages * big.max_bytes_per_message <= CONSUME_STREAM_BYTES_MAX and big.records
    assert parse_open(opened(max_bytes_per_message=60 << 20), 8 << 20).max_bytes_per_message == 4 << 20


@pytest.mark.parametrize("request_, says", [
    (broker_pb2.ConsumeRequest(credit=broker_pb2.ConsumeCredit(messages=1)), "must start with an `open`"),
    (opened(()), "names no partition"),
    (opened(((0, 0), (0, 5))), "appears twice"),
    (opened(((0, -1),)), "offset must be >= 0"),
    (opened(window_messages=65), "at most 64"),
    (opened(max_bytes_per_message=-1), ">= 0"),
    (opened(format=7), "BATCHES (0) or RECORDS (1)"),
])
def test_a_malformed_open_is_refused_with_what_to_fix(request_: broker_pb2.ConsumeRequest, says: str) -> None:
    with pytest.raises(MalformedRequest, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_open(request_, 64 << 20)


def test_an_epoch_below_minus_one_is_refused() -> None:
    request = opened()
    request.open.topics[0].partitions[0].current_leader_epoch = -2
    with pytest.raises(MalformedRequest, match="current_leader_epoch"):
        parse_open(request, 64 << 20)


def test_a_negative_partition_is_refused_as_malformed() -> None:
    with pytest.raises(MalformedRequest, match="partition numbers are >= 0"):
        parse_open(opened(partitions=((-1, 0),)), 64 << 20)
