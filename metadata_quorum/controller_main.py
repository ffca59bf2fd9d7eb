"""The controller process: one voter of the metadata quorum with its gRPC service.

``kraftlog controller ...`` (the CLI) and ``python -m metadata_quorum ...`` both land here.
It starts Raft (pysyncobj) on the voter's raft address, serves ControllerService plus the
standard health and reflection services on its gRPC address, follows leadership, and stops
cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import grpc
import structlog

from metadata_quorum.active_controller import ActiveController
from metadata_quorum.controller_metrics import ControllerMetrics
from metadata_quorum.controller_options import PASSWORD_ENV, UNSAFE_ELECT_OUTSIDE_ISR_ELR, UNSAFE_JOIN_BEFORE_CAUGHT_UP, add_arguments
from metadata_quorum.security_service import SecurityAdminService
from server_common.authentication import Authenticator
from server_common.authorization import AccessControl
from server_common.security_options import SecurityOptions, parse_principals
from metadata_quorum.election import enable_unsafe_election
from metadata_quorum.controller_service import ControllerService
from metadata_quorum.endpoints import Voter, parse_address_overrides, parse_quorum
from server_common.cluster_identity import derived_cluster_id
from metadata_quorum.raft_node import ControllerRaftNode, enable_unsafe_join
from metadata_quorum.loopback_peers import fd_from_this_process
from metadata_quorum.raft_tls import RaftTlsRelay, raft_tls_files
from kraftlog_proto import controller_pb2, controller_pb2_grpc, security_pb2_grpc
from server_common import power_loss
from server_common.event_loops import run_loop
from server_common.gc_freeze import freeze_after_full_collections
from server_common.grpc_standard_services import ServingState
from server_common.limits import MESSAGE_BYTES_MAX
from server_common.tls import TlsConfigError, add_port, server_tls_from_args


def raft_principals(args: argparse.Namespace, voters: list[Voter]) -> frozenset[str]:
    """Who may reach the Raft port through the TLS relay: the controllers' certificate names."""
    return frozenset(parse_principals(args.raft_principals, "--raft-principals") or (f"User:controller-{v.node_id}" for v in voters))


def _self_voter(args: argparse.Namespace, voters: list[Voter]) -> Voter:
    """This controller: its --quorum entry, or for a controller joining the quorum (not in
    --quorum: it starts as an observer) the addresses given with --join."""
    me = next((v for v in voters if v.node_id == args.node_id), None)
    if args.join is None:
        if me is None:
            raise SystemExit(f"kraftlog controller: --node-id {args.node_id} is not in --quorum (ids {[v.node_id for v in voters]}); add it, "
                             f"fix the id, or pass --join HOST:RAFT_PORT:GRPC_PORT to join the quorum as a new controller")
        return me
    try:
        [joining] = parse_quorum(f"{args.node_id}@{args.join}")
    except ValueError as exc:
        raise SystemExit(f"kraftlog controller: --join {args.join}: {exc}") from None
    if me is not None and me != joining:
        raise SystemExit(f"kraftlog controller: --join {args.join} differs from controller {args.node_id}'s --quorum entry "
                         f"{me.raft_address}:{me.grpc_port}; drop --join or the entry")
    return joining


def raft_secret(args: argparse.Namespace) -> str | None:
    """The Raft links' shared secret: --password, --raft-secret-file or the environment.
    With --require-tls a controller does not run Raft without one (its links would carry
    unauthenticated pickles: docs/security.md, Raft links)."""
    if args.password and args.raft_secret_file:
        raise TlsConfigError("pass the Raft secret once: --password or --raft-secret-file, not both")
    secret = args.password
    if args.raft_secret_file is not None:
        try:
            secret = args.raft_secret_file.read_text().strip()
        except OSError as exc:
            raise TlsConfigError(f"cannot read --raft-secret-file {args.raft_secret_file}: {exc.strerror}") from None
        if not secret:
            raise TlsConfigError(f"--raft-secret-file {args.raft_secret_file} is empty: write the shared secret into it")
    secret = secret or os.environ.get(PASSWORD_ENV) or None
    if secret is None and args.require_tls and not args.raft_tls:
        raise TlsConfigError(f"--require-tls also protects the Raft links: pass --raft-tls, or --raft-secret-file (or --password / "
                             f"{PASSWORD_ENV}) the same on every voter")
    return secret


def _enter_test_modes(args: argparse.Namespace, log) -> None:
    """The chaos harness's modes, each said loudly in the log: a negative control
    (``--unsafe-testing``) or the power-loss fault's fsync ledger."""
    if args.unsafe_testing == UNSAFE_ELECT_OUTSIDE_ISR_ELR:
        log.warning("UNSAFE TESTING MODE: elections choose replicas outside the ISR and ELR; acknowledged writes WILL be lost", unsafe_testing=args.unsafe_testing)
        enable_unsafe_election()
    if args.unsafe_testing == UNSAFE_JOIN_BEFORE_CAUGHT_UP:
        log.warning("UNSAFE TESTING MODE: reads served and votes cast before catching up with the metadata log; reads WILL miss "
                    "committed metadata", unsafe_testing=args.unsafe_testing)
        enable_unsafe_join()
    if args.power_loss_ledger:
        power_loss.install(args.data_dir)
        log.warning("POWER-LOSS TEST MODE: every fsync is recorded for the chaos harness's power-loss fault")


