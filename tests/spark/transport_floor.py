"""What moving the bytes of a read costs through gRPC alone, on this machine: the floor under
any gRPC broker and client, against which the broker's and the Python workers' CPU per record
in the streaming-read benchmark can be read (docs/spark.md, "Where the time goes").

A bare ``grpc.aio`` server process streams ready-made ``ConsumeResponse`` messages (one
partition entry of ``message_bytes`` batch bytes each, serialised by protobuf as the broker's
are) and a synchronous client in this process reads them and takes each entry's bytes out, as
the consumer's receiving thread does. Nothing else: no log, no credits, no decoding, no Arrow.

    python -m tests.spark.transport_floor serve PORT MESSAGE_BYTES   # the server (the benchmark starts it)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass

import grpc

from cli.grpc_floor import serve_bare
from kraftlog_proto import broker_pb2
from server_common.local_cluster import free_ports
from tests.spark.read_benchmark import cpu_seconds
from tests.spark.spark_processes import REPO

_METHOD = "/kraftlog.bench.TransportFloor/Stream"
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


def _message(message_bytes: int) -> broker_pb2.ConsumeResponse:
    response = broker_pb2.ConsumeResponse()
    response.partitions.add(topic="bench", partition=0, high_watermark=1, next_offset=1, batches=bytes(message_bytes))
    return response


async def _serve(port: int, message_bytes: int) -> None:
    message = _message(message_bytes)

    async def stream(request: bytes, context):
        for _ in range(int(request.decode())):
            yield message

    handler = grpc.unary_stream_rpc_method_handler(stream, response_serializer=broker_pb2.ConsumeResponse.SerializeToString)
    await serve_bare(port, "kraftlog.bench.TransportFloor", {"Stream": handler}, _CHANNEL_OPTIONS)


@dataclass(frozen=True)
class Floor:
    """CPU per MiB moved: the server's (serialise, send) and the client's (receive, parse,
    take the bytes out), and the wall-clock rate."""

    server_ms_per_mib: float
    client_ms_per_mib: float
    mib_per_s: float


def measure(message_bytes: int, mib: int, rounds: int) -> list[Floor]:
    """``rounds`` reads of ``mib`` MiB each in messages of ``message_bytes``, after a warm-up."""
    port = free_ports(1)[0]
    server = subprocess.Popen([sys.executable, "-m", "tests.spark.transport_floor", "serve", str(port), str(message_bytes)],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=_CHANNEL_OPTIONS) as channel:
            call = channel.unary_stream(_METHOD, response_deserializer=broker_pb2.ConsumeResponse.FromString)
            messages = max(1, mib * (1 << 20) // message_bytes)

            def read(count: int) -> int:
                return sum(len(entry.batches) for response in call(str(count).encode()) for entry in response.partitions)

            read(min(messages, 20))
            floors = []
            for _ in range(rounds):
                server_before, client_before, wall_before = cpu_seconds(server.pid, False), time.process_time(), time.perf_counter()
                moved = read(messages) / (1 << 20)
                assert moved * (1 << 20) == messages * message_bytes, "the stream lost bytes"
                server_s, client_s = cpu_seconds(server.pid, False) - server_before, time.process_time() - client_before
                floors.append(Floor(server_s * 1000 / moved, client_s * 1000 / moved, moved / (time.perf_counter() - wall_before)))
            return floors
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) != 4:
        sys.exit("usage: python -m tests.spark.transport_floor serve PORT MESSAGE_BYTES")
    asyncio.run(_serve(int(sys.argv[2]), int(sys.argv[3])))
