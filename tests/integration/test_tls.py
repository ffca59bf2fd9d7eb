"""TLS with real processes: a secure cluster (``cluster up --secure``: mutual TLS on every
port, Raft links encrypted with a shared secret) serves produce, fetch and admin calls to a
client with the ``admin`` certificate, and refuses, with advice that names the fix, every
client that is not set up for it: plaintext, TLS without a certificate, a certificate from
another CA. A rotated certificate is served to new connections without a restart. A
controller with the wrong Raft secret never joins the quorum, and joins once it has the
right one (the positive control of that negative). ``kraftlog cluster up --secure`` then
topics/produce/consume work with nothing but ``--data-dir``."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from data_plane.client import Admin, ClientSecurity, Consumer, KraftlogError, Producer
from kraftlog_proto import controller_pb2
from metadata_quorum.controller_client import ControllerClient, ControllerError
from server_common.channel_pool import open_channel
from server_common.tls_certs import CertificateAuthority, write_atomic, write_identity, write_private
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = pytest.mark.integration

TOPIC = "secure"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("tls"), controllers=3, brokers=3, secure=True) as running:
        running.create_topic(TOPIC, partitions=3, replication_factor=3)
        yield running


def controllers_of(cluster: TestCluster) -> str:
    return ",".join(c.address for c in cluster.controllers)


def test_secure_cluster_serves_produce_fetch_and_admin_over_mutual_tls(cluster: TestCluster) -> None:
    security = cluster.client_security
    assert security.cert_file is not None and security.ca_file is not None
    values = [f"v{i}".encode() for i in range(30)]
    with Producer(cluster.bootstrap, acks="all", security=security) as producer:  # acks=all: followers replicated over mTLS
        for value in values:
            producer.send(TOPIC, value)
        producer.flush()
    with Consumer(cluster.bootstrap, security=security, fetch_mode="fetch") as consumer:
        consumer.assign([(TOPIC, p) for p in range(3)])
        consumer.seek_to_beginning()
        seen: list[bytes] = []
        wait_for(lambda: seen.extend(r.value for r in consumer.poll(timeout_ms=200)) or len(seen) >= len(values), 30, "every record read back")
    assert sorted(seen) == sorted(values)
    with ControllerClient(controllers_of(cluster), security=security) as controllers:
        assert {m.controller_id for m in controllers.describe_quorum() if m.connected or m.state == "leader"} == {1, 2, 3}
    with Admin(cluster.bootstrap, security=security) as admin:
        isr = {p: d.isr for p, d in admin.describe_topics([TOPIC])[TOPIC].partitions.items()}
    assert all(len(members) == 3 for members in isr.values()), isr


@pytest.mark.parametrize("kind", ["plaintext", "no certificate", "another CA"])
def test_every_service_refuses_a_client_the_cluster_did_not_issue_with_advice(cluster: TestCluster, tmp_path: Path, kind: str) -> None:
    admin_files = cluster.client_security
    if kind == "plaintext":
        security, advice = ClientSecurity(), "requires TLS but this client connects in plaintext: set ca_file"
    elif kind == "no certificate":
        security, advice = ClientSecurity(ca_file=admin_files.ca_file), "requires a client certificate (mutual TLS): set cert_file and key_file"
    else:
        stranger = CertificateAuthority.create("another CA")
        files = write_identity(tmp_path, "admin", stranger, stranger.issue("admin"))
        security, advice = ClientSecurity(admin_files.ca_file, files.cert_file, files.key_file), "refused this client's certificate"
    # The raw call fails on every broker and controller: nothing is served.
    for node in cluster.nodes:
        with open_channel(node.address, security.channel_credentials()) as channel, pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, node.name
        assert advice in (security.explain_failure(node.address, refused.value.code(), refused.value.details()) or ""), node.name
    # The clients turn the failure into that advice.
    with Admin(cluster.bootstrap, security=security, request_timeout_ms=5_000) as admin, pytest.raises(KraftlogError) as failed:
        admin.describe_topics([TOPIC])
    assert failed.value.code == "NO_BROKER_REACHABLE" and advice in str(failed.value), str(failed.value)
    with ControllerClient(controllers_of(cluster), timeout_s=5, security=security) as controllers, pytest.raises(ControllerError) as failed_controller:
        controllers.describe_cluster()
    assert advice in str(failed_controller.value), str(failed_controller.value)


def test_a_tls_client_at_a_plaintext_port_is_told_to_drop_tls(cluster: TestCluster) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Admin(f"127.0.0.1:{port}", security=cluster.client_security, request_timeout_ms=5_000) as admin, pytest.raises(KraftlogError) as failed:
            admin.describe_topics()
    finally:
        server.stop(None)
    assert "serves plaintext but this client uses TLS: remove ca_file/cert_file/key_file" in str(failed.value), str(failed.value)


def served_certificate(address: str, security: ClientSecurity) -> bytes:
    """The DER certificate a new TLS connection to ``address`` is served."""
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=str(security.ca_file))
    context.load_cert_chain(str(security.cert_file), str(security.key_file))
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=5) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
        return tls.getpeercert(binary_form=True)


def test_a_rotated_certificate_reaches_new_connections_without_a_restart(cluster: TestCluster) -> None:
    """A CA rotation as an operator does it: trust both CAs, then give broker-1 a new key and
    a certificate from the new CA. Runs last in the module: broker-1 keeps the new one."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    files = cluster.security_dir
    security = cluster.client_security
    broker = cluster.broker(1)
    pid = broker.pid
    before = served_certificate(broker.address, security)
    assert before == x509.load_pem_x509_certificate((files / "broker-1.crt").read_bytes()).public_bytes(serialization.Encoding.DER)

    new_ca = CertificateAuthority.create("kraftlog rotated CA")
    issued = new_ca.issue("broker-1")
    old_ca_only = ClientSecurity(files / "ca-old.crt", security.cert_file, security.key_file)
    write_atomic(files / "ca-old.crt", (files / "ca.crt").read_bytes())
    write_atomic(files / "ca.crt", (files / "ca-old.crt").read_bytes() + new_ca.cert_pem)  # every node now trusts both
    write_private(files / "broker-1.key", issued.key_pem)  # for a moment key and certificate differ: the old pair stays served
    write_atomic(files / "broker-1.crt", issued.cert_pem)
    expected = x509.load_pem_x509_certificate(issued.cert_pem).public_bytes(serialization.Encoding.DER)

    wait_for(lambda: served_certificate(broker.address, security) == expected, 10, "broker-1 to serve the rotated certificate")
    assert broker.pid == pid and cluster.is_running(broker)
    # A client that trusts only the old CA no longer trusts broker-1: the new certificate really is in use.
    advice = old_ca_only.explain_failure(broker.address, grpc.StatusCode.UNAVAILABLE, "Socket closed") or ""
    assert "presented a certificate this client does not trust" in advice
    # Clients of the rotated cluster, and broker-1's followers, go on working.
    with Producer(cluster.bootstrap, acks="all", security=security) as producer:
        producer.send(TOPIC, b"after rotation", partition=0).result(timeout=30)


