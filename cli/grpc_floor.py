"""The floor under every kraftlog latency figure: what one message costs through Python's gRPC
alone, on this machine, in this sitting.

A bare ``grpc.aio`` server process answers 100-byte messages with 100-byte messages: once as
a unary call (what a Produce is), once as a message each way on an open bidirectional stream
(what a replication round or a pushed batch is). Nothing else runs in it: no log, no
interceptors, no protobuf beyond raw bytes. `kraftlog perf latency` prints these beside the
broker's figures, so a reader sees how far a replicated write is from the language's limit.

The measuring client runs in a process of its own too (`measure_floor` starts it). gRPC hands
each completion to the event loop its call was made on, even once that loop has closed, and
then raises "Event loop is closed" in whichever loop of the process runs gRPC next: the
producer that `perf latency` closed just before waits for its calls to end (sender.py), but
on a busy machine a late completion of a cancelled call can still come, and the floor would
print its traceback. A fresh process has no such past.

    python -m cli.grpc_floor PORT [uvloop|asyncio]                 # the server (the client starts it)
    python -m cli.grpc_floor measure COUNT BYTES uvloop|asyncio PAUSE_S  # the client: prints its figures as JSON
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import grpc

from cli.perf_common import pace, percentiles
from server_common.event_loops import run_loop
from server_common.local_cluster import free_ports

_SERVICE = "kraftlog.bench.Floor"
_IDENTITY = (lambda b: b, lambda b: b)  # raw bytes on the wire: no serialisation cost at all


async def _serve(port: int) -> None:
    async def echo(request: bytes, context) -> bytes:
        return request

    async def pingpong(requests, context):
        async for request in requests:
            yield request

    await serve_bare(port, _SERVICE, {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, *_IDENTITY),
        "PingPong": grpc.stream_stream_rpc_method_handler(pingpong, *_IDENTITY),
    })


async def serve_bare(port: int, service: str, handlers: dict, options: list | None = None) -> None:
    """A ``grpc.aio`` server with nothing but ``handlers`` under ``service`` on loopback ``port``;
    prints "ready" once it listens (the measuring process waits for that line), then serves
    until killed. The floor benchmarks' servers (this one's, tests/spark/transport_floor.py)."""
    server = grpc.aio.server(options=options or [])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


@dataclass(frozen=True)
class FloorFigures:
    """Round-trip latencies (ms percentiles) of one 100-byte message each way."""

    unary_ms: dict[str, float]
    stream_ms: dict[str, float]


async def _measure(port: int, count: int, message_bytes: int, pause_s: float) -> FloorFigures:
    payload = bytes(message_bytes)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        unary = channel.unary_unary(f"/{_SERVICE}/Echo", *_IDENTITY)
        unary_ms = []
        for i in range(count + count // 10):  # the first tenth warms the connection up, unrecorded
            started = time.perf_counter()
            await unary(payload)
            if i >= count // 10:
                unary_ms.append((time.perf_counter() - started) * 1000)
                await pace(pause_s)
        call = channel.stream_stream(f"/{_SERVICE}/PingPong", *_IDENTITY)()
        stream_ms = []
        for i in range(count + count // 10):
            started = time.perf_counter()
            await call.write(payload)
            await call.read()
            if i >= count // 10:
                stream_ms.append((time.perf_counter() - started) * 1000)
                await pace(pause_s)
        await call.done_writing()
        await call.code()  # the call ends before the channel and the loop close, leaving gRPC no callback for a closed loop
    return FloorFigures(percentiles(unary_ms), percentiles(stream_ms))


def measure_floor(count: int = 3000, message_bytes: int = 100, loop: str = "uvloop", pause_s: float = 0.0) -> FloorFigures:
    """The floor, measured by a client process of its own against the bare server's. ``loop``:
    the event loop both run (uvloop, as kraftlog's processes do by default); ``pause_s``: the
    gap after each measured message."""
    done = subprocess.run([sys.executable, "-m", "cli.grpc_floor", "measure", str(count), str(message_bytes), loop, str(pause_s)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the gRPC floor measurement failed (exit code {done.returncode}): {done.stderr.strip()[-2000:]}")
    return FloorFigures(**json.loads(done.stdout))


def _measure_here(count: int, message_bytes: int, loop: str, pause_s: float) -> FloorFigures:
    """Start the bare server in its own process, measure from this one, stop it."""
    (port,) = free_ports(1)
    server = subprocess.Popen([sys.executable, "-m", "cli.grpc_floor", str(port), loop], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the gRPC floor server did not start (exit code {server.poll()})")
        return run_loop(_measure(port, count, message_bytes, pause_s), loop)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        print(json.dumps(asdict(_measure_here(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])))))
    else:
        run_loop(_serve(int(sys.argv[1])), sys.argv[2] if len(sys.argv) > 2 else "asyncio")
