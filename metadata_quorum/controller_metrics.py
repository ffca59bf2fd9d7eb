"""A controller's Prometheus metrics: Raft figures from pysyncobj's status and cluster figures
from the metadata image, both read when Prometheus scrapes, plus the commit latency of every
entry this voter proposes.

``quorum_families`` is the pure core (a status dict and an image in, families out);
``ControllerMetrics`` hooks it to a running controller.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from metadata_quorum.image import MetadataImage
from metadata_quorum.raft_node import ControllerRaftNode
from server_common.metrics import RpcMetrics, authentication_failures, new_registry
from server_common.metrics_endpoint import connections_refused, serve_metrics
from server_common.tls import ServerTls

RAFT_LEADER_STATE = 2  # pysyncobj's _RAFT_STATE.LEADER in getStatus()["state"]
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def quorum_families(status: dict, image: MetadataImage) -> list[GaugeMetricFamily]:
    """Gauges for one scrape. Offline partitions (no leader) come from the image, so every
    voter reports the cluster-wide count, not only the active controller."""

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc)
        family.add_metric([], value)
        return family

    partitions = offline = 0
    for topic in image.topics.values():
        for p in topic.partitions.values():
            partitions += 1
            offline += p.leader < 0
    brokers = image.brokers.values()
    return [
        gauge("kraftlog_controller_active", "1 if this controller is the Raft leader (the active controller), else 0",
              int(status.get("state") == RAFT_LEADER_STATE)),
        gauge("kraftlog_raft_term", "The Raft term this voter is in", status.get("raft_term", 0)),
        gauge("kraftlog_raft_commit_index", "Index of the last Raft entry this voter knows committed", status.get("commit_idx", 0)),
        gauge("kraftlog_raft_last_applied_index", "Index of the last Raft entry applied to this voter's metadata image", status.get("last_applied", 0)),
        gauge("kraftlog_controller_caught_up", "1 once this voter has caught up with the metadata log since it started "
              "(it serves reads), else 0", int(status.get("caught_up", False))),
        gauge("kraftlog_metadata_offset", "Offset of the last metadata record in this voter's image", image.offset),
        gauge("kraftlog_registered_brokers", "Brokers registered in the metadata", len(brokers)),
        gauge("kraftlog_fenced_brokers", "Registered brokers that are fenced (no leaderships, out of every ISR)", sum(b.fenced for b in brokers)),
        gauge("kraftlog_topics", "Topics in the metadata", len(image.topics)),
        gauge("kraftlog_cluster_partitions", "Partitions in the metadata", partitions),
        gauge("kraftlog_offline_partitions", "Partitions with no leader (every replica fenced or out of the ISR)", offline),
    ]


class QuorumCollector(Collector):
    def __init__(self, read: Callable[[], tuple[dict, MetadataImage]]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from quorum_families(*self._read())

    def describe(self) -> list:
        return []


class ControllerMetrics:
    """Everything a controller exports, and the HTTP endpoint that serves it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or new_registry()
        self.rpc = RpcMetrics(self.registry)
        self.authentication_failures = authentication_failures(self.registry)
        self.connections_refused = connections_refused(self.registry)
        self.commit_latency = Histogram(
            "kraftlog_raft_commit_seconds", "From proposing a metadata entry on this voter to its applied here (or failed)",
            buckets=COMMIT_BUCKETS, registry=self.registry,
        )
        self._stop: Callable[[], None] | None = None

    def serve(self, host: str, port: int, tls: ServerTls | None = None) -> None:
        """Serve /metrics on ``host:port``, with the controller's listener TLS when it has one
        (first, so a port in use stops the controller before Raft starts)."""
        self._stop = serve_metrics(self.registry, host, port, tls, self.connections_refused)

    def watch(self, node: ControllerRaftNode) -> None:
        """Report ``node``: its Raft status and image at scrape time (pysyncobj's status is
        safe to read from another thread and the image is immutable, so the HTTP thread reads
        them), and the latency of every ``node.propose`` (the one way entries are written)."""
        self.registry.register(QuorumCollector(lambda: (node.status(), node.image)))
        propose = node.propose

        async def timed(records, *args, **kwargs):
            start = time.perf_counter()
            try:
                return await propose(records, *args, **kwargs)
            finally:
                self.commit_latency.observe(time.perf_counter() - start)

        node.propose = timed  # type: ignore[method-assign]

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
