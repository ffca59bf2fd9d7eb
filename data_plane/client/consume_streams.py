"""The consumer's streams (``fetch_mode="stream"``): ``Broker.Consume`` streams to partition
leaders, whose messages land in one queue that the consumer's ``poll`` drains.

A stream's partitions are fixed when it opens; a partition the broker ends (leader change,
out of range, broker shutting down) or whose stream breaks is no longer ``streaming`` and the
consumer opens a new stream for it at its leader, from where it left off. Each stream has a
reader thread (gRPC's blocking iterator) and a request queue that gRPC drains from its own
thread; the consumer owes one credit per message with data it has taken and grants them in
one message once half the window is owed, so at most ``window`` messages per stream are ever
queued here or on their way, and the broker always has half a window to send into. A credit
per message would cost a gRPC message back per record delivered (a record a millisecond, each
its own message, doubled the stream's messages and the consumer's share of the CPU).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import NamedTuple

import grpc

from data_plane.client.metadata_cache import TopicPartition
from kraftlog_proto import broker_pb2
from server_common.channel_pool import ChannelPool
from server_common.limits import consume_window


class ConsumeStream:
    """One open Consume stream: the partitions it still serves and where each continues."""

    _ids = itertools.count()

    def __init__(self, address: str, positions: dict[TopicPartition, int], window_messages: int) -> None:
        """``window_messages``: the stream's window as the broker applies it (`consume_window`)."""
        self.id = next(self._ids)
        self.address = address
        self.next_offsets = dict(positions)
        self.live = True
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.call = None
        self._grant_at = max(window_messages // 2, 1)  # owed credits sent in one message
        self._owed = 0

    def grant(self) -> None:
        """A message with data was taken: its credit is owed, and sent with the others owed
        once they make half the window."""
        self._owed += 1
        if self._owed >= self._grant_at:
            self.requests.put(broker_pb2.ConsumeRequest(credit=broker_pb2.ConsumeCredit(messages=self._owed)))
            self._owed = 0

    def cancel(self) -> None:
        self.live = False
        self.requests.put(None)  # ends gRPC's request iterator
        if self.call is not None:
            self.call.cancel()


class StreamEvent(NamedTuple):
    """A stream's next message, or its end (``message`` None; ``error`` None when it ended cleanly)."""

    stream: ConsumeStream
    message: broker_pb2.ConsumeResponse | None
    error: grpc.RpcError | None = None


class ConsumeStreams:
    """The consumer's open streams and the queue their messages arrive on."""

    def __init__(self, pool: ChannelPool, window_messages: int, message_bytes: int, client_id: str,
                 isolation_level: int = broker_pb2.READ_UNCOMMITTED) -> None:
        self._pool = pool
        self._isolation_level = isolation_level
        self._window_messages = window_messages
        self._message_bytes = message_bytes
        self._client_id = client_id
        self._streams: dict[int, ConsumeStream] = {}
        self.events: queue.SimpleQueue[StreamEvent] = queue.SimpleQueue()

    def streaming(self) -> set[TopicPartition]:
        """Partitions some live stream serves."""
        return {tp for s in self._streams.values() for tp in s.next_offsets}

    def __bool__(self) -> bool:
        return bool(self._streams)

    def open(self, address: str, positions: dict[TopicPartition, int], epochs: dict[TopicPartition, int]) -> None:
        """A stream to ``address`` for ``positions`` (leader epochs checked as in Fetch)."""
        stream = ConsumeStream(address, positions, consume_window(self._window_messages, self._message_bytes))
        topics: dict[str, broker_pb2.ConsumeTopic] = {}
        for (topic, partition), offset in positions.items():
            entry = topics.setdefault(topic, broker_pb2.ConsumeTopic(topic=topic))
            entry.partitions.add(partition=partition, offset=offset, current_leader_epoch=epochs[(topic, partition)])
        stream.requests.put(broker_pb2.ConsumeRequest(open=broker_pb2.ConsumeOpen(
            topics=list(topics.values()), format=broker_pb2.BATCHES, max_bytes_per_message=self._message_bytes,
            window_messages=self._window_messages, client_id=self._client_id, isolation_level=self._isolation_level,
        )))
        stream.call = self._pool.stub(address).Consume(iter(stream.requests.get, None))
        self._streams[stream.id] = stream
        threading.Thread(target=self._read, args=(stream,), name=f"consume-stream-{address}", daemon=True).start()

    def _read(self, stream: ConsumeStream) -> None:
        try:
            for message in stream.call:
                self.events.put(StreamEvent(stream, message))
        except grpc.RpcError as err:
            self.events.put(StreamEvent(stream, None, None if err.code() == grpc.StatusCode.CANCELLED and not stream.live else err))
            return
        self.events.put(StreamEvent(stream, None))

    def next_event(self, wait_s: float) -> StreamEvent | None:
        """The next event of a live stream, waiting up to ``wait_s`` for one."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                event = self.events.get(timeout=max(deadline - time.monotonic(), 0)) if wait_s > 0 else self.events.get_nowait()
            except queue.Empty:
                return None
            if event.stream.live:
                if event.message is None:
                    self.forget(event.stream)
                return event

    def forget(self, stream: ConsumeStream) -> None:
        """The stream is over (ended, broken or cancelled): its partitions need a new one."""
        stream.live = False
        self._streams.pop(stream.id, None)

    def cancel(self, tps: set[TopicPartition] | None = None) -> None:
        """Cancel the streams serving any of ``tps`` (all streams when None)."""
        for stream in list(self._streams.values()):
            if tps is None or not tps.isdisjoint(stream.next_offsets):
                stream.cancel()
                self.forget(stream)
