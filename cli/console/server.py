"""The console's HTTP shell (aiohttp): the page and its assets, a JSON API over ``Gateway``,
server-sent events for the live views, sessions and CSRF checks.

Every blocking client call runs in a worker thread (``asyncio.to_thread``), so one slow
broker never stalls the page of another user. Live views are pushed once a second while the
page watches them; the page closes its stream while the tab is hidden (docs/console.md).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import ssl
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import structlog
from aiohttp import web

from cli.console import chaos_reports
from cli.console.lag_history import LagHistory
from cli.console.metrics_rates import Rates, totals
from cli.console.sessions import COOKIE, CSRF_HEADER, Session, SessionStore
from data_plane.client.errors import KraftlogError
from metadata_quorum.controller_router import ControllerError
from metadata_quorum.topic_config import InvalidConfigError
from server_common.client_security import ClientSecurity

log = structlog.get_logger("console")
STATIC = Path(__file__).parent / "static"
PUSH_INTERVAL_S = 1.0
SCRAPE_INTERVAL_S = 2.0
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
USER_ERRORS = (KraftlogError, ControllerError, InvalidConfigError, ValueError, KeyError)


def _content_security_policy() -> str:
    """Only our own files run; the page's one inline script, its import map, is allowed by
    its hash (computed here, so editing index.html cannot silently break the page)."""
    page = (STATIC / "index.html").read_text()
    found = re.search(r'<script type="importmap">(.*?)</script>', page, re.S)
    digest = base64.b64encode(hashlib.sha256(found.group(1).encode()).digest()).decode() if found else ""
    return (f"default-src 'self'; script-src 'self' 'sha256-{digest}'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; frame-ancestors 'none'")


CSP = _content_security_policy()


@dataclass
class ConsoleConfig:
    bootstrap: str
    security: ClientSecurity
    login_required: bool
    metrics_urls: list[str] = field(default_factory=list)
    chaos_dir: Path | None = None


class MetricsWatcher:
    """Scrapes every node's /metrics while some page watches a live view, keeping the rates."""

    def __init__(self, urls: list[str], security: ClientSecurity) -> None:
        self.urls = urls
        self.rates = Rates()
        self.watchers = 0
        self._context = None
        if security.tls:
            self._context = ssl.create_default_context(cafile=str(security.ca_file) if security.ca_file else None)
            if security.cert_file:
                self._context.load_cert_chain(str(security.cert_file), str(security.key_file) if security.key_file else None)

    def _scrape(self) -> list[str]:
        texts = []
        for url in self.urls:
            try:
                with urllib.request.urlopen(url, timeout=1.5, context=self._context if url.startswith("https") else None) as answer:
                    texts.append(answer.read().decode())
            except OSError:
                continue  # a node that is down: its counters are missing from this point
        return texts

    async def run(self) -> None:
        while True:
            if self.watchers and self.urls:
                texts = await asyncio.to_thread(self._scrape)
                self.rates.add(time.time(), totals(texts))
            await asyncio.sleep(SCRAPE_INTERVAL_S)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, separators=(",", ":")))


def _error(message: str, status: int) -> web.Response:
    return _json({"error": message}, status)


def _session(request: web.Request) -> Session | None:
    return request.app["sessions"].get(request.cookies.get(COOKIE))


def _set_cookie(request: web.Request, response: web.StreamResponse, session: Session) -> None:
    response.set_cookie(COOKIE, session.sid, httponly=True, samesite="Strict", secure=request.secure, path="/")


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Sessions, sign-in and CSRF for /api; user errors as JSON with status 400."""
    if not request.path.startswith(("/api/", "/chaos/")):
        response = await handler(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response
    session = _session(request)
    if request.method not in SAFE_METHODS:
        if session is None or not session.csrf_ok(request.headers.get(CSRF_HEADER)):
            log.warning("console change refused: missing or wrong CSRF token", path=request.path, method=request.method)
            return _error(f"refused: this change has no valid {CSRF_HEADER} header; reload the page and try again", 403)
    if request.path not in ("/api/session", "/api/login") and (session is None or session.principal is None):
        return _error("sign in first", 401)
    request["session"] = session
    try:
        response = await handler(request)
    except USER_ERRORS as exc:
        response = _error(str(exc), 400)
    if request.method not in SAFE_METHODS and request.path != "/api/login":  # every change, done or refused, a line
        log.info("console change", method=request.method, path=request.path, principal=session.principal if session else None,
                 status=response.status)
    return response


async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def session_info(request: web.Request) -> web.Response:
    session = request.get("session") or _session(request)
    store: SessionStore = request.app["sessions"]
    fresh = session is None
    if fresh:
        session = store.new()
    response = _json({"principal": session.principal, "csrf": session.csrf, "login_required": store.login_required})
    if fresh:
        _set_cookie(request, response, session)
    return response


async def login(request: web.Request) -> web.Response:
    body = await request.json()
    session: Session = request["session"]
    store: SessionStore = request.app["sessions"]
    try:
        await asyncio.to_thread(store.sign_in, session, str(body.get("username", "")), str(body.get("password", "")))
    except KraftlogError as exc:
        log.info("console sign-in refused", user=body.get("username"), code=exc.code)
        return _error(f"sign-in refused: {exc.code}: check the user name and password", 401)
    log.info("console sign-in", principal=session.principal)
    response = _json({"principal": session.principal, "csrf": session.csrf, "login_required": store.login_required})
    _set_cookie(request, response, session)
    return response


async def logout(request: web.Request) -> web.Response:
    request.app["sessions"].sign_out(request["session"])
    response = _json({"signed_out": True})
    response.del_cookie(COOKIE, path="/")
    return response


def _call(method: str, *args: Any) -> Callable[[web.Request], Awaitable[Any]]:
    """A handler part: the session's gateway method, in a worker thread."""
    async def run(request: web.Request) -> Any:
        return await asyncio.to_thread(getattr(request["session"].gateway, method), *args)
    return run


