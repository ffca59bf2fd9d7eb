"""Prometheus metrics shared by brokers and controllers: the per-RPC figures (one gRPC
server interceptor, so no servicer counts anything itself) and a way for scrape-time
collectors to read state owned by the asyncio loop. The endpoint serving them is
``metrics_endpoint.py``.

The hot path pays two counter increments and one histogram observation per RPC; everything
that walks partitions or metadata is computed when Prometheus scrapes (a custom collector),
so a broker that nobody scrapes pays nothing for it. ``docs/metrics.md`` lists every metric.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Callable, TypeVar

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, PlatformCollector, ProcessCollector

T = TypeVar("T")
SCRAPE_READ_TIMEOUT_S = 5.0  # a scrape that cannot get the loop's attention this long fails instead of hanging
# RPC latency buckets (seconds): sub-millisecond metadata answers up to acks=all produces and long-poll fetches.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# An observer sees each finished unary call of its method as (request, response), and each
# message a streaming method sends as (None, message).
Observer = Callable[[Any, Any], None]


def new_registry() -> CollectorRegistry:
    """A registry of this process's own (not the library's global one, so tests can build
    several), with the standard process_* and python_info metrics."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def read_on_loop(loop: asyncio.AbstractEventLoop, read: Callable[[], T]) -> T:
    """Run ``read`` on ``loop``'s thread and return its result: scrapes arrive on the HTTP
    thread, while partitions and replication state belong to the loop and change between its
    steps. Reading there gives a consistent snapshot with no locks on the hot path."""

    async def on_loop() -> T:
        return read()

    return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(timeout=SCRAPE_READ_TIMEOUT_S)


def authentication_failures(registry: CollectorRegistry) -> Counter:
    """Calls refused for their credentials (``server_common/authentication.py`` counts them)."""
    return Counter(
        "kraftlog_authentication_failures", "Calls refused for their credentials, by reason: wrong_credentials "
        "(unknown user or wrong password, verified) or throttled (refused before verifying: too many failures)",
        ["reason"], registry=registry)


class RpcMetrics:
    """Request counts by method and gRPC status code, and unary latency histograms."""

    def __init__(self, registry: CollectorRegistry, observers: dict[str, Observer] | None = None) -> None:
        self.requests = Counter(
            "kraftlog_rpc_requests", "RPCs finished, by method and gRPC status code (streams count once, when they end)",
            ["method", "code"], registry=registry,
        )
        self.latency = Histogram(
            "kraftlog_rpc_duration_seconds", "Time to answer a unary RPC, by method",
            ["method"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.observers = observers or {}

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _RpcInterceptor(self)

    def counted_as(self, method: str) -> Callable[[Any, Any, float], None]:
        """For a request answered inside a stream (a ProduceStream's): count and time it, and
        show it to the observers, as the unary ``method`` it stands for."""
        observe = self.observers.get(method)

        def answered(request: Any, response: Any, seconds: float) -> None:
            if observe is not None:
                observe(request, response)
            self.finished(method, grpc.StatusCode.OK, seconds)

        return answered

    def finished(self, method: str, code: grpc.StatusCode, seconds: float | None) -> None:
        self.requests.labels(method, code.name).inc()
        if seconds is not None:
            self.latency.labels(method).observe(seconds)


def _status(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
    """The status the client sees: what the servicer set (or aborted with), CANCELLED for a
    call the client gave up, UNKNOWN for an exception that escaped the servicer."""
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpcio versions answer the raw status number
        return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    if exc is None:
        return grpc.StatusCode.OK
    if isinstance(exc, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


class _RpcInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each method's handler once per call with timing and status counting."""

    def __init__(self, metrics: RpcMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(method, handler.unary_unary))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._streaming(method, handler.unary_stream))
        if handler.stream_stream is not None:
            return handler._replace(stream_stream=self._streaming(method, handler.stream_stream))
        return handler._replace(stream_unary=self._unary(method, handler.stream_unary))

    def _unary(self, method: str, behaviour):
        metrics = self._metrics
        observe = metrics.observers.get(method)

        async def timed(request, context):
            start = time.perf_counter()
            failure: BaseException | None = None
            try:
                response = behaviour(request, context)
                if inspect.isawaitable(response):
                    response = await response
                if observe is not None:
                    observe(request, response)
                return response
            except BaseException as exc:
                failure = exc
                raise
            finally:
                metrics.finished(method, _status(context, failure), time.perf_counter() - start)

        return timed

    def _streaming(self, method: str, behaviour):
        """Long-lived streams have no meaningful latency: only their end and status count."""
        metrics = self._metrics
        observe = metrics.observers.get(method)

        async def counted(request, context):
            failure: BaseException | None = None
            try:
                produced = behaviour(request, context)
                if inspect.isasyncgen(produced):
                    async for item in produced:
                        if observe is not None:
                            observe(None, item)
                        yield item
                elif inspect.isawaitable(produced):  # writes with context.write and returns
                    await produced
            except BaseException as exc:
                failure = exc
                raise
            finally:
                metrics.finished(method, _status(context, failure), None)

        return counted
