"""The peer in `kraftlog perf latency`: a three-node NATS JetStream cluster (nats-server from
Debian, `apt-get install nats-server`) with an R3 file-storage stream, and one 100-byte
message published and its acknowledgement awaited at a time (nats-py's `js.publish`).

JetStream R3 acknowledges a publish once a majority of its three servers stored the message,
the same durability promise as kraftlog's acks=all with min.insync.replicas=2 on RF=3, so
the two figures answer the same question side by side. Every server is its own process on
loopback, as kraftlog's brokers are.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from cli.perf_common import pace, percentiles
from server_common.local_cluster import free_ports

SERVERS = 3
START_TIMEOUT_S = 30.0
NATS_SERVER = "nats-server"


def nats_server_path() -> str | None:
    """Where nats-server is (Debian installs it in /usr/sbin), or None."""
    return shutil.which(NATS_SERVER) or shutil.which(NATS_SERVER, path="/usr/sbin:/usr/local/sbin")


async def _publish_loop(urls: list[str], count: int, message_bytes: int, pause_s: float) -> list[float]:
    import nats  # nats-py, from the test extra

    client = await nats.connect(servers=urls)
    try:
        jetstream = client.jetstream()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # the stream can be created once the cluster has elected its meta leader
            try:
                await jetstream.add_stream(name="bench", subjects=["bench"], num_replicas=SERVERS, storage="file")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)  # a retry interval while the cluster forms, not a synchronisation
        payload = bytes(message_bytes)
        for _ in range(count // 10):  # warm-up, unrecorded
            await jetstream.publish("bench", payload)
        latencies_ms = []
        for _ in range(count):
            started = time.perf_counter()
            await jetstream.publish("bench", payload)
            latencies_ms.append((time.perf_counter() - started) * 1000)
            await pace(pause_s)
        return latencies_ms
    finally:
        await client.close()


def measure_jetstream(count: int = 3000, message_bytes: int = 100, pause_s: float = 0.0) -> dict[str, float]:
    """p50/p99/p99.9/max (ms) of JetStream R3 sync publishes on a fresh local cluster, ``pause_s`` apart."""
    binary = nats_server_path()
    if binary is None:
        raise FileNotFoundError("nats-server is not installed: apt-get install nats-server (Debian), or leave out --peer")
    if importlib.util.find_spec("nats") is None:
        raise FileNotFoundError("nats-py (the NATS client) is not installed: pip install -e '.[test]', or leave out --peer")
    ports = free_ports(SERVERS * 2)
    client_ports, route_ports = ports[:SERVERS], ports[SERVERS:]
    routes = ",".join(f"nats://127.0.0.1:{p}" for p in route_ports)
    with tempfile.TemporaryDirectory(prefix="kraftlog-nats-") as root:
        servers = [
            subprocess.Popen(
                [binary, "-a", "127.0.0.1", "-p", str(client_ports[i]), "-js", "-sd", str(Path(root) / f"n{i}"),
                 "--server_name", f"n{i}", "--cluster_name", "bench", "--cluster", f"nats://127.0.0.1:{route_ports[i]}",
                 "--routes", routes],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for i in range(SERVERS)
        ]
        try:
            samples = asyncio.run(_publish_loop([f"nats://127.0.0.1:{p}" for p in client_ports], count, message_bytes, pause_s))
        finally:
            for server in servers:
                server.kill()
                server.wait()
    return percentiles(samples)