async def overview(request: web.Request) -> web.Response:
    return _json(await overview_view(request))


async def overview_view(request: web.Request) -> dict:
    data = await asyncio.to_thread(request["session"].gateway.overview)
    data["rates"] = list(request.app["metrics"].rates.history)
    data["metrics"] = bool(request.app["config"].metrics_urls)
    return data


async def topics_view(request: web.Request) -> list:
    return await asyncio.to_thread(request["session"].gateway.topics, request.app["metrics"].rates.topic_rates)


async def topic_view(request: web.Request) -> dict:
    return await asyncio.to_thread(request["session"].gateway.topic, request.match_info["name"])


async def group_view(request: web.Request) -> dict:
    """The group page, with its lag over the last minutes as every viewer saw it (lag_history.py)."""
    data = await asyncio.to_thread(request["session"].gateway.group, request.match_info["name"])
    data["lag_history"] = request.app["lag_history"].add(data["group_id"], time.time(), data["total_lag"])
    return data


async def list_view(request: web.Request, method: str) -> Any:
    return await asyncio.to_thread(getattr(request["session"].gateway, method))


VIEWS: dict[str, Callable[[web.Request], Awaitable[Any]]] = {
    "overview": overview_view,
    "topics": topics_view,
    "topic": topic_view,
    "group": group_view,
    "groups": lambda r: list_view(r, "groups"),
    "transactions": lambda r: list_view(r, "transactions"),
}


async def view(request: web.Request) -> web.Response:
    return _json(await VIEWS[request.match_info["view"]](request))


async def stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the view's JSON once a second until the page closes the stream."""
    produce = VIEWS.get(request.match_info["view"])
    if produce is None:
        return _error(f"no live view {request.match_info['view']!r}", 404)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    metrics: MetricsWatcher = request.app["metrics"]
    metrics.watchers += 1
    try:
        # A page that went away (a closed tab or browser context) is seen here, before the next
        # gateway call: without this check a dead stream kept calling the gateway in a worker
        # thread every second, and those threads are the default pool that also serves the page's
        # static files, so a new page could stay at "loading…".
        while request.transport is not None and not request.transport.is_closing():
            try:
                payload = {"data": await produce(request)}
            except USER_ERRORS as exc:
                payload = {"error": str(exc)}
            await response.write(f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode())
            await asyncio.sleep(PUSH_INTERVAL_S)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        metrics.watchers -= 1
    return response


async def records(request: web.Request) -> web.Response:
    q = request.query
    partition = int(q["partition"]) if q.get("partition", "") not in ("", "all") else None
    value = int(q["value"]) if q.get("value") else None
    started = time.monotonic()
    answer = await asyncio.to_thread(
        request["session"].gateway.browse, request.match_info["name"], partition, q.get("start", "beginning"), value,
        int(q.get("limit", "500")), q.get("read_committed") == "true", q.get("key", ""), q.get("contains", ""), q.get("header", ""))
    answer["took_ms"] = round(1000 * (time.monotonic() - started), 1)
    return _json(answer)


async def _body(request: web.Request) -> dict:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise ValueError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    return body


async def create_topic(request: web.Request) -> web.Response:
    b = await _body(request)
    gateway = request["session"].gateway
    await asyncio.to_thread(gateway.create_topic, str(b["name"]), int(b.get("partitions", 1)), int(b.get("replication_factor", 1)),
                            {str(k): str(v) for k, v in (b.get("configs") or {}).items()})
    return _json({"created": b["name"]})


