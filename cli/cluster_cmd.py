"""``kraftlog cluster up|down|status|stop|start|restart``: a local cluster of separate processes.

A new cluster gets the stable ports (brokers from 9092, controllers from 9192, Raft from 9292;
``KRAFTLOG_PORT_BASE`` moves the whole layout, 0 asks for free ports); a restarted one keeps
the ports its ``cluster.json`` records. ``up`` on a partly running cluster starts only the
nodes that are down, as ``docker compose up`` does, so a node killed by a test or a crash
comes back with one command; ``stop``/``start``/``restart NODE`` act on one node. Stopping
goes brokers first, while the controllers can still move their leaderships, then
controllers; a second Ctrl-C kills what still runs.

``up --secure`` makes a new cluster that serves only mutual TLS: a throwaway CA, a certificate
per node and for the ``admin`` client, an encrypted Raft quorum, and ``client-secure.json`` in
the data dir, which every later command run against that data dir picks up
(``cli/client_config.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from cli.bootstrap import data_dir
from cli.output import emit, plural, table
from server_common.client_security import CLIENT_CONFIG_ENV
from server_common.local_cluster import (
    CLUSTER_FILE,
    DEFAULT_PORT_BASE,
    LocalCluster,
    Node,
    StopInterrupted,
    killed_message,
    wait_ready,
    wait_serving,
)

PORT_BASE_ENV = "KRAFTLOG_PORT_BASE"
EXIT_INTERRUPTED = 130  # as a shell reports a process ended by SIGINT


def port_base() -> int | None:
    """Where a new cluster's stable ports start: ``$KRAFTLOG_PORT_BASE``, else 9092; None
    (free ports) for 0."""
    raw = os.environ.get(PORT_BASE_ENV, "").strip()
    if not raw:
        return DEFAULT_PORT_BASE
    try:
        base = int(raw)
    except ValueError:
        raise ValueError(f"{PORT_BASE_ENV}={raw!r} is not a port: give the first broker port, such as {DEFAULT_PORT_BASE}, or 0 for free ports") from None
    return base or None


def check_ports_free(cluster: LocalCluster, nodes: list[Node], directory: Path) -> None:
    """The down ``nodes`` restart as recorded: no other process may hold their ports (a
    controller's ports are part of the quorum's identity, so they cannot move)."""
    taken = cluster.taken_ports_of(nodes)
    if taken:
        raise ValueError(
            f"cannot restart the cluster in {directory}: other processes hold its recorded ports {', '.join(taken)}; "
            f"stop them ('ss -ltnp' shows which) or start a new cluster with another --data-dir"
        )


def note_recorded_size(cluster: LocalCluster, args: argparse.Namespace) -> None:
    if (args.controllers, args.brokers) != (len(cluster.controllers), len(cluster.brokers)):
        print(f"restarting the recorded cluster ({plural(len(cluster.controllers), 'controller')}, {plural(len(cluster.brokers), 'broker')}); --controllers and --brokers apply to new clusters only")


def start_down_nodes(cluster: LocalCluster, directory: Path, args: argparse.Namespace) -> int:
    """``up`` on a cluster part of which runs: start the nodes that are down, in the
    background (the running ones belong to whichever command started them, which also stops
    them), leave the running ones alone, and wait until the cluster is ready again."""
    down_nodes = cluster.down_nodes()
    if not down_nodes:
        print(f"every node of the cluster in {directory} runs already; nothing to start (bootstrap {cluster.bootstrap})")
        return 0
    check_ports_free(cluster, down_nodes, directory)
    running = [n.name for n in cluster.nodes if n not in down_nodes]
    print(f"starting {', '.join(n.name for n in down_nodes)} in the background; leaving {', '.join(running)} running", flush=True)
    for node in down_nodes:
        cluster.start_node(node, detach=True)
    wait_serving(cluster, down_nodes)
    wait_ready(cluster)
    print(ready_line(cluster), flush=True)
    if not args.detach:
        print(f"the cluster runs in the background: stop it with kraftlog cluster down --data-dir {directory}")
    return 0


class Interrupts:
    """Signal handler for ``cluster up`` and ``cluster down``: counts SIGINT, SIGTERM and SIGHUP and
    raises KeyboardInterrupt, so the first stops the cluster in order and a second, arriving
    while the demo winds down, makes the stop a kill."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1
        raise KeyboardInterrupt