def test_a_controller_with_the_wrong_raft_secret_never_joins(tmp_path: Path) -> None:
    """Controllers 1 and 2 share --password; controller 3 has another. 1 and 2 elect a leader
    and commit; for many election timeouts 3 learns no leader (its messages fail the shared
    key's authentication and are dropped). Restarted with the right secret, it joins."""

    def configure(cluster: TestCluster) -> None:
        for controller in cluster.controllers:
            secret = "the wrong secret" if controller.node_id == 3 else "the quorum secret"
            controller.extra_args = ["--password", secret]

    with local_cluster(tmp_path, controllers=3, brokers=1, configure=configure) as cluster:
        cluster.create_topic("raft-secret")  # 1 and 2 commit without 3
        outsider = cluster.controller(3)

        def known_leader(node) -> int:
            with open_channel(node.address, None) as channel:
                from kraftlog_proto import controller_pb2_grpc

                return controller_pb2_grpc.ControllerServiceStub(channel).DescribeQuorum(controller_pb2.DescribeQuorumRequest(), timeout=5).leader_id

        window_end = time.monotonic() + 3.0  # 3 to 6 election timeouts, 30 connection retries
        while time.monotonic() < window_end:
            assert known_leader(outsider) == -1, "a controller with the wrong Raft secret joined the quorum"
            time.sleep(0.1)  # paces the observation of a negative; nothing waits on it
        cluster.kill(outsider)
        outsider.extra_args = ["--password", "the quorum secret"]
        cluster.restart(outsider)
        wait_for(lambda: known_leader(outsider) in (1, 2), 30, "controller 3 with the right secret to follow the leader")


