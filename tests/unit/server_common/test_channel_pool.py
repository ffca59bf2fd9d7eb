"""server_common.channel_pool: one channel per address, for blocking and asyncio callers,
against a real gRPC server on loopback (the standard health service)."""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Iterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from server_common.channel_pool import AioChannelPool, ChannelPool

CHECK = health_pb2.HealthCheckRequest()


@pytest.fixture
def address() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def test_every_caller_of_an_address_shares_one_stub_and_channel(address: str) -> None:
    opened: list[object] = []

    def stub_class(channel: grpc.Channel) -> health_pb2_grpc.HealthStub:
        opened.append(channel)
        return health_pb2_grpc.HealthStub(channel)

    pool = ChannelPool(stub_class, options=[])
    stubs: list[object] = []
    threads = [threading.Thread(target=lambda: stubs.append(pool.stub(address))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(opened) == 1 and all(s is stubs[0] for s in stubs)
        assert pool.stub(address).Check(CHECK, timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        other = pool.stub("127.0.0.1:1")  # another address, another channel (never connected)
        assert other is not stubs[0] and len(opened) == 2
    finally:
        pool.close()


def test_close_closes_every_channel_and_a_later_stub_opens_a_new_one(address: str) -> None:
    pool = ChannelPool(health_pb2_grpc.HealthStub, options=[])
    before = pool.stub(address)
    pool.close()
    with pytest.raises(ValueError, match="closed channel"):
        before.Check(CHECK, timeout=5)
    after = pool.stub(address)
    try:
        assert after is not before
        assert after.Check(CHECK, timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        pool.close()


def test_the_options_given_reach_the_channel(address: str) -> None:
    """A receive limit below the answer's size fails the call: the options are applied."""
    tight = ChannelPool(health_pb2_grpc.HealthStub, options=[("grpc.max_receive_message_length", 1)])
    try:
        with pytest.raises(grpc.RpcError) as refused:
            tight.stub(address).Check(CHECK, timeout=5)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        tight.close()


def test_the_asyncio_pool_shares_channels_and_closes_them(address: str) -> None:
    async def scenario() -> None:
        pool = AioChannelPool(health_pb2_grpc.HealthStub, options=[])
        stub = pool.stub(address)
        assert pool.stub(address) is stub
        assert (await stub.Check(CHECK, timeout=5)).status == health_pb2.HealthCheckResponse.SERVING
        await pool.close()
        with pytest.raises(grpc.aio.UsageError):
            await stub.Check(CHECK, timeout=5)
        assert pool.stub(address) is not stub
        await pool.close()

    asyncio.run(scenario())


def test_a_channel_waiting_out_a_failed_connection_is_replaced_once_the_server_is_back() -> None:
    """The server is down at the first call, then starts on that port. The channel's backoff
    (10 s here) would fail every call at once with the old "Connection refused"; the pool
    gives the next caller a new channel, which connects."""
    from server_common.local_cluster import free_ports

    [port] = free_ports(1)
    address = f"127.0.0.1:{port}"
    slow_retry = [("grpc.initial_reconnect_backoff_ms", 10_000), ("grpc.max_reconnect_backoff_ms", 10_000)]

    async def scenario() -> None:
        pool = AioChannelPool(health_pb2_grpc.HealthStub, options=slow_retry)
        with pytest.raises(grpc.aio.AioRpcError) as down:
            await pool.stub(address).Check(CHECK, timeout=5)
        assert down.value.code() == grpc.StatusCode.UNAVAILABLE
        server = grpc.aio.server()
        servicer = health.aio.HealthServicer()
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        assert server.add_insecure_port(address) == port
        await server.start()
        try:
            answer = await pool.stub(address).Check(CHECK, timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            await pool.close()
            await server.stop(grace=None)

    asyncio.run(scenario())
