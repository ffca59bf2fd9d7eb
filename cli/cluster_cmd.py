"""``kraftlog cluster up|down|status``: a local cluster of separate processes."""

from __future__ import annotations

import argparse
import signal

import grpc

from cli.bootstrap import data_dir
from cli.local_cluster import LocalCluster, wait_for
from cli.output import emit, table
from proto import broker_pb2, broker_pb2_grpc

READY_TIMEOUT_S = 60


def live_brokers(address: str) -> int:
    """How many registered, unfenced brokers the broker at ``address`` knows of."""
    with grpc.insecure_channel(address) as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=2)
    return sum(1 for b in response.brokers if not b.fenced)


def wait_ready(cluster: LocalCluster, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Every broker is registered and unfenced, as seen by every broker."""
    for broker in cluster.brokers:
        wait_for(
            lambda: live_brokers(broker.address) == len(cluster.brokers),
            timeout_s,
            f"{len(cluster.brokers)} live brokers seen by {broker.name} (see {cluster.log_path(broker)})",
        )


def up(args: argparse.Namespace) -> int:
    if args.controllers < 1 or args.brokers < 1:
        raise ValueError("a cluster needs at least one controller and one broker")
    directory = data_dir(args.data_dir)
    cluster = LocalCluster.create(directory, args.controllers, args.brokers)
    running = [n.name for n in cluster.nodes if cluster.is_running(n)]
    if running:
        raise ValueError(f"the cluster in {directory} is already running ({', '.join(running)}): stop it with kraftlog cluster down --data-dir {directory}")
    signal.signal(signal.SIGTERM, _interrupt)
    cluster.start(detach=args.detach)
    print(f"starting {len(cluster.controllers)} controllers and {len(cluster.brokers)} brokers in {directory} (logs in {directory / 'logs'})")
    try:
        wait_ready(cluster)
        print(f"cluster ready; bootstrap {cluster.bootstrap}")
        if args.detach:
            return 0
        if args.no_workload:
            print("press Ctrl-C to stop")
            while True:
                signal.pause()
        else:
            from cli.demo import run_demo

            run_demo(cluster.bootstrap, partitions=len(cluster.brokers), replication_factor=min(3, len(cluster.brokers)))
    except KeyboardInterrupt:
        pass
    finally:
        if not args.detach:
            print("stopping the cluster ...")
            cluster.stop()
            print("stopped")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the foreground cluster the same way Ctrl-C does."""
    raise KeyboardInterrupt


def down(args: argparse.Namespace) -> int:
    directory = data_dir(args.data_dir)
    cluster = LocalCluster.load(directory)
    cluster.stop()
    print(f"stopped the cluster in {directory}")
    return 0


def status(args: argparse.Namespace) -> int:
    directory = data_dir(args.data_dir)
    cluster = LocalCluster.load(directory)
    rows = [
        {"id": n.node_id, "role": n.role, "address": n.address, "raft_port": n.raft_port or None, "pid": n.pid, "running": cluster.is_running(n)}
        for n in cluster.nodes
    ]
    human = table(["ROLE", "ID", "ADDRESS", "RAFT PORT", "PID", "RUNNING"], [[r["role"], r["id"], r["address"], r["raft_port"], r["pid"], r["running"]] for r in rows])
    emit(args.json, {"data_dir": str(directory), "bootstrap": cluster.bootstrap, "nodes": rows}, f"bootstrap {cluster.bootstrap}\n{human}")
    return 0