def kraftlog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: free ports, no client config in the environment."""
    env = {**os.environ, "KRAFTLOG_PORT_BASE": "0", "KRAFTLOG_CLIENT_CONFIG": "", "KRAFTLOG_BOOTSTRAP": ""}
    return subprocess.run([sys.executable, "-m", "cli", *args], input=stdin, capture_output=True, text=True, timeout=150, env=env)


def test_cluster_up_secure_then_commands_just_work(tmp_path: Path) -> None:
    """``cluster up --secure --metrics``, then topics/produce/consume with nothing but --data-dir:
    the commands pick up the client config the cluster wrote; status says the cluster is secure;
    the same commands pointed at it with --bootstrap and no config are refused with advice. The
    metrics ports are mutual TLS too: before, they answered plain HTTP, naming every topic."""
    data_dir = str(tmp_path / "secure")
    started = kraftlog("cluster", "up", "--secure", "--metrics", "--detach", "--controllers", "1", "--brokers", "1", "--data-dir", data_dir)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "secure: mutual TLS on every port" in started.stdout
        created = kraftlog("topics", "create", "x", "--data-dir", data_dir)
        assert created.returncode == 0, created.stderr
        produced = kraftlog("produce", "x", "--data-dir", data_dir, stdin="hello\nsecure\n")
        assert produced.returncode == 0, produced.stderr
        consumed = kraftlog("consume", "x", "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000", "--data-dir", data_dir)
        assert consumed.stdout.split() == ["hello", "secure"], consumed.stderr
        status = json.loads(kraftlog("cluster", "status", "--json", "--data-dir", data_dir).stdout)
        assert status["secure"] is True and status["client_config"].endswith("client-secure.json")
        refused = kraftlog("topics", "list", "--bootstrap", status["bootstrap"])
        assert refused.returncode == 1 and "requires TLS but this client connects in plaintext" in refused.stderr, refused.stderr
        with_config = kraftlog("topics", "list", "--bootstrap", status["bootstrap"], "--command-config", status["client_config"])
        assert with_config.returncode == 0 and "x" in with_config.stdout.split(), with_config.stderr
        assert_metrics_need_the_clusters_certificates(status)
    finally:
        kraftlog("cluster", "down", "--data-dir", data_dir)


def assert_metrics_need_the_clusters_certificates(status: dict) -> None:
    """Every node's /metrics refuses plain HTTP and https without a client certificate, and
    answers https with the cluster's CA and the admin certificate (what Prometheus's
    tls_config ca_file, cert_file and key_file give it)."""
    from tests.integration.test_metrics import scrape

    config = ClientSecurity.load(status["client_config"])
    for node in status["nodes"]:
        port = node["metrics_port"]
        assert port, node
        with pytest.raises((ConnectionError, urllib.error.URLError)):
            scrape(port)  # plain HTTP: the TLS port drops it in the handshake
        with pytest.raises((ConnectionError, urllib.error.URLError, ssl.SSLError)):
            scrape(port, ClientSecurity(ca_file=config.ca_file))  # no client certificate
        families = scrape(port, config)
        assert "python_info" in families and ("kraftlog_partitions" in families or node["name"].startswith("controller")), node
