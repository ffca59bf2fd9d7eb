"""The secure cluster the Kafka door's SASL/SCRAM-over-TLS tests share (librdkafka, kafka-python,
aiokafka): authentication required, ACLs enforced, and three users. ``alice`` may write and
read ``TOPIC`` and read ``GROUP``; ``bob`` authenticates but has no ACL; ``root`` is a super
user. Each test module starts its own cluster from ``secure_cluster`` (a module-scoped fixture
calls it), so the modules stay independent of one another."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import AclBinding
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

TOPIC = "sasl"
GROUP = "sasl-readers"
SUPERS = "User:admin,User:root,User:broker-1,User:controller-1"
ARGS = ["--authentication-required", "--authorization", "--super-users", SUPERS]
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "root": "root-secret"}


def security(cluster: TestCluster) -> SecurityClient:
    return SecurityClient(",".join(c.address for c in cluster.controllers), security=cluster.client_security)


def ca_file(cluster: TestCluster) -> str:
    return str(cluster.security_dir / "ca.crt")


@contextmanager
def secure_cluster(directory: Path, users_known: Callable[[TestCluster], bool]) -> Iterator[TestCluster]:
    """A one-controller, one-broker secure cluster with ``TOPIC``, the users and alice's ACLs;
    ``users_known`` tells (with the module's client) when the broker has the users."""
    with local_cluster(directory, controllers=1, brokers=1, secure=True, controller_args=ARGS, broker_args=ARGS) as running:
        running.create_topic(TOPIC, partitions=1, replication_factor=1)
        with security(running) as admin:
            for user, password in PASSWORDS.items():
                admin.upsert_user(user, password)
            admin.create_acls([AclBinding("User:alice", "*", "topic", TOPIC, "literal", op, "allow") for op in ("write", "read", "describe")]
                              + [AclBinding("User:alice", "*", "group", GROUP, "literal", "read", "allow")])
        wait_for(lambda: users_known(running), 30, "the users on the broker")
        yield running