def catch_interrupts() -> Interrupts:
    """Install ``Interrupts`` for SIGINT, SIGTERM and SIGHUP. Set explicitly because Python
    leaves SIGINT ignored when the shell that started it did (a background job), and a stop
    must still be interruptible then."""
    interrupts = Interrupts()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupts)
    return interrupts


def say(line: str) -> None:
    """Print for the person at the terminal; a stdout that is gone (a closed pipe, a hung-up
    terminal) must never keep the cluster from stopping."""
    with contextlib.suppress(OSError):
        print(line, flush=True)


def stop_in_order(cluster: LocalCluster, interrupt_hint: str) -> bool:
    """``cluster.stop()`` with what it does and what it took printed; False when an interrupt
    made it kill the processes instead."""
    started_s = time.monotonic()
    try:
        say(f"stopping brokers (controlled shutdown), then controllers; {interrupt_hint}")
        cluster.stop()
    except StopInterrupted as interrupted:
        say(f"interrupted: {interrupted}")
        return False
    except KeyboardInterrupt:  # before the stop began
        say(f"interrupted: {killed_message(cluster.kill_all())}")
        return False
    say(f"stopped in {time.monotonic() - started_s:.1f}s")
    return True


def check_data_dir(directory: Path) -> None:
    """A --data-dir that cannot hold a cluster, said in one line before anything is created:
    a file where the directory (or a folder above it) should be, or a place not writable."""
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    if not existing.is_dir():
        where = "it" if existing == directory else f"{existing}, on its path,"
        raise ValueError(f"--data-dir {directory}: {where} is a file, not a directory: give a directory (it is created if missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--data-dir {directory}: {existing} is not writable by this user: give a directory you can write to")


def up(args: argparse.Namespace) -> int:
    if args.controllers < 1 or args.brokers < 1:
        raise ValueError("a cluster needs at least one controller and one broker")
    directory = data_dir(args.data_dir)
    check_data_dir(directory)
    restart = (directory / CLUSTER_FILE).exists()
    try:
        cluster = LocalCluster.create(directory, args.controllers, args.brokers, port_base=port_base(), secure=args.secure)
    except OSError as exc:  # what check_data_dir cannot foresee (a full disk, a read-only file system)
        raise ValueError(f"--data-dir {directory}: cannot lay out the cluster there: {exc.strerror or exc}"
                         f"{f' ({exc.filename})' if exc.filename else ''}: give a directory you can write to") from None
    if cluster.secure:
        # This command's own clients (the readiness checks, the demo) use the admin identity too.
        os.environ[CLIENT_CONFIG_ENV] = str(cluster.client_config_path.resolve())
    if restart:
        if len(cluster.down_nodes()) < len(cluster.nodes):
            return start_down_nodes(cluster, directory, args)
        check_ports_free(cluster, cluster.nodes, directory)
        note_recorded_size(cluster, args)
    if args.metrics:
        cluster.give_metrics_ports()
    for moved in cluster.moved_ports:
        print(moved.describe())
    if cluster.moved_ports:
        print(f"(cluster.json records the ports used; {PORT_BASE_ENV}=N lays a new cluster out from port N instead)")
    interrupts = catch_interrupts()
    console = None
    print(f"starting {plural(len(cluster.controllers), 'controller')} and {plural(len(cluster.brokers), 'broker')} in {directory} (logs in {directory / 'logs'})", flush=True)
    try:
        cluster.start(detach=args.detach)
        wait_ready(cluster)
        print(ready_line(cluster), flush=True)
        if args.console is not None:
            from cli.console.command import start_beside

            console, url = start_beside(directory, args.console, args.detach)
            print(f"console: {url}", flush=True)
        if cluster.secure:
            print(f"secure: mutual TLS on every port, Raft links over mutual TLS and encrypted with a shared secret; commands with --data-dir {directory} use "
                  f"{cluster.client_config_path} (other clients: --command-config {cluster.client_config_path.resolve()})", flush=True)
            if any(n.metrics_port for n in cluster.nodes):
                tls = cluster.security_dir.resolve()
                print(f"metrics: https with a client certificate, e.g. curl --cacert {tls / 'ca.crt'} --cert {tls / 'admin.crt'} "
                      f"--key {tls / 'admin.key'} https://{cluster.nodes[0].host}:PORT/metrics", flush=True)
        if args.detach:
            return 0
        if args.no_workload:
            print("press Ctrl-C to stop", flush=True)
            while running(cluster):
                threading.Event().wait(1.0)
        else:
            from cli.demo import run_demo

            run_demo(cluster.bootstrap, partitions=len(cluster.brokers), replication_factor=min(3, len(cluster.brokers)),
                     cluster_running=lambda: running(cluster))
    except KeyboardInterrupt:
        pass
    finally:
        stopped_elsewhere = not args.detach and not running(cluster)
        if stopped_elsewhere:
            say(f"every process of the cluster in {directory} has exited (stopped by 'kraftlog cluster down'?); nothing left to stop")
        if console is not None and not args.detach:
            console.terminate()
            console.wait()
        clean = args.detach or stopped_elsewhere or shut_down(cluster, interrupts)
    return 0 if clean else EXIT_INTERRUPTED


