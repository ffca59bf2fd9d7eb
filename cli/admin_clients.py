"""The connections admin commands need: the controller quorum (found through any broker's
Metadata answer) for metadata reads and writes, and every broker for its replicas' log state.

Per-replica log state is best effort: a broker that is down or paused must not stop an
operator from seeing the rest of the cluster (that is when ``topics describe`` matters
most), so unreachable brokers are reported as such instead of failing the command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, TypeVar

import grpc

from cli.bootstrap import resolve_bootstrap
from kraftlog_proto import broker_pb2
from kraftlog_proto import controller_pb2 as pb

LOG_STATE_TIMEOUT_S = 3.0
A = TypeVar("A")


def open_clients(args: argparse.Namespace, controller_timeout_s: float = 30.0):
    """(Admin, ControllerClient) for the cluster named by ``--bootstrap``/``--data-dir``;
    use both as context managers. ``controller_timeout_s``: how long a controller call is
    retried (a lookup that only improves a message gives up sooner)."""
    from data_plane.client import Admin
    from metadata_quorum.controller_client import ControllerClient

    admin = Admin(resolve_bootstrap(args.bootstrap, args.data_dir))
    return admin, ControllerClient(admin.controller_endpoints(), timeout_s=controller_timeout_s)


def open_coordinator_admin(args: argparse.Namespace, admin_class: type[A]) -> A:
    """A GroupAdmin or TransactionAdmin of the cluster named by ``--bootstrap``/``--data-dir``."""
    return admin_class(resolve_bootstrap(args.bootstrap, args.data_dir))


def report_unanswered(command: str, unanswered: dict[int, str], missing: str) -> None:
    """One stderr line per broker a cluster-wide listing did not hear from: its share is missing."""
    for broker_id, error in sorted(unanswered.items()):
        print(f"kraftlog {command}: broker {broker_id} did not answer, the {missing} it coordinates are missing: {error}", file=sys.stderr)


def open_security_client(args: argparse.Namespace):
    """A SecurityClient (users and ACLs) of the cluster named by ``--bootstrap``/``--data-dir``."""
    from data_plane.client import Admin
    from metadata_quorum.security_client import SecurityClient

    with Admin(resolve_bootstrap(args.bootstrap, args.data_dir)) as admin:
        return SecurityClient(admin.controller_endpoints())


def replica_logs(brokers: Iterable[pb.BrokerRegistration], topics: Iterable[str] = (), timeout_s: float = LOG_STATE_TIMEOUT_S) -> dict[int, broker_pb2.DescribeLogsResponse]:
    """Each registered broker's DescribeLogs answer (log start, LEO, HW per hosted replica),
    asked of all brokers at once; brokers that do not answer within ``timeout_s`` are left out."""
    from data_plane.client.channels import broker_channels
    from server_common.client_security import ClientSecurity

    request = broker_pb2.DescribeLogsRequest(topics=list(topics))
    pool = broker_channels(ClientSecurity.from_environment())
    try:
        futures = {
            b.endpoint.broker_id: pool.stub(f"{b.endpoint.host}:{b.endpoint.port}").DescribeLogs.future(request, timeout=timeout_s)
            for b in brokers
        }
        answers = {}
        for broker_id, future in futures.items():
            try:
                answers[broker_id] = future.result()
            except grpc.RpcError:
                continue  # shown as "unreachable" next to that broker's replicas
        return answers
    finally:
        pool.close()
