"""Failed password authentications against real processes (docs/security.md, Limits): a flood
of wrong passwords for one user is refused before hashing once the user's budget is spent,
each verified failure is logged (user and peer, never the password) and counted in
``kraftlog_authentication_failures_total``, a signed-in client and another user from the same
address go on being served, and the user gets in once the budget refills."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from data_plane.client.channels import broker_channels
from kraftlog_proto import broker_pb2
from metadata_quorum.security_client import SecurityClient
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster
from tests.integration.test_metrics import give_metrics_ports, metrics_port, scrape, value

pytestmark = pytest.mark.integration

SUPERS = "User:admin,User:broker-1,User:controller-1"
ARGS = ["--authentication-required", "--authorization", "--super-users", SUPERS]
WRONG = "not-alices-password-7f3e"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> TestCluster:
    with local_cluster(tmp_path_factory.mktemp("auth-limits"), controllers=1, brokers=1, secure=True, controller_args=ARGS,
                       broker_args=ARGS, configure=give_metrics_ports) as running:
        with SecurityClient(running.controllers[0].address, security=running.client_security) as admin:
            for name in ("alice", "bob", "carol"):
                admin.upsert_user(name, f"{name}-secret")
        yield running


def metadata_as(cluster: TestCluster, name: str, password: str) -> grpc.RpcError | None:
    """None when the broker answers ``name``'s Metadata call; else the refusal."""
    security = dataclasses.replace(cluster.client_security, username=name, password=password)
    try:
        broker_channels(security).stub(cluster.brokers[0].address).Metadata(broker_pb2.MetadataRequest(), timeout=10)
    except grpc.RpcError as refused:
        return refused
    return None


def test_a_flood_of_wrong_passwords_is_throttled_logged_and_counted(cluster: TestCluster) -> None:
    assert metadata_as(cluster, "bob", "bob-secret") is None  # bob is signed in before the flood
    with ThreadPoolExecutor(16) as pool:
        refusals = list(pool.map(lambda _: metadata_as(cluster, "alice", WRONG), range(60)))
    assert all(r is not None and r.code() == grpc.StatusCode.UNAUTHENTICATED for r in refusals)
    throttled = [r for r in refusals if "too many failed authentications for user 'alice'" in r.details()]
    assert len(throttled) >= 50, [r.details() for r in refusals][:10]  # a burst of 5, refilled at one per 2 s
    assert "retry in" in throttled[0].details()
    assert metadata_as(cluster, "bob", "bob-secret") is None  # an established client is not held back
    assert metadata_as(cluster, "carol", "carol-secret") is None  # nor another user from the same address

    families = scrape(metrics_port(cluster, "broker", 1))
    assert value(families, "kraftlog_authentication_failures_total", reason="throttled") == len(throttled)
    assert value(families, "kraftlog_authentication_failures_total", reason="wrong_credentials") == len(refusals) - len(throttled)
    log = (cluster.data_dir / "logs" / "broker-1.log").read_text()
    failed = [line for line in log.splitlines() if "authentication failed" in line and "alice" in line]
    assert len(failed) == len(refusals) - len(throttled) and all("127.0.0.1" in line for line in failed), failed[:3]
    assert WRONG not in log

    wait_for(lambda: metadata_as(cluster, "alice", "alice-secret") is None, 15, "alice's budget to refill")  # not locked out for ever