async def serve(args: argparse.Namespace) -> None:
    voters = parse_quorum(args.quorum)
    me = _self_voter(args, voters)
    if args.join is not None and args.cluster_id is None:
        raise SystemExit("kraftlog controller: --join needs --cluster-id: give the cluster's id (`kraftlog quorum describe` shows it)")
    cluster_id = args.cluster_id or derived_cluster_id((v.node_id, v.raft_address) for v in voters)
    try:
        tls = server_tls_from_args(args)
        password = raft_secret(args)
        raft_tls = raft_tls_files(args.tls_cert_file, args.tls_key_file, args.tls_ca_file) if args.raft_tls else None
    except TlsConfigError as exc:
        raise SystemExit(f"kraftlog controller: {exc}") from None
    log = structlog.get_logger("controller").bind(controller_id=me.node_id)
    loop = asyncio.get_running_loop()

    metrics = ControllerMetrics() if args.metrics_port else None  # off: no interceptor, no timing
    security = SecurityOptions.from_args(args)
    authenticator = Authenticator(lambda: node.image.scram_users, security.authentication_required,  # node: set below, before serving
                                  metrics.authentication_failures if metrics else None, log)
    access = AccessControl(lambda: node.image.acls, security.super_users, security.authorization)
    interceptors = [metrics.rpc.interceptor()] if metrics else []
    interceptors.append(authenticator.interceptor())
    server = grpc.aio.server(interceptors=interceptors, options=[("grpc.max_send_message_length", MESSAGE_BYTES_MAX), ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX), ("grpc.so_reuseport", 0)])
    if add_port(server, me.grpc_address, tls) == 0:
        raise SystemExit(f"kraftlog controller: cannot listen on {me.grpc_address}: is another process using the port?")
    if metrics is not None:
        metrics.serve(me.host, args.metrics_port, tls)
    try:
        raft_routes = parse_address_overrides(args.raft_peer_address, "--raft-peer-address")
    except ValueError as exc:
        raise SystemExit(f"kraftlog controller: {exc}") from None
    _enter_test_modes(args, log)
    relay = None
    bind_address = me.raft_address
    if raft_tls is not None:
        try:
            relay = RaftTlsRelay(me, voters, raft_tls, raft_principals(args, voters), raft_routes)
            await relay.start()
        except (TlsConfigError, OSError) as exc:
            raise SystemExit(f"kraftlog controller: cannot start the Raft TLS relay on {me.raft_address}: {exc}") from None
        raft_routes, bind_address = relay.routes, relay.bind_address
    node = ControllerRaftNode(me, voters, args.data_dir, cluster_id, password, loop, raft_routes,
                              durable_journal=args.raft_journal == "fsync", bind_address=bind_address,
                              admit_incoming=fd_from_this_process if relay is not None else None)
    if metrics is not None:
        metrics.watch(node)
    controller = ActiveController(node, args.session_timeout_ms, args.auto_leader_rebalance_enable, args.leader_imbalance_check_interval_seconds)
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(ControllerService(controller, access), server)
    security_pb2_grpc.add_SecurityAdminServicer_to_server(SecurityAdminService(controller, access), server)
    health = ServingState(server, controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name)
    await server.start()
    stopping = False
    # Serving once this voter knows a Raft leader (before that no write can be answered) and
    # has caught up with the metadata log (before that it refuses reads).
    reporting = asyncio.create_task(health.follow(lambda: not stopping and node.leader_id() >= 0 and node.caught_up))
    log.info("controller started", raft_address=me.raft_address, grpc_address=me.grpc_address, voters=len(voters), cluster_id=cluster_id,
             data_dir=str(args.data_dir), raft_encrypted=password is not None, raft_tls=relay is not None, tls=tls is not None,
             client_auth=tls.client_auth if tls else None, session_timeout_ms=args.session_timeout_ms,
             auto_leader_rebalance=args.auto_leader_rebalance_enable, leader_imbalance_check_interval_s=args.leader_imbalance_check_interval_seconds,
             metrics_port=args.metrics_port or None, authentication_required=security.authentication_required,
             authorization=security.authorization, super_users=list(security.super_users))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    role = asyncio.create_task(controller.run())
    warming = asyncio.create_task(node.keep_snapshot_warm())
    await stop.wait()
    log.info("controller stopping")
    stopping = True
    reporting.cancel()
    await health.set(False)
    role.cancel()
    warming.cancel()
    await server.stop(grace=1.0)
    node.destroy()
    if relay is not None:
        relay.close()
    if metrics is not None:
        metrics.stop()
    log.info("controller stopped cleanly", metadata_offset=node.image.offset)


def run(args: argparse.Namespace) -> int:
    from server_common.logging_setup import configure_logging

    configure_logging(args.log_format)
    freeze_after_full_collections()  # the image of 50,000 partitions made each full GC a pause of 0.3 s
    try:
        run_loop(serve(args), args.event_loop)
    except ValueError as exc:  # a malformed --quorum, or a metadata dump in no format this version reads (raft_dump.py)
        raise SystemExit(f"kraftlog controller: {exc}") from None
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="kraftlog controller", description="Run one controller (a voter of the metadata quorum).")
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
