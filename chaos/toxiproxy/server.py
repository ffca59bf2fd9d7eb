"""The Toxiproxy 2.x HTTP API on asyncio, with a hand-written minimal HTTP/1.1 server.

Everything (API handlers, listeners, connection pipelines) runs on one event loop, so
the proxy state needs no locks. The HTTP layer handles exactly what API clients send:
one request per read, ``Content-Length`` bodies, keep-alive. Routes, status codes and
JSON shapes follow Toxiproxy's ``api.go``:

=======  ==============================  ===========================================
GET      /version                        200 text/plain version string
POST     /reset                          204; enable all proxies, remove all toxics
GET      /proxies                        200 ``{name: proxy}``
POST     /proxies                        201 proxy; 409 exists; 400 missing field
POST     /populate                       201 ``{"proxies": [...]}``; create or replace
GET      /proxies/{p}                    200 proxy; 404
POST     /proxies/{p}                    200 proxy; update enabled/listen/upstream
DELETE   /proxies/{p}                    204; 404
GET      /proxies/{p}/toxics             200 ``[toxic]``
POST     /proxies/{p}/toxics             200 toxic; 409 duplicate name; 400 invalid
GET      /proxies/{p}/toxics/{t}         200 toxic; 404
POST     /proxies/{p}/toxics/{t}         200 toxic; merge attributes, set toxicity
DELETE   /proxies/{p}/toxics/{t}         204; 404
=======  ==============================  ===========================================

Errors are ``{"error": "...", "status": N}``. A proxy is ``{name, listen, upstream,
enabled, toxics}``; ``listen`` with port 0 comes back with the port actually bound.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog

from chaos.toxiproxy.proxy import Proxy, ProxyError, split_host_port
from chaos.toxiproxy.toxics import ToxicError, ToxicSpec

log = structlog.get_logger("chaos.toxiproxy")

VERSION = "2.0.0-kraftlog"
MAX_BODY = 1024 * 1024
REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden",
           404: "Not Found",
           405: "Method Not Allowed", 409: "Conflict", 411: "Length Required",
           413: "Payload Too Large", 500: "Internal Server Error"}


@dataclass
class Response:
    status: int
    body: Any = None  # JSON-able; a str is sent as text/plain; None means no body

    def encode(self, keep_alive: bool) -> bytes:
        if self.body is None:
            payload, ctype = b"", None
        elif isinstance(self.body, str):
            payload, ctype = self.body.encode(), "text/plain; charset=utf-8"
        else:
            payload, ctype = json.dumps(self.body).encode(), "application/json"
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}",
                 f"Content-Length: {len(payload)}",
                 f"Connection: {'keep-alive' if keep_alive else 'close'}"]
        if ctype:
            lines.append(f"Content-Type: {ctype}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def error(message: str, status: int) -> Response:
    return Response(status, {"error": message, "status": status})


class ToxiproxyServer:
    """The proxy collection and the HTTP API in front of it."""

    def __init__(self) -> None:
        self.proxies: dict[str, Proxy] = {}
        self._http: asyncio.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 8474) -> int:
        """Serve the API; returns the bound port (useful with port 0)."""
        self._http = await asyncio.start_server(self._serve_http, host, port)
        return self._http.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop the API and every proxy."""
        if self._http is not None:
            self._http.close()
        for proxy in self.proxies.values():
            await proxy.stop()

    # ---- HTTP ---------------------------------------------------------------------------

    async def _serve_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line.strip():
                    return
                headers: dict[str, str] = {}
                while (line := await reader.readline()).strip():
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                parts = request_line.decode("latin-1").split()
                keep_alive = (
                    len(parts) == 3
                    and parts[2] == "HTTP/1.1"
                    and headers.get("connection", "").lower() != "close"
                )
                response = await self._read_and_dispatch(reader, parts, headers)
                if response.status in (400, 403, 411, 413):
                    keep_alive = False  # the body may be unread: the framing is lost
                writer.write(response.encode(keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):  # ValueError: line too long
            return
        finally:
            writer.close()

    async def _read_and_dispatch(
        self, reader: asyncio.StreamReader, parts: list[str], headers: dict[str, str]
    ) -> Response:
        if len(parts) != 3:
            return error("bad request line; expected 'METHOD /path HTTP/1.1'", 400)
        if headers.get("user-agent", "").startswith("Mozilla/"):
            # as Toxiproxy: the API has no auth, so web pages must not be able to drive it
            return error("user agent not allowed: browsers may not call the Toxiproxy API", 403)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return error("chunked request bodies are not supported; send Content-Length", 411)
        length_field = headers.get("content-length", "0") or "0"
        if not length_field.isdigit():
            return error(f"bad Content-Length {length_field!r}", 400)
        length = int(length_field)
        if length > MAX_BODY:
            return error(f"request body over {MAX_BODY} bytes; send smaller requests", 413)
        raw = await reader.readexactly(length) if length else b""
        method, target = parts[0].upper(), parts[1]
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            return error(f"bad request body: {exc}", 400)
        path = [unquote(p) for p in urlsplit(target).path.split("/") if p]
        try:
            response = await self._route(method, path, body)
        except (ProxyError, ToxicError) as exc:
            response = error(str(exc), exc.status)
        except Exception as exc:  # an API bug must answer 500, not drop the client
            log.exception("API handler failed", method=method, target=target)
            response = error(f"internal error: {exc!r}", 500)
        log.debug("api", method=method, target=target, status=response.status)
        return response

    # ---- routes -------------------------------------------------------------------------

    async def _route(self, method: str, path: list[str], body: Any) -> Response:
        match path:
            case ["version"]:
                handlers = {"GET": lambda: Response(200, VERSION)}
            case ["reset"]:
                handlers = {"POST": self._reset}
            case ["populate"]:
                handlers = {"POST": lambda: self._populate(body)}
            case ["proxies"]:
                handlers = {
                    "GET": lambda: Response(200, {n: p.to_json() for n, p in self.proxies.items()}),
                    "POST": lambda: self._create_proxy(body),
                }
            case ["proxies", name]:
                handlers = {
                    "GET": lambda: Response(200, self._proxy(name).to_json()),
                    "POST": lambda: self._update_proxy(name, body),
                    "PATCH": lambda: self._update_proxy(name, body),
                    "DELETE": lambda: self._delete_proxy(name),
                }
            case ["proxies", name, "toxics"]:
                handlers = {
                    "GET": lambda: Response(200, [t.to_json() for t in self._proxy(name).toxics.values()]),
                    "POST": lambda: self._create_toxic(name, body),
                }
            case ["proxies", name, "toxics", toxic]:
                handlers = {
                    "GET": lambda: Response(200, self._proxy(name).get_toxic(toxic).to_json()),
                    "POST": lambda: Response(200, self._proxy(name).update_toxic(toxic, body).to_json()),
                    "PATCH": lambda: Response(200, self._proxy(name).update_toxic(toxic, body).to_json()),
                    "DELETE": lambda: self._delete_toxic(name, toxic),
                }
            case _:
                return error(f"no such endpoint: /{'/'.join(path)}", 404)
        handler = handlers.get(method)
        if handler is None:
            return error(f"method {method} not allowed here; use {', '.join(handlers)}", 405)
        result = handler()
        return await result if asyncio.iscoroutine(result) else result

    def _proxy(self, name: str) -> Proxy:
        try:
            return self.proxies[name]
        except KeyError:
            raise ProxyError(f"proxy not found: {name!r}; list them with GET /proxies", 404) from None

    async def _reset(self) -> Response:
        for proxy in self.proxies.values():
            await proxy.start()
            proxy.remove_all_toxics()
        return Response(204)

    async def _create_proxy(self, body: Any) -> Response:
        fields = _proxy_fields(body, "")
        if fields["name"] in self.proxies:
            raise ProxyError(f"proxy already exists: {fields['name']!r}", 409)
        proxy = await self._new_proxy(fields)
        return Response(201, proxy.to_json())

    async def _new_proxy(self, fields: dict[str, Any]) -> Proxy:
        proxy = Proxy(fields["name"], fields["listen"], fields["upstream"])
        if fields["enabled"]:
            await proxy.start()
        self.proxies[proxy.name] = proxy
        return proxy

    async def _populate(self, body: Any) -> Response:
        if not isinstance(body, list):
            raise ProxyError("bad request body: populate takes a JSON list of proxies", 400)
        wanted = [_proxy_fields(item, f" at proxy {i + 1}") for i, item in enumerate(body)]
        done: list[Proxy] = []
        for fields in wanted:
            existing = self.proxies.get(fields["name"])
            if existing and (existing.listen, existing.upstream) == (fields["listen"], fields["upstream"]):
                done.append(existing)
                continue
            if existing:
                await existing.stop()
                del self.proxies[existing.name]
            try:
                done.append(await self._new_proxy(fields))
            except ProxyError as exc:
                return Response(exc.status, {"error": str(exc), "status": exc.status,
                                             "proxies": [p.to_json() for p in done]})
        return Response(201, {"proxies": [p.to_json() for p in done]})

    async def _update_proxy(self, name: str, body: Any) -> Response:
        proxy = self._proxy(name)
        if not isinstance(body, dict):
            raise ProxyError("bad request body: expected a JSON object", 400)
        listen = body.get("listen", proxy.listen)
        upstream = body.get("upstream", proxy.upstream)
        enabled = body.get("enabled", proxy.enabled)
        if not isinstance(enabled, bool):
            raise ProxyError("bad request body: enabled must be true or false", 400)
        split_host_port(listen)
        split_host_port(upstream)
        if (listen, upstream) != (proxy.listen, proxy.upstream):
            await proxy.stop()  # a moved proxy restarts, as in Toxiproxy
            proxy.listen, proxy.upstream = listen, upstream
        if enabled:
            await proxy.start()
        else:
            await proxy.stop()
        return Response(200, proxy.to_json())

    async def _delete_proxy(self, name: str) -> Response:
        proxy = self._proxy(name)
        await proxy.stop()
        del self.proxies[name]
        return Response(204)

    def _create_toxic(self, proxy_name: str, body: Any) -> Response:
        proxy = self._proxy(proxy_name)
        spec = ToxicSpec.from_json(body)
        proxy.add_toxic(spec)
        log.info("toxic added", proxy=proxy_name, **spec.to_json())
        return Response(200, spec.to_json())

    def _delete_toxic(self, proxy_name: str, toxic: str) -> Response:
        self._proxy(proxy_name).remove_toxic(toxic)
        log.info("toxic removed", proxy=proxy_name, toxic=toxic)
        return Response(204)


def _proxy_fields(body: Any, where: str) -> dict[str, Any]:
    """Validate a proxy definition as Toxiproxy does (name and upstream required)."""
    if not isinstance(body, dict):
        raise ProxyError(f"bad request body: expected a JSON object{where}", 400)
    for key in ("name", "upstream"):
        if not isinstance(body.get(key), str) or not body[key]:
            raise ProxyError(f"missing required field: {key}{where}", 400)
    listen = body.get("listen") or "127.0.0.1:0"
    enabled = body.get("enabled", True)
    if not isinstance(listen, str) or not isinstance(enabled, bool):
        raise ProxyError(f"bad request body: listen must be host:port, enabled a boolean{where}", 400)
    split_host_port(listen)
    split_host_port(body["upstream"])
    return {"name": body["name"], "listen": listen, "upstream": body["upstream"], "enabled": enabled}
