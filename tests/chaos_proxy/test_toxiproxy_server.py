"""The Toxiproxy-compatible server, driven only through ``toxiproxy-python`` (plus raw HTTP
where that client has no method), in front of local TCP servers; each toxic is measured.

The server runs as a subprocess (``python -m chaos.toxiproxy --port 0`` via the launcher),
exactly as the chaos harness starts it.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
import requests
import toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from chaos.toxiproxy import ToxiproxyHandle, start_toxiproxy
from server_common.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(60)]

FAST_RTT = 0.05  # a loopback round trip through the proxy, generously


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass


class _RecordingHandler(socketserver.BaseRequestHandler):
    """Keeps what each connection sent, to check upstream toxics at the server."""

    received: list[bytes] = []

    def handle(self) -> None:
        data = bytearray()
        try:
            while chunk := self.request.recv(65536):
                data += chunk
        except OSError:
            pass
        self.received.append(bytes(data))


class _ByeHandler(socketserver.BaseRequestHandler):
    """Says bye and closes at once: a server-initiated close for slow_close."""

    def handle(self) -> None:
        self.request.sendall(b"bye")


def _serve(handler: type[socketserver.BaseRequestHandler]) -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def echo_upstream() -> Iterator[str]:
    yield from _serve(_EchoHandler)


@pytest.fixture(scope="module")
def recording_upstream() -> Iterator[str]:
    yield from _serve(_RecordingHandler)


@pytest.fixture(scope="module")
def bye_upstream() -> Iterator[str]:
    yield from _serve(_ByeHandler)


@pytest.fixture(scope="module")
def server() -> Iterator[ToxiproxyHandle]:
    with start_toxiproxy(prefer_real=False) as handle:
        yield handle


@pytest.fixture
def tp(server: ToxiproxyHandle) -> Iterator[toxiproxy.Toxiproxy]:
    client = server.client()
    yield client
    client.reset()
    client.destroy_all()


@pytest.fixture
def echo(tp: toxiproxy.Toxiproxy, echo_upstream: str) -> toxiproxy.Proxy:
    return tp.create(upstream=echo_upstream, name="echo")


def connect(proxy: toxiproxy.Proxy, timeout: float = 5.0) -> socket.socket:
    host, port = proxy.listen.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def recv_until_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    start = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.monotonic() - start


# ---- API ----------------------------------------------------------------------------------


def test_api_shapes_and_errors(server: ToxiproxyHandle, tp: toxiproxy.Toxiproxy, echo_upstream: str) -> None:
    assert tp.running()
    assert tp.version() == b"2.0.0-kraftlog"
    proxy = tp.create(upstream=echo_upstream, name="api")
    assert proxy.listen.startswith("127.0.0.1:") and not proxy.listen.endswith(":0")
    shown = requests.get(f"{server.url}/proxies/api").json()
    assert shown == {"name": "api", "listen": proxy.listen, "upstream": echo_upstream,
                     "enabled": True, "toxics": []}

    with pytest.raises(ProxyExists):
        tp.create(upstream=echo_upstream, name="api")
    duplicate = requests.post(f"{server.url}/proxies", json={"name": "api", "upstream": echo_upstream})
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error": "proxy already exists: 'api'", "status": 409}
    missing = requests.post(f"{server.url}/proxies", json={"name": "x"})
    assert (missing.status_code, missing.json()["error"]) == (400, "missing required field: upstream")

    proxy.add_toxic(type="latency", attributes={"latency": 10})
    toxics = proxy.toxics()
    assert list(toxics) == ["latency_downstream"]
    assert (toxics["latency_downstream"].stream, toxics["latency_downstream"].toxicity) == ("downstream", 1.0)
    assert toxics["latency_downstream"].attributes == {"latency": 10, "jitter": 0}
    with pytest.raises(ProxyExists):
        proxy.add_toxic(type="latency", attributes={"latency": 20})
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="latency", stream="sideways")
    with pytest.raises(NotFound):
        proxy.destroy_toxic("nope")

    # toxiproxy-python cannot update a toxic; the API can (attributes merge)
    url = f"{server.url}/proxies/api/toxics/latency_downstream"
    updated = requests.post(url, json={"attributes": {"jitter": 5}, "toxicity": 0.5})
    assert updated.json() == {"name": "latency_downstream", "type": "latency", "stream": "downstream",
                              "toxicity": 0.5, "attributes": {"latency": 10, "jitter": 5}}
    assert requests.get(url).json() == updated.json()

    assert proxy.destroy()
    with pytest.raises(NotFound):
        proxy.destroy()
    assert tp.get_proxy("api") is None


def test_populate_creates_keeps_and_replaces(server: ToxiproxyHandle, tp: toxiproxy.Toxiproxy,
                                             echo_upstream: str, bye_upstream: str) -> None:
    body = [{"name": "a", "upstream": echo_upstream}, {"name": "b", "upstream": echo_upstream}]
    first = requests.post(f"{server.url}/populate", json=body)
    assert first.status_code == 201
    listens = {p["name"]: p["listen"] for p in first.json()["proxies"]}
    again = [{"name": "a", "upstream": echo_upstream, "listen": listens["a"]},
             {"name": "b", "upstream": bye_upstream, "listen": listens["b"]}]
    second = requests.post(f"{server.url}/populate", json=again).json()["proxies"]
    assert [(p["name"], p["upstream"]) for p in second] == [("a", echo_upstream), ("b", bye_upstream)]
    assert set(tp.proxies()) == {"a", "b"}


def test_listen_port_in_use_is_a_500_the_client_does_not_raise(
    server: ToxiproxyHandle, tp: toxiproxy.Toxiproxy, echo: toxiproxy.Proxy, echo_upstream: str
) -> None:
    clash = requests.post(f"{server.url}/proxies",
                          json={"name": "clash", "listen": echo.listen, "upstream": echo_upstream})
    assert clash.status_code == 500 and "cannot listen" in clash.json()["error"]
    with pytest.raises(KeyError):  # toxiproxy-python builds a Proxy from the error body
        tp.create(upstream=echo_upstream, name="clash", listen=echo.listen)


# ---- toxics -------------------------------------------------------------------------------


def test_latency_adds_to_round_trips_on_open_connections(echo: toxiproxy.Proxy) -> None:
    with connect(echo) as sock:
        assert round_trip(sock) < FAST_RTT
        echo.add_toxic(type="latency", attributes={"latency": 200})
        rtts = [round_trip(sock) for _ in range(3)]
        assert all(0.2 <= rtt < 0.2 + 0.15 for rtt in rtts), rtts
        echo.add_toxic(type="latency", stream="upstream", attributes={"latency": 100})
        assert 0.3 <= round_trip(sock) < 0.3 + 0.15
        echo.destroy_toxic("latency_downstream")
        echo.destroy_toxic("latency_upstream")
        assert round_trip(sock) < FAST_RTT


def test_latency_keeps_a_stream_pipelined(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="latency", attributes={"latency": 200})
    with connect(echo) as sock:
        start = time.monotonic()
        for _ in range(10):  # ten writes 10 ms apart, one delayed stream back
            sock.sendall(b"x" * 100)
            time.sleep(0.01)
        recv_exactly(sock, 1000)
        elapsed = time.monotonic() - start
    assert 0.2 + 0.09 <= elapsed < 0.2 + 0.1 + 0.15, elapsed  # not 10 x 200 ms


def test_toxicity_zero_leaves_connections_alone(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 300})
    with connect(echo) as sock:
        assert round_trip(sock) < FAST_RTT


def test_bandwidth_limits_throughput(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="bandwidth", attributes={"rate": 100})  # KB/s
    payload = b"b" * 150_000
    with connect(echo) as sock:
        start = time.monotonic()
        threading.Thread(target=sock.sendall, args=(payload,), daemon=True).start()
        assert recv_exactly(sock, len(payload)) == payload
        elapsed = time.monotonic() - start
    rate_kb_s = len(payload) / elapsed / 1000
    assert 70 <= rate_kb_s <= 115, f"{rate_kb_s:.1f} KB/s"


def test_reset_peer_resets_the_client(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="reset_peer", attributes={"timeout": 300})
    with connect(echo) as sock:
        start = time.monotonic()
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(100)  # the echo is dropped, then the RST arrives
        assert time.monotonic() - start >= 0.3


def test_limit_data_closes_after_n_bytes(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="limit_data", attributes={"bytes": 1000})
    with connect(echo) as sock:
        sock.sendall(b"d" * 3000)
        assert recv_until_eof(sock) == b"d" * 1000


def test_limit_data_upstream_counts_what_the_server_gets(
    tp: toxiproxy.Toxiproxy, recording_upstream: str
) -> None:
    recorder = tp.create(upstream=recording_upstream, name="recorder")
    recorder.add_toxic(type="limit_data", stream="upstream", attributes={"bytes": 10})
    _RecordingHandler.received.clear()
    with connect(recorder) as sock:
        sock.sendall(b"0123456789abcdef")
        assert recv_until_eof(sock) == b""  # the whole connection closes, as in Toxiproxy
    wait_for(lambda: _RecordingHandler.received, 5, "the server to see the close")
    assert _RecordingHandler.received == [b"0123456789"]


def test_timeout_stops_data_and_closes_when_removed(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="timeout", attributes={"timeout": 0})
    with connect(echo, timeout=0.5) as sock:
        sock.sendall(b"lost")
        with pytest.raises(TimeoutError):
            sock.recv(100)
        echo.destroy_toxic("timeout_downstream")
        sock.settimeout(5)
        assert recv_until_eof(sock) == b""  # the stream had a hole: Toxiproxy closes it
    with connect(echo) as sock:
        assert round_trip(sock) < FAST_RTT


def test_timeout_closes_after_the_timeout(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(echo) as sock:
        start = time.monotonic()
        sock.sendall(b"lost")
        assert recv_until_eof(sock) == b""
        assert 0.3 <= time.monotonic() - start < 0.3 + 0.2


def test_slicer_delivers_everything_in_pieces(echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="slicer", attributes={"average_size": 100, "size_variation": 40, "delay": 5000})
    payload = bytes(range(256)) * 8  # 2048 bytes: at least 14 pieces of <= 140 bytes
    with connect(echo) as sock:
        start = time.monotonic()
        sock.sendall(payload)
        pieces: list[bytes] = []
        while sum(map(len, pieces)) < len(payload):
            pieces.append(sock.recv(65536))
        elapsed = time.monotonic() - start
    assert b"".join(pieces) == payload
    assert len(pieces) >= 5, [len(p) for p in pieces]
    assert elapsed >= 13 * 0.005


def test_slow_close_delays_the_close(tp: toxiproxy.Toxiproxy, bye_upstream: str) -> None:
    bye = tp.create(upstream=bye_upstream, name="bye")
    with connect(bye) as sock:
        start = time.monotonic()
        assert recv_until_eof(sock) == b"bye"
        assert time.monotonic() - start < FAST_RTT
    bye.add_toxic(type="slow_close", attributes={"delay": 400})
    with connect(bye) as sock:
        start = time.monotonic()
        assert recv_until_eof(sock) == b"bye"
        assert 0.4 <= time.monotonic() - start < 0.4 + 0.2


# ---- proxy state ----------------------------------------------------------------------------


def test_disable_cuts_connections_and_refuses_new_ones(echo: toxiproxy.Proxy) -> None:
    host, port = echo.listen.rsplit(":", 1)
    with connect(echo) as open_conn:
        assert round_trip(open_conn) < FAST_RTT
        with echo.down():
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((host, int(port)), timeout=2)
            assert open_conn.recv(100) == b""  # cut
        with connect(echo) as sock:  # enabled again on the same port
            assert round_trip(sock) < FAST_RTT


def test_reset_enables_proxies_and_removes_toxics(tp: toxiproxy.Toxiproxy, echo: toxiproxy.Proxy) -> None:
    echo.add_toxic(type="latency", attributes={"latency": 500})
    echo.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 1})
    echo.disable()
    assert tp.get_proxy("echo").enabled is False
    assert tp.reset()
    proxy = tp.get_proxy("echo")
    assert proxy.enabled and proxy.toxics() == {}
    with connect(proxy) as sock:
        wait_for(lambda: round_trip(sock) < FAST_RTT, 5, "a fast round trip after reset")
