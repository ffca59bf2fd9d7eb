"""The ``ProduceStream`` RPC: Produce requests on one long-lived stream, each answered as soon
as it completes.

A unary Produce opens an HTTP/2 stream, sends headers and trailers and closes it again; on
this machine that alone costs a Python gRPC server about twice the CPU of one message each
way on a stream that is already open, and a client the same again (docs/performance.md).
A producer that keeps one stream open per broker pays only the messages.

Each request is served exactly as a unary Produce is (same validation, authorization,
quotas and answers) by its own task, so an acks=all request waiting for replication does
not hold up the requests behind it: answers leave in completion order and carry the
request's ``correlation_id``, which the client matches. At most ``IN_FLIGHT_MAX`` requests of
one stream are served at once; past that the stream stops reading until one is answered (the
client's own in-flight limit is far lower, so this only bounds a misbehaving client).
A request of the wrong shape ends the stream with INVALID_ARGUMENT, as it fails a unary call.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Awaitable, Callable

from kraftlog_proto import broker_pb2

IN_FLIGHT_MAX = 256  # requests of one stream being served at once

ProduceObserver = Callable[[broker_pb2.ProduceRequest, broker_pb2.ProduceResponse, float], None]
_END = object()  # the request side ended and every request was answered


async def serve_produce_stream(
    requests: AsyncIterator[broker_pb2.ProduceRequest],
    produce: Callable[[broker_pb2.ProduceRequest], Awaitable[broker_pb2.ProduceResponse]],
    observe: ProduceObserver | None = None,
) -> AsyncIterator[broker_pb2.ProduceResponse]:
    """Answers to ``requests``, each from ``produce``, in the order they complete."""
    answers: asyncio.Queue = asyncio.Queue()
    slots = asyncio.Semaphore(IN_FLIGHT_MAX)
    serving: set[asyncio.Task] = set()

    async def serve(request: broker_pb2.ProduceRequest) -> None:
        started = time.perf_counter()
        try:
            response = await produce(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # MalformedRequest, or a bug: the stream ends with it
            answers.put_nowait(exc)
            return
        finally:
            slots.release()
        response.correlation_id = request.correlation_id
        answers.put_nowait(response)
        if observe is not None:
            observe(request, response, time.perf_counter() - started)

    async def read() -> None:
        try:
            async for request in requests:
                await slots.acquire()
                task = asyncio.create_task(serve(request))
                serving.add(task)
                task.add_done_callback(serving.discard)
            if serving:
                await asyncio.wait(set(serving))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the request side failed: the stream ends with it
            answers.put_nowait(exc)
            return
        answers.put_nowait(_END)

    reader = asyncio.create_task(read())
    try:
        while True:
            answer = await answers.get()
            if answer is _END:
                return
            if isinstance(answer, BaseException):
                raise answer
            yield answer
    finally:
        reader.cancel()
        for task in list(serving):
            task.cancel()