def running(cluster: LocalCluster) -> bool:
    """Whether any process this command started still runs."""
    return len(cluster.down_nodes()) < len(cluster.nodes)


def shut_down(cluster: LocalCluster, interrupts: Interrupts) -> bool:
    """Stop the foreground cluster in order, or kill it when a second interrupt has come
    already (while the demo wound down); False when it was killed. The cluster stopped is
    the one the data dir records now: after ``cluster down`` and ``cluster up --detach`` in
    another shell, the processes this command started are gone and the data dir's cluster
    runs on under new pids."""
    recorded = LocalCluster.load(cluster.data_dir)
    if [n.pid for n in recorded.nodes] != [n.pid for n in cluster.nodes]:
        say(f"the cluster in {cluster.data_dir} was restarted by another command since; stopping that one")
        cluster = recorded
    if interrupts.count >= 2:
        say(f"interrupted again: {killed_message(cluster.kill_all())}")
        return False
    return stop_in_order(cluster, "Ctrl-C again kills every process at once")


def down(args: argparse.Namespace) -> int:
    directory = data_dir(args.data_dir)
    cluster = LocalCluster.load(directory)
    from cli.console.command import stop_beside

    if stop_beside(directory):
        print(f"stopped the console of the cluster in {directory}")
    if not running(cluster):
        print(f"the cluster in {directory} is not running; nothing to stop")
        return 0
    catch_interrupts()
    clean = stop_in_order(cluster, "Ctrl-C kills every process at once")
    print(f"stopped the cluster in {directory}")
    return 0 if clean else EXIT_INTERRUPTED


def ready_line(cluster: LocalCluster) -> str:
    """What ``up`` prints once the cluster serves: where kraftlog's and Kafka's clients start."""
    kafka = f"; Kafka clients: bootstrap.servers={cluster.kafka_bootstrap}" if cluster.kafka_bootstrap else ""
    if kafka and cluster.secure:
        kafka += (f" security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-256 ssl.ca.location={cluster.security_dir / 'ca.crt'}"
                  " with a user of `kraftlog users create`")
    return f"cluster ready; bootstrap {cluster.bootstrap}{kafka}"


