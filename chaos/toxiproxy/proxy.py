"""TCP proxying: a listener per proxy, and per connection one asyncio pipeline per direction.

A :class:`Link` is one direction of one connection: a reader task timestamps chunks into a
bounded queue (so a latency toxic delays each chunk from its arrival, as Toxiproxy does,
instead of serialising round trips), and a pump task passes each chunk through the
link's toxics in the order they were added, then writes it out with back-pressure.
Upstream is client -> server, downstream is server -> client.

End of stream is forwarded as a half-close (``write_eof``) and the connection ends when
both directions have ended, so request/response protocols that half-close still work
(Toxiproxy closes the whole connection on the first end of stream; nothing we proxy
depends on that). Toxics that cut the connection call :meth:`Connection.shutdown`.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import structlog

from chaos.toxiproxy.toxics import TOXIC_TYPES, Chunk, Toxic, ToxicSpec

log = structlog.get_logger("chaos.toxiproxy")

READ_SIZE = 32 * 1024
QUEUE_CHUNKS = 256  # at most 8 MiB buffered per direction before the reader pushes back


class ProxyError(Exception):
    """A proxy operation the API must refuse; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as Toxiproxy's listen/upstream fields use it."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ProxyError(f"address {address!r} is not host:port (for example 127.0.0.1:0)", 400)
    return host.strip("[]") or "0.0.0.0", int(port)


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Link:
    """One direction of a connection with its own toxic instances."""

    def __init__(
        self, conn: Connection, stream: str, src: asyncio.StreamReader, dest: asyncio.StreamWriter
    ) -> None:
        self.conn = conn
        self.stream = stream
        self.src = src
        self.dest = dest
        self.toxics: dict[str, Toxic] = {}
        self._queue: asyncio.Queue[Chunk | None] = asyncio.Queue(QUEUE_CHUNKS)

    def add_toxic(self, spec: ToxicSpec) -> None:
        toxic = TOXIC_TYPES[spec.type](spec, self.conn)
        self.toxics[spec.name] = toxic
        toxic.attach()

    async def run(self) -> None:
        """Pump until end of stream; on any socket error cut the whole connection."""
        reader = asyncio.get_running_loop().create_task(self._read())
        try:
            await self._pump()
        except (ConnectionError, OSError) as exc:
            log.debug("link failed", proxy=self.conn.proxy.name, stream=self.stream, error=str(exc))
            self.conn.shutdown("close")
        except Exception:  # a bug in a toxic must cost one connection, not the server
            log.exception("link crashed", proxy=self.conn.proxy.name, stream=self.stream)
            self.conn.shutdown("close")
        finally:
            reader.cancel()
            self.conn.link_finished()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await self.src.read(READ_SIZE):
                await self._queue.put(Chunk(data, loop.time()))
        except (ConnectionError, OSError):
            self.conn.shutdown("close")
            return
        await self._queue.put(None)

    async def _pump(self) -> None:
        while (chunk := await self._queue.get()) is not None:
            await self._flow(chunk, self._active())
        for toxic in self._active():
            if not await toxic.on_eof():
                await self.conn.stopped()  # swallowed: this direction ends with the connection
                return
        if self.dest.can_write_eof():
            self.dest.write_eof()
        else:
            self.conn.shutdown("close")

    def _active(self) -> list[Toxic]:
        return [toxic for toxic in self.toxics.values() if toxic.active]

    async def _flow(self, chunk: Chunk, toxics: list[Toxic]) -> None:
        if not toxics:
            if not self.conn.closing:
                self.dest.write(chunk.data)
                await self.dest.drain()
            return
        async for piece in toxics[0].process(chunk):
            await self._flow(piece, toxics[1:])


