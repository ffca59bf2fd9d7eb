"""Mutual TLS on the Raft links between controllers (``--raft-tls``, metadata_quorum/raft_tls.py)
with real controller processes: a secure cluster's quorum forms and commits over TLS links, a
connection to a Raft port without a certificate is refused, and a controller whose certificate
comes from another CA never joins while the other two go on committing."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path
from typing import Iterator

import pytest

from metadata_quorum.controller_client import ControllerClient
from server_common.tls_certs import write_cluster_identities
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("raft-tls"), controllers=3, brokers=1, secure=True) as running:
        yield running


def log_lines(cluster: TestCluster, node_name: str, text: str) -> list[str]:
    return [line for line in (cluster.data_dir / "logs" / f"{node_name}.log").read_text().splitlines() if text in line]


def quorum(cluster: TestCluster) -> dict[int, object]:
    with cluster.controller_client() as client:
        return {m.controller_id: m for m in client.describe_quorum()}


def test_the_quorum_commits_over_tls_links_and_a_raft_port_refuses_a_plain_peer(cluster: TestCluster) -> None:
    assert all(log_lines(cluster, c.name, "Raft links over mutual TLS") for c in cluster.controllers)
    cluster.create_topic("over-tls", partitions=1, replication_factor=1)
    members = wait_for(lambda: (q := quorum(cluster)) and len({m.last_applied for m in q.values()}) == 1 and q, 30,
                       "every voter to apply the same entries")
    assert all(m.connected and m.last_applied > 0 for m in members.values()), members

    first = cluster.controllers[0]
    refused_before = len(log_lines(cluster, first.name, "Raft TLS connection refused"))
    context = ssl.create_default_context(cafile=str(cluster.security_dir / "ca.crt"))  # trusts the CA, presents nothing
    with socket.create_connection((first.host, first.raft_port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=first.host) as tls:
                tls.sendall(b"a voter without a certificate")
                assert tls.recv(16) == b""  # TLS 1.3: the refusal arrives after the client's handshake ends
        except (ssl.SSLError, ConnectionResetError):
            pass  # or as an alert, during the handshake or after it
    # usually "peer did not return a certificate"; a handshake the refusal cut short logs its own reason
    wait_for(lambda: len(log_lines(cluster, first.name, "Raft TLS connection refused")) > refused_before, 10, "the refusal in the controller's log")


def test_only_controllers_and_only_this_process_reach_the_raft_links(cluster: TestCluster) -> None:
    """The admin's and a broker's certificates are from the cluster's CA and name super users,
    yet neither is a controller: the Raft port refuses both. And another process on the machine
    (this test) can reach neither pysyncobj's loopback port past TLS nor a relay port that would
    carry its bytes to a peer under the controller's certificate. Before, all were let through."""
    first = cluster.controllers[0]
    for name in ("admin", cluster.brokers[0].name):
        refused_before = len(log_lines(cluster, first.name, "Raft TLS connection refused"))
        context = ssl.create_default_context(cafile=str(cluster.security_dir / "ca.crt"))
        context.load_cert_chain(cluster.security_dir / f"{name}.crt", cluster.security_dir / f"{name}.key")
        with socket.create_connection((first.host, first.raft_port), timeout=10) as raw:
            try:
                with context.wrap_socket(raw, server_hostname=first.host) as tls:
                    tls.sendall(b"a super user posing as a voter")
                    tls.recv(16)  # until the controller closes it: closing first could end its handshake before its check
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
                pass  # the refusal may also close the connection during the handshake: the log line below is what counts
        # "the certificate names no controller" once the handshake ends; a handshake the refusal cut short logs its own reason
        wait_for(lambda: [line for line in log_lines(cluster, first.name, "the certificate names no controller") if f"User:{name}" in line]
                 or len(log_lines(cluster, first.name, "Raft TLS connection refused")) > refused_before, 20,
                 f"{name}'s certificate refused at the Raft port")

    links = json.loads(log_lines(cluster, first.name, "Raft links over mutual TLS")[-1])
    pysyncobj_host, pysyncobj_port = links["raft_bind_address"].rsplit(":", 1)
    for port in (int(pysyncobj_port), *links["routes"].values()):
        with socket.create_connection((pysyncobj_host, port), timeout=10) as raw:
            raw.sendall(b"a local process")
    wait_for(lambda: log_lines(cluster, first.name, "not from this controller's relay"), 10, "pysyncobj's port refusing a stranger")
    wait_for(lambda: len(log_lines(cluster, first.name, "not from this controller's process")) >= len(links["routes"]), 10,
             "every relay port refusing a stranger")
    cluster.create_topic("after-the-strangers", partitions=1, replication_factor=1)  # the quorum's own links still work


def test_a_controller_with_another_cas_certificate_never_joins(cluster: TestCluster, tmp_path: Path) -> None:
    stranger = cluster.controllers[2]
    other = tmp_path / "other-ca"
    write_cluster_identities(other, [stranger.name])
    cluster.stop_node(stranger)
    saved = list(stranger.extra_args)
    stranger.extra_args = [*saved, "--tls-cert-file", str(other / f"{stranger.name}.crt"), "--tls-key-file",
                           str(other / f"{stranger.name}.key"), "--tls-ca-file", str(other / "ca.crt")]
    try:
        cluster.start_node(stranger)
        refusals = lambda: sum(len(log_lines(cluster, c.name, "Raft TLS connection refused")) for c in cluster.controllers[:2])
        before = refusals()
        wait_for(lambda: refusals() > before, 30, "the other voters to refuse the stranger's Raft connections")
        others = ",".join(c.address for c in cluster.controllers[:2])  # the stranger's gRPC certificate is not trusted either
        with ControllerClient(others, security=cluster.client_security) as client:
            client.create_topic("without-the-stranger", 1, 1, {})  # 2 of 3 voters commit
        seen = quorum(cluster)
        assert seen[stranger.node_id].state == "unreachable" or not seen[stranger.node_id].connected, seen[stranger.node_id]
        leader = next(m for m in seen.values() if m.state == "leader")
        assert seen[stranger.node_id].match_index < leader.commit_index, (seen[stranger.node_id], leader)
    finally:
        cluster.stop_node(stranger)
        stranger.extra_args = saved
        cluster.start_node(stranger)
    wait_for(lambda: (q := quorum(cluster)) and q[stranger.node_id].connected and q[stranger.node_id].lag == 0, 60,
             "the controller to rejoin with the cluster's certificate")
