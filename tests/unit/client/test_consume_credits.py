"""The consumer's credits on a Consume stream: owed one per message with data taken, granted
in one message per half window, never more than were received, and never left owed while the
broker waits for them (docs/protocol.md, Streaming consume)."""

from __future__ import annotations

import queue

import pytest

from data_plane.client.consume_streams import ConsumeStream
from server_common.limits import consume_window


def granted(stream: ConsumeStream) -> list[int]:
    """The credits the stream has queued for the broker, one entry per message."""
    messages = []
    while True:
        try:
            messages.append(stream.requests.get_nowait().credit.messages)
        except queue.Empty:
            return messages


def test_credits_go_back_in_one_message_per_half_window() -> None:
    stream = ConsumeStream("b:1", {("t", 0): 0}, window_messages=8)
    for _ in range(3):
        stream.grant()
    assert granted(stream) == []  # 3 owed: the broker still holds 5 credits
    stream.grant()
    assert granted(stream) == [4]
    for _ in range(9):
        stream.grant()
    assert granted(stream) == [4, 4]  # one owed


@pytest.mark.parametrize("window", [1, 2, 3, 8, 64])
def test_the_broker_never_waits_for_a_credit_the_consumer_holds_back(window: int) -> None:
    """The broker stops at ``window`` messages outstanding; whatever the window, once the
    consumer has taken all of them it has granted enough for the broker to go on."""
    stream = ConsumeStream("b:1", {("t", 0): 0}, window_messages=window)
    outstanding = 0  # sent by the broker, not yet credited
    for _ in range(5 * window):
        assert outstanding < window, "the broker would wait for a credit the consumer holds back"
        outstanding += 1  # the broker sends a message with data; the consumer takes it
        stream.grant()
        outstanding -= sum(granted(stream))
        assert outstanding >= 0


def test_the_window_the_client_counts_with_is_the_one_the_broker_applies() -> None:
    assert consume_window(8, 1 << 20) == 8
    assert consume_window(64, 16 << 20) == 4  # 64 MiB outstanding at most
    assert consume_window(8, 63 << 20) == 1