class Connection:
    """A client connection and its upstream connection, with an upstream and downstream link."""

    def __init__(
        self, proxy: Proxy, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.links: dict[str, Link] = {}
        self.closing: str | None = None
        self._client = (client_reader, client_writer)
        self._upstream_writer: asyncio.StreamWriter | None = None
        self._stop = asyncio.Event()
        self._links_running = 2

    def shutdown(self, mode: str) -> None:
        """Ask for the connection to end: ``close``, ``abort`` or ``reset``; first ask wins."""
        if self.closing is None:
            self.closing = mode
            self._stop.set()

    async def stopped(self) -> None:
        await self._stop.wait()

    def link_finished(self) -> None:
        """Each direction reports its end; the connection ends when both have."""
        self._links_running -= 1
        if self._links_running == 0:
            self._stop.set()

    def add_toxic(self, spec: ToxicSpec) -> None:
        if self.links:
            self.links[spec.stream].add_toxic(spec)

    def toxic(self, spec: ToxicSpec) -> Toxic | None:
        return self.links[spec.stream].toxics.get(spec.name) if self.links else None

    def remove_toxic(self, spec: ToxicSpec) -> None:
        toxic = self.links[spec.stream].toxics.pop(spec.name, None) if self.links else None
        if toxic is not None:
            toxic.detach()

    async def run(self) -> None:
        client_reader, client_writer = self._client
        try:
            host, port = split_host_port(self.proxy.upstream)
            up_reader, self._upstream_writer = await asyncio.open_connection(host, port)
        except (OSError, ProxyError) as exc:
            log.warning(
                "upstream unreachable, closing the client",
                proxy=self.proxy.name,
                upstream=self.proxy.upstream,
                error=str(exc),
            )
            self._close_writers("close")
            return
        if self.closing:
            self._close_writers(self.closing)
            return
        self.links = {
            "upstream": Link(self, "upstream", client_reader, self._upstream_writer),
            "downstream": Link(self, "downstream", up_reader, client_writer),
        }
        for spec in self.proxy.toxics.values():
            self.add_toxic(spec)
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(link.run()) for link in self.links.values()]
        try:
            await self._stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for link in self.links.values():
                for toxic in link.toxics.values():
                    toxic.close()
            self._close_writers(self.closing or "close")

    def _close_writers(self, mode: str) -> None:
        writers = [self._client[1]]
        if self._upstream_writer is not None:
            writers.append(self._upstream_writer)
        for writer in writers:
            if mode == "close":
                writer.close()
                continue
            if mode == "reset":
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


class Proxy:
    """A named listener forwarding to ``upstream``, with the toxics applied to its connections."""

    def __init__(self, name: str, listen: str, upstream: str) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.toxics: dict[str, ToxicSpec] = {}
        self._server: asyncio.Server | None = None
        self._connections: dict[Connection, asyncio.Task[None]] = {}

    @property
    def enabled(self) -> bool:
        return self._server is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [spec.to_json() for spec in self.toxics.values()],
        }

    async def start(self) -> None:
        """Listen; a ``:0`` port is replaced by the port the OS chose, so it survives restarts."""
        if self._server is not None:
            return
        host, port = split_host_port(self.listen)
        try:
            self._server = await asyncio.start_server(self._accept, host, port)
        except OSError as exc:
            raise ProxyError(
                f"proxy {self.name!r} cannot listen on {self.listen}: {exc.strerror or exc}; "
                "choose a free address or port 0",
                500,
            ) from exc
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        self.listen = join_host_port(bound_host, bound_port)
        log.info("proxy listening", proxy=self.name, listen=self.listen, upstream=self.upstream)

    async def stop(self) -> None:
        """Stop listening and cut every connection (a full network cut, in-flight data lost)."""
        if self._server is None:
            return
        self._server.close()
        self._server = None
        tasks = list(self._connections.values())
        for conn in list(self._connections):
            conn.shutdown("abort")
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        log.info("proxy stopped", proxy=self.name, cut_connections=len(tasks))

    def add_toxic(self, spec: ToxicSpec) -> None:
        if spec.name in self.toxics:
            raise ProxyError(f"toxic already exists: {spec.name!r} on proxy {self.name!r}", 409)
        self.toxics[spec.name] = spec
        for conn in self._connections:
            conn.add_toxic(spec)

    def get_toxic(self, name: str) -> ToxicSpec:
        try:
            return self.toxics[name]
        except KeyError:
            raise ProxyError(f"toxic not found: {name!r} on proxy {self.name!r}", 404) from None

    def update_toxic(self, name: str, body: Any) -> ToxicSpec:
        spec = self.get_toxic(name)
        spec.update_from_json(body)
        for conn in self._connections:
            toxic = conn.toxic(spec)
            if toxic is not None:
                toxic.update()
        return spec

    def remove_toxic(self, name: str) -> None:
        spec = self.get_toxic(name)
        del self.toxics[name]
        for conn in self._connections:
            conn.remove_toxic(spec)

    def remove_all_toxics(self) -> None:
        for name in list(self.toxics):
            self.remove_toxic(name)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._connections[conn] = task
        try:
            await conn.run()
        finally:
            del self._connections[conn]
