"""The toxic types, each a small class, with Toxiproxy 2.x semantics.

A :class:`ToxicSpec` is what the API creates and shows (``name``, ``type``, ``stream``,
``toxicity``, ``attributes``); it is shared by every connection of its proxy. Each
connection's link in the toxic's direction gets its own :class:`Toxic` instance (the
per-connection state: the toxicity roll, bytes sent so far, timers). Behaviour reads
``spec.attributes`` on every chunk, so an attribute update reaches open connections at
once.

Semantics follow Toxiproxy's Go code, because the chaos scenarios are written against
Toxiproxy's documentation:

* toxicity is rolled per connection (when the toxic meets the connection, and again when
  the toxic is updated), not per chunk;
* ``latency`` delays each chunk to ``arrival + latency +/- jitter`` ms, so a stream keeps
  its throughput; end of stream is not delayed;
* ``bandwidth`` paces chunks to ``rate`` KB/s (1 KB = 1000 bytes), in slices of at most
  100 ms of data; ``rate`` 0 holds the data until the toxic is updated or removed;
* ``slicer`` splits chunks into ``average_size +/- size_variation`` byte pieces with
  ``delay`` microseconds after each piece;
* ``limit_data`` passes ``bytes`` bytes in its direction, then closes the connection;
* ``timeout`` drops all data; after ``timeout`` ms (never if 0) it closes the connection;
  removing it closes the connections it affected (their byte stream has a hole);
* ``reset_peer`` drops data from the first chunk (or end of stream) on and ``timeout`` ms
  later resets both sockets (SO_LINGER 0, so the peers see RST); once triggered, removing
  the toxic does not stop the reset (as in Go);
* ``slow_close`` delays the end of stream by ``delay`` ms.

Where Go misbehaves this deliberately differs: removing a ``timeout`` toxic closes only
the connections that rolled it active (Go closes all); ``slicer`` rejects
``average_size`` < 1 or ``size_variation`` outside ``[0, average_size)`` with 400 (Go
recurses forever or panics); ``bandwidth`` rejects a negative rate.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, ClassVar, Coroutine, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

STREAMS = ("upstream", "downstream")


class ToxicError(ValueError):
    """A toxic definition the API must refuse; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class LinkControl(Protocol):
    """What a toxic may do to the connection it sits on (implemented in ``proxy.py``)."""

    def shutdown(self, mode: str) -> None:
        """Close the whole connection: ``close`` (flush, FIN), ``abort`` or ``reset`` (RST)."""


@dataclass(frozen=True)
class Chunk:
    """Bytes read from one side, with the loop time they arrived (latency is relative to it)."""

    data: bytes
    arrived: float


@dataclass
class ToxicSpec:
    """A toxic as the API sees it; one per proxy, shared by all of its connections."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, body: Any) -> ToxicSpec:
        """Validate a ``POST /proxies/{proxy}/toxics`` body, with Toxiproxy's defaults."""
        if not isinstance(body, dict):
            raise ToxicError("bad request body: expected a JSON object for the toxic")
        toxic_type = body.get("type")
        if toxic_type not in TOXIC_TYPES:
            raise ToxicError(
                f"invalid toxic type: {toxic_type!r}; use one of {', '.join(sorted(TOXIC_TYPES))}"
            )
        stream = str(body.get("stream") or "downstream").lower()
        if stream not in STREAMS:
            raise ToxicError("stream was invalid, can be either upstream or downstream")
        name = body.get("name") or f"{toxic_type}_{stream}"
        if not isinstance(name, str):
            raise ToxicError("bad request body: toxic name must be a string")
        toxic_cls = TOXIC_TYPES[toxic_type]
        attributes = dict(toxic_cls.defaults)
        attributes.update(_parse_attributes(toxic_cls, body.get("attributes")))
        toxic_cls.validate(attributes)
        return cls(
            name=name,
            type=toxic_type,
            stream=stream,
            toxicity=_parse_toxicity(body.get("toxicity", 1.0)),
            attributes=attributes,
        )

    def update_from_json(self, body: Any) -> None:
        """Apply a ``POST .../toxics/{toxic}`` body: attributes merge, toxicity replaces."""
        if not isinstance(body, dict):
            raise ToxicError("bad request body: expected a JSON object for the toxic")
        toxic_cls = TOXIC_TYPES[self.type]
        attributes = dict(self.attributes)
        attributes.update(_parse_attributes(toxic_cls, body.get("attributes")))
        toxic_cls.validate(attributes)
        toxicity = _parse_toxicity(body.get("toxicity", self.toxicity))
        self.attributes, self.toxicity = attributes, toxicity

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }


