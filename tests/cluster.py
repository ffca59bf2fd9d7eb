"""A real cluster for integration tests: separate controller and broker processes on loopback.

``local_cluster(tmp_path, controllers=3, brokers=3)`` starts it, waits until every broker is
registered and unfenced, and always stops every process on exit, even when the test fails.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator, Sequence

from server_common.local_cluster import READY_TIMEOUT_S, LocalCluster, Node, wait_ready
from server_common.waiting import wait_for


class TestCluster(LocalCluster):
    """LocalCluster plus the conveniences tests need."""

    __test__ = False  # not a pytest test class

    @property
    def client_security(self):
        """How the tests' clients connect: the ``admin`` identity of a secure cluster,
        plaintext otherwise (never the environment's config)."""
        from data_plane.client import ClientSecurity

        return ClientSecurity.load(self.client_config_path) if self.secure else ClientSecurity()

    def controller_client(self):
        from metadata_quorum.controller_client import ControllerClient

        return ControllerClient(",".join(c.address for c in self.controllers), security=self.client_security)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1, configs: dict[str, str] | None = None) -> None:
        """Create a topic and wait until every partition has a leader that answers for it."""
        with self.controller_client() as client:
            client.create_topic(name, partitions, replication_factor, configs or {})
        self.wait_topic_ready(name, partitions)

    def wait_topic_ready(self, name: str, partitions: int, timeout_s: float = 30) -> None:
        from data_plane.client import Admin

        def ready() -> bool:
            with Admin(self.bootstrap, security=self.client_security) as admin:
                topic = admin.describe_topics([name])[name]
                return len(topic.partitions) == partitions and all(p.leader >= 0 for p in topic.partitions.values())

        wait_for(ready, timeout_s, f"topic {name} with {partitions} led partitions")

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader as the cluster's metadata says now."""
        from data_plane.client import Admin

        with Admin(self.bootstrap, security=self.client_security) as admin:
            return admin.describe_topics([topic])[topic].partitions[partition].leader

    def broker(self, broker_id: int) -> Node:
        return self.node("broker", broker_id)

    def controller(self, node_id: int) -> Node:
        return self.node("controller", node_id)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        wait_ready(self, timeout_s)


@contextlib.contextmanager
def local_cluster(
    tmp_path: Path,
    controllers: int = 3,
    brokers: int = 3,
    controller_args: Sequence[str] = (),
    broker_args: Sequence[str] = (),
    configure: Callable[[TestCluster], None] | None = None,
    secure: bool = False,
) -> Iterator[TestCluster]:
    """``controller_args``/``broker_args``: extra command-line options for every such node;
    ``configure`` sees the laid-out cluster before any process starts (per-node options,
    proxies in front of nodes); ``secure``: mutual TLS everywhere (``cluster up --secure``)."""
    base = LocalCluster.create(Path(tmp_path) / "cluster", controllers, brokers, secure=secure)
    for node in base.nodes:
        node.extra_args = list(controller_args if node.role == "controller" else broker_args)
    cluster = TestCluster(base.data_dir, base.nodes, base.log_format, secure)
    if configure is not None:
        configure(cluster)
    try:
        cluster.start()
        cluster.wait_ready()
        yield cluster
    finally:
        for node in cluster.nodes:
            cluster.kill(node)


@contextlib.contextmanager
def cluster_with_topic(tmp_path: Path, topic: str, partitions: int, **options) -> Iterator[TestCluster]:
    """One controller and three brokers (unless ``options`` say otherwise) with ``topic``
    created at replication factor 3 and every partition led: what a client test starts from."""
    with local_cluster(tmp_path, **{"controllers": 1, "brokers": 3, **options}) as cluster:
        cluster.create_topic(topic, partitions, 3)
        cluster.wait_topic_ready(topic, partitions)
        yield cluster
