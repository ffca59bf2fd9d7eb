"""The producer's open ProduceStream per broker: one message each way per request instead of
a unary call (data_plane/broker/produce_stream.py has the broker's side and why).

Every request gets a correlation id and a future; one reader task per stream resolves the
futures from the answers, which come in completion order. Requests are written one at a time
(a gRPC stream takes one write at a time). When a stream breaks, every request waiting on it
fails with the stream's error (its outcome unknown, as for a failed unary call: the sender
retries it, and idempotence keeps a retry from writing twice) and the next request opens a
new stream. Runs on the sender's event loop only.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Callable

import grpc

from kraftlog_proto import broker_pb2
from kraftlog_proto.broker_pb2_grpc import BrokerStub


class StreamTimeout(Exception):
    """No answer within the request's deadline (the stream stays open; the answer, if it
    comes later, is dropped)."""


# Statuses that end a stream because of what was sent or who sent it: every request waiting on
# the stream fails with it, as the unary call would have. Any other status (UNAVAILABLE,
# CANCELLED, or INTERNAL when a broker dies mid-stream) means the stream broke: its requests
# are retried on a new one.
REQUEST_STATUSES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED,
})


def stream_error(exc: BaseException) -> BaseException:
    """What the requests on a failed stream fail with: the gRPC error itself when it is about
    the requests, else a ConnectionError (retriable) that names it."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") and exc.code() in REQUEST_STATUSES:
        return exc
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return ConnectionError(f"the produce stream broke: gRPC {exc.code().name}: {exc.details()}")
    return exc


class _Stream:
    """One open ProduceStream and the requests waiting on it."""

    def __init__(self, stub: BrokerStub) -> None:
        self.call = stub.ProduceStream()
        self.waiting: dict[int, asyncio.Future] = {}
        self.write_lock = asyncio.Lock()
        self.broken: BaseException | None = None
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                response = await self.call.read()
                if response is grpc.aio.EOF:
                    raise ConnectionError("the broker ended the produce stream")
                future = self.waiting.pop(response.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(response)
        except asyncio.CancelledError:
            self._fail(ConnectionError("the produce stream was closed"))
            raise
        except BaseException as exc:  # grpc.aio.AioRpcError (a grpc.RpcError) or the EOF above
            self._fail(stream_error(exc))

    def _fail(self, exc: BaseException) -> None:
        self.broken = exc
        waiting, self.waiting = self.waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(exc)

    async def close(self) -> None:
        """Cancel the call and wait until its read and status are back: gRPC hands a
        completion to the loop its call was made on even after that loop closed, and then
        raises "Event loop is closed" in whichever loop of the process runs gRPC next. This
        leaves it none of this stream's (a late completion of a cancelled call can still come
        on a busy machine: cli/grpc_floor.py)."""
        self.call.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)  # its read ends with the call (CANCELLED)
        await self.call.code()


def _time_out(future: asyncio.Future, timeout_s: float) -> None:
    if not future.done():
        future.set_exception(StreamTimeout(f"no answer within {timeout_s:.1f}s"))


class ProduceStreams:
    """One ProduceStream per broker address, opened on first use and after a break."""

    def __init__(self, stub_of: Callable[[str], BrokerStub]) -> None:
        self._stub_of = stub_of
        self._streams: dict[str, _Stream] = {}
        self._ids = itertools.count()

    async def produce(self, address: str, request: broker_pb2.ProduceRequest, timeout_s: float) -> broker_pb2.ProduceResponse:
        """Send ``request`` on ``address``'s stream and wait for its answer. Raises the
        stream's error (a ``grpc.RpcError`` or ``ConnectionError``) if it breaks first, or
        `StreamTimeout`."""
        stream = self._streams.get(address)
        if stream is None or stream.broken is not None:
            stream = self._streams[address] = _Stream(self._stub_of(address))
        request.correlation_id = correlation_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        stream.waiting[correlation_id] = future
        try:
            async with stream.write_lock:
                if stream.broken is not None:
                    raise stream.broken
                try:
                    await stream.call.write(request)
                except asyncio.InvalidStateError:  # the call ended before the reader saw why
                    raise stream.broken or ConnectionError("the produce stream ended") from None
                except grpc.RpcError as exc:
                    raise stream_error(exc) from None
            # The answer's future is awaited itself, with a timer beside it: `asyncio.wait_for`
            # would add a future and a wake-up between the answer and this request's task.
            timer = asyncio.get_running_loop().call_later(timeout_s, _time_out, future, timeout_s)
            try:
                return await future
            finally:
                timer.cancel()
        finally:
            stream.waiting.pop(correlation_id, None)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: a break that raced the write is reported once, above

    async def close(self) -> None:
        """Close every stream; requests still waiting fail."""
        streams, self._streams = self._streams, {}
        await asyncio.gather(*(stream.close() for stream in streams.values()))
