"""``kraftlog chaos attack``: a hostile client beside the normal workload of a secure cluster.

It holds what an attacker inside the network plausibly holds: a certificate of the cluster's
CA (an application's; no ACLs) and one signed-in user with no ACLs (``--user``). For
``--duration`` seconds, one thread per attack, as fast as the cluster answers:

- ``wrong-passwords``: calls to every broker and controller with a real user name or a new
  random one and a wrong password (each costs a PBKDF2 derivation until the failure budgets
  throttle it; docs/security.md, Limits);
- ``expensive-requests``: the signed-in user asks for what costs most or reveals most:
  UpsertUser with 2^31-1 iterations, CreateTopics of a million partitions, DescribeConfigs and
  Metadata and DescribeCluster of everything, ListGroups, ListUsers, ListAcls;
- ``handshakes``: TLS connections without a client certificate to every gRPC and metrics port
  (each costs the server a handshake before it is refused).

What the cluster must hold meanwhile (controller leadership, produce latency, no failed
produce) is the caller's to measure (``tests/integration/test_attacker.py``); the attacker
prints what it sent and how each was answered, as JSON, so a run shows the attack happened.
"""

from __future__ import annotations

import json
import secrets
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import grpc

from kraftlog_proto import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, group_pb2, group_pb2_grpc, security_pb2, security_pb2_grpc
from server_common.channel_pool import open_channel
from server_common.client_security import ClientSecurity
from server_common.errors import ErrorCode, error_code_name

HUGE_ITERATIONS = 2**31 - 1
CALL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Target:
    """What the attacker aims at: every node's gRPC address and metrics port."""

    brokers: list[str]
    controllers: list[str]
    metrics: list[str]  # host:port of every metrics endpoint (may be empty)


class Attacker:
    """The attack threads and their tallies ({attack: {outcome: count}})."""

    def __init__(self, target: Target, certificate: ClientSecurity, user: str, password: str, victim: str) -> None:
        self.target = target
        self._certificate = certificate
        self._signed_in = (("kraftlog-username", user), ("kraftlog-password", password))
        self._victim = victim  # a real user name, to guess at
        self.tally: dict[str, Counter] = {name: Counter() for name in ("wrong-passwords", "expensive-requests", "handshakes")}
        self._lock = threading.Lock()

    def run(self, duration_s: float, started: Callable[[], None] = lambda: None) -> dict[str, dict[str, int]]:
        """Every attack for ``duration_s``; ``started`` is called once every thread runs."""
        deadline = time.monotonic() + duration_s
        attacks: dict[str, Callable[[float], None]] = {
            "wrong-passwords": self._wrong_passwords, "expensive-requests": self._expensive_requests, "handshakes": self._handshakes}
        threads = [threading.Thread(target=attack, args=(deadline,), name=name, daemon=True) for name, attack in attacks.items()]
        for thread in threads:
            thread.start()
        started()
        for thread in threads:
            thread.join(duration_s + 2 * CALL_TIMEOUT_S)
        return {name: dict(counts) for name, counts in self.tally.items()}

    def _count(self, attack: str, outcome: str) -> None:
        with self._lock:
            self.tally[attack][outcome] += 1

    def _call(self, attack: str, call: Callable[..., object], request: object, metadata) -> None:
        """One call; its outcome tallied as the gRPC status, or the answer's error code."""
        try:
            answer = call(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as refused:
            details = refused.details() or ""
            self._count(attack, "throttled" if "too many failed authentications" in details else refused.code().name)
            return
        code = getattr(answer, "error_code", 0)
        self._count(attack, "answered" if code == ErrorCode.NONE else error_code_name(code))

    def _wrong_passwords(self, deadline: float) -> None:
        credentials = self._certificate.channel_credentials()
        channels = [open_channel(a, credentials) for a in (*self.target.brokers, *self.target.controllers)]
        try:
            stubs = [broker_pb2_grpc.BrokerStub(c).Metadata for c in channels[:len(self.target.brokers)]]
            stubs += [controller_pb2_grpc.ControllerServiceStub(c).DescribeCluster for c in channels[len(self.target.brokers):]]
            requests = [broker_pb2.MetadataRequest()] * len(self.target.brokers) + [controller_pb2.DescribeClusterRequest()] * len(self.target.controllers)
            turn = 0
            while time.monotonic() < deadline:
                user = self._victim if turn % 2 == 0 else f"guess-{secrets.token_hex(4)}"
                index = turn % len(stubs)
                self._call("wrong-passwords", stubs[index], requests[index], (("kraftlog-username", user), ("kraftlog-password", secrets.token_hex(8))))
                turn += 1
        finally:
            for channel in channels:
                channel.close()

    def _expensive_requests(self, deadline: float) -> None:
        credentials = self._certificate.channel_credentials()
        controller, broker = open_channel(self.target.controllers[0], credentials), open_channel(self.target.brokers[0], credentials)
        try:
            security = security_pb2_grpc.SecurityAdminStub(controller)
            control = controller_pb2_grpc.ControllerServiceStub(controller)
            calls = [
                (security.UpsertUser, security_pb2.UpsertUserRequest(name=f"intruder-{secrets.token_hex(3)}", password="x", iterations=HUGE_ITERATIONS)),
                (control.CreateTopics, controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreateTopicsRequest.Topic(name="flood", num_partitions=1_000_000, replication_factor=3)])),
                (control.DescribeConfigs, controller_pb2.DescribeConfigsRequest()),
                (control.DescribeCluster, controller_pb2.DescribeClusterRequest()),
                (security.ListUsers, security_pb2.ListUsersRequest()),
                (security.ListAcls, security_pb2.ListAclsRequest()),
                (broker_pb2_grpc.BrokerStub(broker).Metadata, broker_pb2.MetadataRequest()),
                (group_pb2_grpc.GroupCoordinatorStub(broker).ListGroups, group_pb2.ListGroupsRequest()),
            ]
            turn = 0
            while time.monotonic() < deadline:
                call, request = calls[turn % len(calls)]
                self._call("expensive-requests", call, request, self._signed_in)
                turn += 1
        finally:
            controller.close()
            broker.close()

    def _handshakes(self, deadline: float) -> None:
        context = ssl.create_default_context(cafile=str(self._certificate.ca_file))  # trusts the cluster, shows no certificate
        addresses = [*self.target.brokers, *self.target.controllers, *self.target.metrics]
        turn = 0
        while time.monotonic() < deadline:
            host, port = addresses[turn % len(addresses)].rsplit(":", 1)
            turn += 1
            try:
                with socket.create_connection((host, int(port)), timeout=CALL_TIMEOUT_S) as raw, context.wrap_socket(raw, server_hostname=host) as tls:
                    tls.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                    self._count("handshakes", "answered" if tls.recv(1) else "refused")
            except (ssl.SSLError, OSError):
                self._count("handshakes", "refused")


def attack(target: Target, certificate: ClientSecurity, user: str, password: str, victim: str, duration_s: float,
           started: Callable[[], None]) -> str:
    """The whole attack (``started`` once it runs); its tallies as one line of JSON."""
    attacker = Attacker(target, certificate, user, password, victim)
    return json.dumps(attacker.run(duration_s, started), sort_keys=True)
