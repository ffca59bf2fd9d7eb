"""Limits that both ends of a connection must agree on, each defined once.

A gRPC message larger than its receiver's limit fails with RESOURCE_EXHAUSTED and a client
cannot tell which side's number was wrong, so the broker, the controller and every client
read these values from here instead of writing the number again. Each value says why it is
what it is; the module-level assertions keep them consistent with each other.
"""

from __future__ import annotations

MESSAGE_BYTES_MAX = 64 << 20
"""Largest gRPC message a kraftlog server or client sends or accepts (gRPC's default is
4 MiB). Requests carry many partitions at once (one produce or fetch per broker, not per
partition, because each call costs CPU of its own), so a produce request or fetch answer is
tens of MiB; and a starting broker receives the controller's metadata snapshot as one
``StreamMetadata`` message. The broker's ``--request-max-bytes`` starts from this value."""

ENVELOPE_BYTES_MAX = 1 << 20
"""Room kept in a message for what surrounds its record batches (topic names, per-partition
fields, protobuf framing): a producer's ``max_request_size`` and a consumer's
``fetch_max_bytes`` count batch bytes only, so they may be at most
``MESSAGE_BYTES_MAX - ENVELOPE_BYTES_MAX``."""

BATCH_BYTES_PER_MESSAGE_MAX = MESSAGE_BYTES_MAX - ENVELOPE_BYTES_MAX
"""The most record-batch bytes one request or answer may carry."""

FETCH_BYTES_MAX_DEFAULT = 50 << 20
"""A fetch's ``max_bytes`` when the request leaves it 0, and the consumer's default: Kafka's
``fetch.max.bytes`` default (52428800), which fits in one message with its envelope."""

CONSUME_STREAM_BYTES_MAX = 64 << 20
"""Bytes a ``Consume`` stream may have outstanding (window x message size): the broker lowers
the window to fit, and the client, granting its credits in groups, must know the window it
got (`consume_window`)."""


def consume_window(window_messages: int, message_bytes: int) -> int:
    """The window of a Consume stream asking for ``window_messages`` of ``message_bytes``: a
    broker whose messages are smaller (its own limit) keeps at least this window."""
    return min(window_messages, max(CONSUME_STREAM_BYTES_MAX // message_bytes, 1))


assert 0 < ENVELOPE_BYTES_MAX < MESSAGE_BYTES_MAX
assert FETCH_BYTES_MAX_DEFAULT <= BATCH_BYTES_PER_MESSAGE_MAX