async def delete_topic(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await asyncio.to_thread(request["session"].gateway.delete_topic, name)
    return _json({"deleted": name})


async def add_partitions(request: web.Request) -> web.Response:
    b = await _body(request)
    await asyncio.to_thread(request["session"].gateway.add_partitions, request.match_info["name"], int(b["total"]))
    return _json({"partitions": int(b["total"])})


async def alter_config(request: web.Request) -> web.Response:
    b = await _body(request)
    await asyncio.to_thread(request["session"].gateway.alter_config, request.match_info["name"], str(b["key"]), b.get("value") or None)
    return _json({"altered": b["key"]})


async def reset_offsets(request: web.Request) -> web.Response:
    b = await _body(request)
    value = int(b["value"]) if b.get("value") not in (None, "") else None
    plan = await asyncio.to_thread(request["session"].gateway.reset_offsets, request.match_info["name"], str(b["topic"]),
                                   str(b["kind"]), value, bool(b.get("execute")))
    return _json({"executed": bool(b.get("execute")), "plan": plan})


async def delete_group(request: web.Request) -> web.Response:
    await asyncio.to_thread(request["session"].gateway.delete_group, request.match_info["name"])
    return _json({"deleted": request.match_info["name"]})


async def abort_transaction(request: web.Request) -> web.Response:
    await asyncio.to_thread(request["session"].gateway.abort_transaction, request.match_info["name"])
    return _json({"aborted": request.match_info["name"]})


async def security(request: web.Request) -> web.Response:
    return _json(await asyncio.to_thread(request["session"].gateway.security_state))


async def upsert_user(request: web.Request) -> web.Response:
    b = await _body(request)
    await asyncio.to_thread(request["session"].gateway.upsert_user, str(b["name"]), str(b["password"]))
    return _json({"user": b["name"]})  # never the password


async def delete_user(request: web.Request) -> web.Response:
    await asyncio.to_thread(request["session"].gateway.delete_user, request.match_info["name"])
    return _json({"deleted": request.match_info["name"]})


async def change_acl(request: web.Request) -> web.Response:
    b = await _body(request)
    await asyncio.to_thread(request["session"].gateway.change_acl, b["acl"], request.match_info["action"] == "create")
    return _json({"done": request.match_info["action"]})


async def change_quota(request: web.Request) -> web.Response:
    """Set (``value``) or remove (``value`` null) one quota of a user and/or client id."""
    b = await _body(request)
    value = None if b.get("value") in (None, "") else float(b["value"])
    await asyncio.to_thread(request["session"].gateway.change_quota, b.get("user"), b.get("client_id"), str(b["key"]), value)
    return _json({"done": "set" if value is not None else "removed"})


async def chaos_runs(request: web.Request) -> web.Response:
    return _json({"directory": str(request.app["config"].chaos_dir or ""), "runs": chaos_reports.list_runs(request.app["config"].chaos_dir)})


async def chaos_timeline(request: web.Request) -> web.StreamResponse:
    path = chaos_reports.timeline_path(request.app["config"].chaos_dir, request.match_info["name"])
    if path is None:
        return _error("no such chaos run", 404)
    # The report is our own HTML with inline scripts: served sandboxed, in its own origin.
    return web.FileResponse(path, headers={"Content-Security-Policy": "sandbox allow-scripts"})


def build_app(config: ConsoleConfig) -> web.Application:
    app = web.Application(middlewares=[guard])
    app["config"] = config
    app["sessions"] = SessionStore(config.bootstrap, config.security, config.login_required)
    app["lag_history"] = LagHistory()
    app["metrics"] = MetricsWatcher(config.metrics_urls, config.security)

    async def background(app: web.Application):
        task = asyncio.create_task(app["metrics"].run())
        yield
        task.cancel()
        await asyncio.to_thread(app["sessions"].close)

    app.cleanup_ctx.append(background)
    r = app.router
    r.add_get("/", index)
    r.add_static("/static/", STATIC, append_version=False)
    r.add_get("/api/session", session_info)
    r.add_post("/api/login", login)
    r.add_post("/api/logout", logout)
    r.add_get("/api/overview", overview)
    r.add_get("/api/stream/{view}", stream)
    r.add_get("/api/view/{view}", view)
    r.add_get("/api/view/{view}/{name}", view)
    r.add_get("/api/stream/{view}/{name}", stream)
    r.add_post("/api/topics", create_topic)
    r.add_delete("/api/topics/{name}", delete_topic)
    r.add_post("/api/topics/{name}/partitions", add_partitions)
    r.add_post("/api/topics/{name}/configs", alter_config)
    r.add_get("/api/topics/{name}/records", records)
    r.add_post("/api/groups/{name}/reset", reset_offsets)
    r.add_delete("/api/groups/{name}", delete_group)
    r.add_post("/api/transactions/{name}/abort", abort_transaction)
    r.add_get("/api/security", security)
    r.add_post("/api/users", upsert_user)
    r.add_delete("/api/users/{name}", delete_user)
    r.add_post("/api/acls/{action:create|delete}", change_acl)
    r.add_post("/api/quotas", change_quota)
    r.add_get("/api/chaos", chaos_runs)
    r.add_get("/chaos/{name}/report.html", chaos_timeline)
    return app