def status(args: argparse.Namespace) -> int:
    directory = data_dir(args.data_dir)
    cluster = LocalCluster.load(directory)
    down_nodes = cluster.down_nodes()
    rows = [
        {
            "name": n.name, "id": n.node_id, "role": n.role, "address": n.address, "raft_port": n.raft_port or None, "pid": n.pid,
            "running": n not in down_nodes, "state": "down" if n in down_nodes else "running", "metrics_port": n.metrics_port or None,
        }
        for n in cluster.nodes
    ]
    human = table(["NAME", "ADDRESS", "RAFT PORT", "METRICS PORT", "PID", "STATE"],
                  [[r["name"], r["address"], r["raft_port"], r["metrics_port"], r["pid"], r["state"]] for r in rows])
    security = (f"secure: mutual TLS (client certificates required), Raft links over mutual TLS and encrypted; client config {cluster.client_config_path}"
                if cluster.secure else "plaintext: no TLS ('kraftlog cluster up --secure --data-dir NEW_DIR' starts a secure cluster)")
    if not down_nodes:
        summary = f"all {plural(len(cluster.nodes), 'node')} running"
    elif len(down_nodes) == len(cluster.nodes):
        summary = f"the cluster is stopped: kraftlog cluster up --data-dir {directory} starts it"
    else:
        summary = f"down: {', '.join(n.name for n in down_nodes)}; kraftlog cluster up --data-dir {directory} starts the nodes that are down"
    emit(
        args.json,
        {"data_dir": str(directory), "bootstrap": cluster.bootstrap, "kafka_bootstrap": cluster.kafka_bootstrap, "secure": cluster.secure,
         "client_config": str(cluster.client_config_path) if cluster.secure else None, "down": [n.name for n in down_nodes], "nodes": rows},
        f"bootstrap {cluster.bootstrap}\n{security}\n{human}\n{summary}",
    )
    return 0


def stop_one(cluster: LocalCluster, node: Node, kill: bool) -> None:
    """Stop ``node``: SIGTERM (a broker's controlled shutdown moves its leaderships away)
    and SIGKILL after 30 s, or SIGKILL at once with ``kill``."""
    started_s = time.monotonic()
    if kill:
        say(f"killing {node.name} (pid {node.pid}, SIGKILL)")
        cluster.kill(node)
    else:
        say(f"stopping {node.name} (pid {node.pid}, SIGTERM{', controlled shutdown' if node.role == 'broker' else ''}; SIGKILL after 30s)")
        cluster.stop_node(node)
    say(f"{node.name} stopped in {time.monotonic() - started_s:.1f}s")


def start_one(cluster: LocalCluster, node: Node) -> None:
    """Start ``node`` in the background and wait until it serves (a broker registered and
    unfenced, a controller following a Raft leader and caught up with the metadata log;
    not waiting for a controller that cannot join because too few controllers run)."""
    check_ports_free(cluster, [node], cluster.data_dir)
    started_s = time.monotonic()
    cluster.start_node(node, detach=True)
    if node.role == "controller" and (down := controllers_short_of_quorum(cluster)):
        majority = len(cluster.controllers) // 2 + 1
        more = majority - (len(cluster.controllers) - len(down))
        say(f"started {node.name} (pid {node.pid}); it joins the quorum once {majority} of the {len(cluster.controllers)} controllers run, "
            f"and {', '.join(c.name for c in down)} {'is' if len(down) == 1 else 'are'} down: start {more} of them too "
            f"('kraftlog cluster start NAME', or 'kraftlog cluster up --data-dir {cluster.data_dir}' for every node that is down)")
        return
    what = "register and be unfenced" if node.role == "broker" else "join the quorum"
    say(f"started {node.name} (pid {node.pid}); waiting for it to {what} (log {cluster.log_path(node)})")
    wait_serving(cluster, [node])
    say(f"{node.name} is back in {time.monotonic() - started_s:.1f}s")


def controllers_short_of_quorum(cluster: LocalCluster) -> list[Node]:
    """The controllers that are down when too few run for a quorum (none when enough run)."""
    down = [c for c in cluster.controllers if not cluster.is_running(c)]
    return down if len(cluster.controllers) - len(down) <= len(cluster.controllers) // 2 else []


def check_quorum_runs(cluster: LocalCluster, node: Node) -> None:
    """A broker registers with the controller quorum before it serves: with a majority of
    the controllers down it would wait its full minute for nothing, so say which to start."""
    if node.role != "broker":
        return
    if down := controllers_short_of_quorum(cluster):
        raise ValueError(
            f"{node.name} needs a majority of the controllers to register, and {', '.join(c.name for c in down)} "
            f"{'is' if len(down) == 1 else 'are'} down: start them first ('kraftlog cluster up --data-dir {cluster.data_dir}' "
            f"starts every node that is down)"
        )