def _parse_toxicity(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ToxicError(f"bad request body: toxicity must be a number in [0, 1], got {value!r}")
    return float(value)


def _parse_attributes(toxic_cls: type[Toxic], raw: Any) -> dict[str, int]:
    """Known integer attributes only, as Go's JSON decoding into an int64 struct allows."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ToxicError("bad request body: attributes must be a JSON object")
    parsed: dict[str, int] = {}
    for key, value in raw.items():
        if key not in toxic_cls.defaults:
            continue  # Go ignores unknown fields; so do we
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ToxicError(
                f"bad request body: attribute {key!r} of {toxic_cls.type_name} must be an integer,"
                f" got {value!r}"
            )
        parsed[key] = int(value)
    return parsed


class Toxic:
    """One toxic on one connection's link; subclasses override the hooks they need.

    ``active`` is this connection's toxicity roll; inactive toxics are skipped by the link.
    ``removed`` is set when the toxic leaves the proxy, and cuts every wait short, so a
    toxic removed mid-delay lets its data through at once (Go's "interrupt").
    """

    type_name: ClassVar[str]
    defaults: ClassVar[Mapping[str, int]]

    def __init__(self, spec: ToxicSpec, conn: LinkControl) -> None:
        self.spec = spec
        self.conn = conn
        self.removed = asyncio.Event()
        self.active = False
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def validate(cls, attributes: Mapping[str, int]) -> None:
        """Refuse attributes that cannot work (raise :class:`ToxicError`)."""

    def attr(self, key: str) -> int:
        return self.spec.attributes[key]

    def attach(self) -> None:
        """The toxic meets this connection: roll its toxicity."""
        self.active = random.random() < self.spec.toxicity

    def update(self) -> None:
        """The spec changed: roll again, as Go restarts the toxic."""
        self.attach()

    def detach(self) -> None:
        """The toxic leaves the proxy: release anything still waiting on it."""
        self.removed.set()

    def close(self) -> None:
        """The connection is gone: stop this toxic's timers."""
        self.removed.set()
        for task in self._tasks:
            task.cancel()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a timer for this toxic; it is cancelled with the connection."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def pause(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less if the toxic is removed meanwhile; True if removed."""
        if self.removed.is_set():
            return True
        if seconds <= 0:
            return False
        try:
            await asyncio.wait_for(self.removed.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        """Turn one chunk into zero or more chunks for the next toxic; default: pass."""
        yield chunk

    async def on_eof(self) -> bool:
        """The source ended; return False to swallow the end of stream."""
        return True


class Latency(Toxic):
    type_name = "latency"
    defaults = {"latency": 0, "jitter": 0}

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        delay_ms = self.attr("latency")
        jitter = self.attr("jitter")
        if jitter > 0:
            delay_ms += random.randrange(-jitter, jitter)
        loop = asyncio.get_running_loop()
        await self.pause(chunk.arrived + delay_ms / 1000 - loop.time())
        yield Chunk(chunk.data, loop.time())


class Bandwidth(Toxic):
    type_name = "bandwidth"
    defaults = {"rate": 0}

    def __init__(self, spec: ToxicSpec, conn: LinkControl) -> None:
        super().__init__(spec, conn)
        self._free_at = 0.0  # loop time when the paced link has sent everything so far

    @classmethod
    def validate(cls, attributes: Mapping[str, int]) -> None:
        if attributes["rate"] < 0:
            raise ToxicError("bandwidth rate must be >= 0 KB/s (0 holds all data)")

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        loop = asyncio.get_running_loop()
        data = chunk.data
        while data:
            rate = self.attr("rate")
            if rate == 0:
                if await self.pause(0.1):
                    break
                continue
            piece, data = data[: rate * 100], data[rate * 100 :]
            send_at = max(loop.time(), self._free_at) + len(piece) / (rate * 1000)
            self._free_at = send_at
            if await self.pause(send_at - loop.time()):
                data = piece + data
                break
            yield Chunk(piece, loop.time())
        if data:  # removed mid-way: let the rest through unpaced
            yield Chunk(data, loop.time())


class Slicer(Toxic):
    type_name = "slicer"
    defaults = {"average_size": 0, "size_variation": 0, "delay": 0}

    @classmethod
    def validate(cls, attributes: Mapping[str, int]) -> None:
        if attributes["average_size"] < 1:
            raise ToxicError("slicer average_size must be >= 1 byte")
        if not 0 <= attributes["size_variation"] < attributes["average_size"]:
            raise ToxicError("slicer size_variation must be >= 0 and below average_size")

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        data = memoryview(chunk.data)
        while data:
            size = self.attr("average_size")
            variation = self.attr("size_variation")
            if variation:
                size += random.randint(-variation, variation)
            piece, data = data[:size], data[size:]
            yield Chunk(bytes(piece), chunk.arrived)
            if await self.pause(self.attr("delay") / 1_000_000):
                if data:
                    yield Chunk(bytes(data), chunk.arrived)
                return


class LimitData(Toxic):
    type_name = "limit_data"
    defaults = {"bytes": 0}

    def __init__(self, spec: ToxicSpec, conn: LinkControl) -> None:
        super().__init__(spec, conn)
        self._sent = 0

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        remaining = max(self.attr("bytes") - self._sent, 0)
        piece = chunk.data[:remaining]
        if piece:
            yield Chunk(piece, chunk.arrived)
            self._sent += len(piece)
        if self._sent >= self.attr("bytes"):
            self.conn.shutdown("close")


class Timeout(Toxic):
    type_name = "timeout"
    defaults = {"timeout": 0}

    def __init__(self, spec: ToxicSpec, conn: LinkControl) -> None:
        super().__init__(spec, conn)
        self._timer: asyncio.Task[None] | None = None

    def attach(self) -> None:
        super().attach()
        self._restart_timer()

    def update(self) -> None:
        super().update()
        self._restart_timer()

    def detach(self) -> None:
        super().detach()
        if self._timer is not None:
            self._timer.cancel()
        if self.active:
            self.conn.shutdown("close")

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.active and self.attr("timeout") > 0:
            self._timer = self.spawn(self._expire())

    async def _expire(self) -> None:
        if not await self.pause(self.attr("timeout") / 1000):
            self.conn.shutdown("close")

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        return  # data is dropped on the floor
        yield chunk  # pragma: no cover - makes this an async generator


class ResetPeer(Toxic):
    type_name = "reset_peer"
    defaults = {"timeout": 0}

    def __init__(self, spec: ToxicSpec, conn: LinkControl) -> None:
        super().__init__(spec, conn)
        self._reset: asyncio.Task[None] | None = None

    def _trigger(self) -> None:
        if self._reset is None:
            self._reset = self.spawn(self._fire())

    async def _fire(self) -> None:
        await asyncio.sleep(self.attr("timeout") / 1000)
        self.conn.shutdown("reset")

    async def process(self, chunk: Chunk) -> AsyncIterator[Chunk]:
        self._trigger()
        return
        yield chunk  # pragma: no cover - makes this an async generator

    async def on_eof(self) -> bool:
        self._trigger()
        return False


class SlowClose(Toxic):
    type_name = "slow_close"
    defaults = {"delay": 0}

    async def on_eof(self) -> bool:
        await self.pause(self.attr("delay") / 1000)
        return True


TOXIC_TYPES: dict[str, type[Toxic]] = {
    cls.type_name: cls for cls in (Latency, Bandwidth, Slicer, LimitData, Timeout, ResetPeer, SlowClose)
}
