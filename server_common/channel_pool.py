"""One gRPC channel per server address, shared by everything a client object does, in
blocking and in asyncio code.

A channel multiplexes any number of concurrent calls over one HTTP/2 connection, so a
channel per request (or per partition) would only add connection set-up cost. Every client
of kraftlog keeps its channels this way: the consumer and admin client (blocking), the
producer's sender (asyncio), the controller admin client (blocking) and the broker's link
to the controllers (asyncio). They differ only in the stub they make, the channel options
they pass (given explicitly, as each is a decision of its caller) and how a channel closes,
so one implementation serves them all: ``ChannelPool`` for blocking channels,
``AioChannelPool`` for ``grpc.aio`` ones.

Given ``credentials`` (``grpc.ssl_channel_credentials``), every channel of the pool is a TLS
channel; None means plaintext. The caller decides, from its security configuration.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Generic, Sequence, TypeVar

import grpc
import grpc.aio

Stub = TypeVar("Stub")
ChannelOptions = Sequence[tuple[str, Any]]


class _Pool(Generic[Stub]):
    """Channels and stubs keyed by "host:port", opened on first use and closed together."""

    def __init__(self, stub_class: Callable[[Any], Stub], options: ChannelOptions, open_channel: Callable[..., Any]) -> None:
        self._stub_class = stub_class
        self._options = list(options)
        self._open_channel = open_channel  # (address, options=...) -> channel
        self._lock = threading.Lock()
        self._channels: dict[str, Any] = {}
        self._stubs: dict[str, Stub] = {}

    def stub(self, address: str) -> Stub:
        """The stub for ``address`` ("host:port"), opening its channel on first use."""
        stub = self._stubs.get(address)
        if stub is not None:
            return stub
        with self._lock:
            if address not in self._stubs:
                channel = self._open_channel(address, options=self._options)
                self._channels[address] = channel
                self._stubs[address] = self._stub_class(channel)
            return self._stubs[address]

    def _take_channels(self) -> list[Any]:
        """Every open channel, leaving the pool empty (a later ``stub`` opens a new one)."""
        with self._lock:
            channels, self._channels, self._stubs = list(self._channels.values()), {}, {}
        return channels


class ChannelPool(_Pool[Stub]):
    """Blocking channels; shared by any number of threads."""

    def __init__(self, stub_class: Callable[[grpc.Channel], Stub], options: ChannelOptions,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        super().__init__(stub_class, options, _opener(grpc.insecure_channel, grpc.secure_channel, credentials))

    def close(self) -> None:
        """Closes every channel; in-flight calls fail with CANCELLED."""
        for channel in self._take_channels():
            channel.close()


# How long calls on a replaced channel may go on before it is closed under them.
REPLACED_CHANNEL_GRACE_S = 30.0


class AioChannelPool(_Pool[Stub]):
    """``grpc.aio`` channels; use only from the event loop that opened them.

    A channel whose last connection attempt failed fails every call at once, with that
    attempt's error, until its reconnect backoff has passed (up to the channel's
    ``grpc.max_reconnect_backoff_ms``), even when the server has been back for a while. A
    broker restarted after SIGKILL and then elected leader would so refuse a producer's
    retries for up to that long (the producer stalled 200 to 650 ms in a quarter of the
    `kraftlog perf failover` rounds). So ``stub`` replaces such a channel with a new one, which
    connects at once; callers pace their own retries, so a server still down costs one
    refused connection per retry, not a loop.
    """

    def __init__(self, stub_class: Callable[[grpc.aio.Channel], Stub], options: ChannelOptions,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        # Each channel its own connection: gRPC shares one among channels with the same target
        # and options, so a new channel would inherit the backoff it is meant to skip.
        own_connection = [("grpc.use_local_subchannel_pool", 1)]
        super().__init__(stub_class, [*options, *own_connection], _opener(grpc.aio.insecure_channel, grpc.aio.secure_channel, credentials))
        self._retired: dict[Any, asyncio.Task[None]] = {}  # replaced channels, closing once their calls end

    def stub(self, address: str) -> Stub:
        """The stub for ``address``, on a new channel if its channel is waiting out a failed
        connection attempt (``TRANSIENT_FAILURE``)."""
        channel = self._channels.get(address)
        if channel is not None and channel.get_state() is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            with self._lock:
                if self._channels.get(address) is channel:
                    del self._channels[address], self._stubs[address]
                    self._retire(channel)
        return super().stub(address)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        """Close a replaced channel once its calls have ended. Calls still on it are failing
        with its connection (UNAVAILABLE, which callers retry): closed at once, they would
        end CANCELLED instead, which callers take for a bug."""
        closing = asyncio.get_running_loop().create_task(channel.close(grace=REPLACED_CHANNEL_GRACE_S))
        self._retired[channel] = closing
        closing.add_done_callback(lambda _: self._retired.pop(channel, None))

    async def close(self) -> None:
        """Closes every channel, giving in-flight calls no grace period."""
        for channel in self._take_channels():
            await channel.close()
        retired, self._retired = self._retired, {}
        for channel, closing in retired.items():
            closing.cancel()
            await channel.close()  # a close cut short by the cancel is finished here


def _opener(insecure: Callable[..., Any], secure: Callable[..., Any], credentials: grpc.ChannelCredentials | None) -> Callable[..., Any]:
    """(address, options=...) -> channel: plaintext without credentials, TLS with them."""
    if credentials is None:
        return insecure
    return lambda address, options: secure(address, credentials, options=options)


def open_channel(address: str, credentials: grpc.ChannelCredentials | None, options: ChannelOptions = ()) -> grpc.Channel:
    """One blocking channel outside a pool (a probe, a health check), TLS when given credentials."""
    return _opener(grpc.insecure_channel, grpc.secure_channel, credentials)(address, options=list(options))


def open_aio_channel(address: str, credentials: grpc.ChannelCredentials | None, options: ChannelOptions = ()) -> grpc.aio.Channel:
    """One ``grpc.aio`` channel outside a pool (the replica fetcher's stream), TLS when given credentials."""
    return _opener(grpc.aio.insecure_channel, grpc.aio.secure_channel, credentials)(address, options=list(options))