def load_node(args: argparse.Namespace) -> tuple[LocalCluster, Node]:
    cluster = LocalCluster.load(data_dir(args.data_dir))
    return cluster, cluster.node_named(args.node)


def stop_node(args: argparse.Namespace) -> int:
    cluster, node = load_node(args)
    if not cluster.is_running(node):
        say(f"{node.name} is not running; nothing to stop")
        return 0
    stop_one(cluster, node, args.kill)
    return 0


def start_node(args: argparse.Namespace) -> int:
    cluster, node = load_node(args)
    if cluster.is_running(node):
        say(f"{node.name} runs already (pid {node.pid}); nothing to start (kraftlog cluster restart {node.name} restarts it)")
        return 0
    check_quorum_runs(cluster, node)
    start_one(cluster, node)
    return 0


def restart_node(args: argparse.Namespace) -> int:
    cluster, node = load_node(args)
    check_quorum_runs(cluster, node)
    if cluster.is_running(node):
        stop_one(cluster, node, args.kill)
    else:
        say(f"{node.name} is not running; starting it")
    start_one(cluster, node)
    return 0





def add_controller_to(cluster: LocalCluster, catch_up_timeout_s: float = 30.0, detach: bool = True):
    """Start a new controller (the next unused id, free ports) as an observer, wait until the
    active controller has made it a voter (it must catch up first), then record it as a voter
    in cluster.json, so that restarts and brokers use the new voter set. On failure the new
    controller is stopped and forgotten, and the quorum is left as it was. Returns (node,
    QuorumChangeResponse)."""
    from metadata_quorum.controller_client import ControllerClient, ControllerError

    voters = cluster.quorum
    node = cluster.new_controller()
    say(f"starting {node.name} as an observer (raft {node.host}:{node.raft_port}, grpc {node.address}; log {cluster.log_path(node)})")
    cluster.start_node(node, detach=detach)
    try:
        with ControllerClient(voters, timeout_s=catch_up_timeout_s + 30) as client:
            response = client.add_controller(node.node_id, node.host, node.raft_port, node.port, catch_up_timeout_s)
    except (ControllerError, KeyboardInterrupt):
        say(f"adding {node.name} failed: stopping it and leaving the quorum as it was")
        cluster.stop_node(node)
        with contextlib.suppress(ControllerError), ControllerClient(voters, timeout_s=10) as client:
            client.remove_controller(node.node_id)  # its observer registration, if it got that far
        cluster.forget(node)
        raise
    cluster.joined(node)
    return node, response


def remove_controller_from(cluster: LocalCluster, node: Node):
    """Remove ``node`` from the quorum (the active one hands over first), stop its process
    and drop it from cluster.json (its directory is kept, with its log). Returns the
    QuorumChangeResponse."""
    from metadata_quorum.controller_client import ControllerClient

    if node.role != "controller":
        raise ValueError(f"{node.name} is a broker: give a controller (controller-N, as 'kraftlog cluster status' names them)")
    others = ",".join(f"{c.node_id}@{c.host}:{c.raft_port}:{c.port}" for c in cluster.controllers if c is not node and not c.joining)
    with ControllerClient(others or cluster.quorum) as client:
        response = client.remove_controller(node.node_id)
    if cluster.is_running(node):
        stop_one(cluster, node, kill=False)
    cluster.forget(node)
    return response


def add_controller(args: argparse.Namespace) -> int:
    from cli.quorum_cmd import report_quorum

    cluster = LocalCluster.load(data_dir(args.data_dir))
    node, response = add_controller_to(cluster, args.catch_up_timeout_s)
    report_quorum(args.json, f"{node.name} is a voter; cluster.json names the voters {cluster.quorum}", response)
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    from cli.quorum_cmd import report_quorum

    cluster, node = load_node(args)
    response = remove_controller_from(cluster, node)
    report_quorum(args.json, f"{node.name} left the quorum and was stopped; cluster.json names the voters {cluster.quorum}", response)
    return 0
