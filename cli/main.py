"""The ``kraftlog`` command: run nodes, manage a local cluster, administer topics, produce,
consume, inspect the quorum, measure performance and run chaos scenarios.

Every client command takes ``--bootstrap`` (see ``cli/bootstrap.py``), after the command or
before it (``kraftlog --bootstrap X topics list``), and exits non-zero with a one-line message
on any error a user can cause; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Callable

from cli.arg_errors import KraftlogArgumentParser, at_least, parse
from cli.bootstrap import BootstrapError


def _client_options(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
    parser.add_argument("--bootstrap", help="broker addresses host:port[,...] (default: $KRAFTLOG_BOOTSTRAP, then the local cluster)")
    parser.add_argument("--data-dir", type=Path, help="local cluster directory holding cluster.json (default ./kraftlog-data)")
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="client config (JSON or properties: ca_file, cert_file, key_file, username, password); default: "
                             "$KRAFTLOG_CLIENT_CONFIG, then the local cluster's client-secure.json (docs/security.md)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one builder per command group, in the order `--help` lists them."""
    parser = KraftlogArgumentParser(prog="kraftlog", description="A replicated commit log with a Raft metadata quorum.")
    parser.add_argument(
        "--bootstrap", dest="global_bootstrap", metavar="BOOTSTRAP",
        help="broker addresses host:port[,...] for any client command (a command's own --bootstrap wins)",
    )
    parser.add_argument("--command-config", dest="global_command_config", type=Path, metavar="FILE",
                        help="client config file for any command (a command's own --command-config wins)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_node_commands(sub)
    _add_cluster_commands(sub)
    _add_topics_commands(sub)
    _add_data_commands(sub)
    _add_quorum_commands(sub)
    _add_admin_commands(sub)
    _add_perf_commands(sub)

    from chaos.cli import add_subcommand as add_chaos

    add_chaos(sub)
    return parser


def _add_node_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog controller` and `kraftlog broker`: run one node."""
    from data_plane.broker import config as broker_config
    from metadata_quorum import controller_options

    controller = sub.add_parser("controller", help="run one controller (a metadata quorum voter)")
    controller_options.add_arguments(controller)
    controller.set_defaults(func=_run_controller)

    broker = sub.add_parser("broker", help="run one broker")
    broker_config.add_arguments(broker)
    broker.set_defaults(func=_run_broker)


def _add_cluster_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog cluster ...`: a local cluster's processes."""
    from cli import cluster_cmd

    cluster = sub.add_parser("cluster", help="start, stop and inspect a local cluster").add_subparsers(dest="action", required=True)
    up = cluster.add_parser("up", help="start a local cluster (and, unless --detach, a live demo workload)")
    up.add_argument("--controllers", type=int, default=3, help="controllers (metadata quorum voters) of a new cluster (default: %(default)s)")
    up.add_argument("--brokers", type=int, default=3, help="brokers of a new cluster (default: %(default)s)")
    up.add_argument("--data-dir", type=Path, help="cluster directory: data, logs and cluster.json; an existing one restarts its cluster (default ./kraftlog-data)")
    up.add_argument("--detach", action="store_true", help="start the processes in the background and return")
    up.add_argument("--no-workload", action="store_true", help="run the cluster without the demo workload")
    up.add_argument("--secure", action="store_true",
                    help="a new cluster with mutual TLS on every port, the Raft links included: a throwaway CA, node and admin "
                         "certificates and <data-dir>/client-secure.json, which later commands pick up (docs/security.md)")
    up.add_argument("--console", nargs="?", type=int, const=8780, metavar="PORT",
                    help="also serve the web console on localhost (port 8780, or PORT; 0: a free one) and print its URL (docs/console.md)")
    up.add_argument("--metrics", action="store_true", help="serve Prometheus metrics on every node (free ports, kept across restarts; cluster status shows them)")
    up.set_defaults(func=cluster_cmd.up)
    down = cluster.add_parser("down", help="stop a local cluster started with --detach")
    down.add_argument("--data-dir", type=Path, help="directory of the cluster to stop (default ./kraftlog-data)")
    down.set_defaults(func=cluster_cmd.down)
    status = cluster.add_parser("status", help="processes of a local cluster and whether they run")
    status.add_argument("--data-dir", type=Path, help="directory of the cluster to show (default ./kraftlog-data)")
    status.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    status.set_defaults(func=cluster_cmd.status)
    add_controller = cluster.add_parser("add-controller", help="start a new controller and add it to the quorum once it has caught up")
    add_controller.add_argument("--data-dir", type=Path, help="directory of the cluster (default ./kraftlog-data)")
    add_controller.add_argument("--catch-up-timeout-s", type=float, default=30.0, help="how long it may take to catch up (default: %(default)s)")
    add_controller.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    add_controller.set_defaults(func=cluster_cmd.add_controller)
    remove_controller = cluster.add_parser("remove-controller", help="remove a controller from the quorum and stop it")
    remove_controller.add_argument("node", help="the controller as 'kraftlog cluster status' names it: controller-N")
    remove_controller.add_argument("--data-dir", type=Path, help="directory of the cluster (default ./kraftlog-data)")
    remove_controller.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    remove_controller.set_defaults(func=cluster_cmd.remove_controller)
    node_actions = [
        ("stop", cluster_cmd.stop_node, "stop one node of a local cluster (SIGTERM: a broker's controlled shutdown)", "SIGKILL at once instead of a graceful stop"),
        ("start", cluster_cmd.start_node, "start one stopped node of a local cluster and wait until it serves", None),
        ("restart", cluster_cmd.restart_node, "stop one node, start it again and wait until it serves (a broker registered and unfenced)", "stop it with SIGKILL instead of a graceful stop"),
    ]
    for name, func, help_text, kill_help in node_actions:
        action = cluster.add_parser(name, help=help_text)
        action.add_argument("node", help="the node as 'kraftlog cluster status' names it: broker-N or controller-N")
        action.add_argument("--data-dir", type=Path, help="directory of the cluster (default ./kraftlog-data)")
        if kill_help:
            action.add_argument("--kill", action="store_true", help=kill_help)
        action.set_defaults(func=func)


def _add_topics_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog topics ...`."""
    from cli import topics_cmd

    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics").add_subparsers(dest="action", required=True)
    create = topics.add_parser("create", help="create a topic")
    create.add_argument("name", help="topic name")
    create.add_argument("--partitions", type=int, default=1, help="number of partitions (default: %(default)s)")
    create.add_argument("--replication-factor", type=int, default=1, help="replicas of each partition, at most the number of brokers (default: %(default)s)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config, repeatable (keys: docs/operations.md, Topic configs)")
    _client_options(create)
    create.set_defaults(func=topics_cmd.create)
    listing = topics.add_parser("list", help="list topics")
    _client_options(listing)
    listing.set_defaults(func=topics_cmd.list_topics)
    describe = topics.add_parser("describe", help="partitions with leader, epochs, replicas, ISR, HW, LEO and lag")
    describe.add_argument("name", nargs="?", help="topic (default: every topic)")
    describe.add_argument("--under-replicated", action="store_true", help="only partitions whose ISR is smaller than the replicas")
    describe.add_argument("--offline", action="store_true", help="only partitions without a leader")
    _client_options(describe)
    describe.set_defaults(func=topics_cmd.describe)
    describe_configs = topics.add_parser("describe-configs", help="every effective config of a topic and its source (default or topic override)")
    describe_configs.add_argument("name", nargs="?", help="topic (default: every topic)")
    describe_configs.add_argument("--topic", dest="topic_option", metavar="TOPIC", help="the same as the positional topic name")
    _client_options(describe_configs)
    describe_configs.set_defaults(func=topics_cmd.describe_configs)
    delete = topics.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("name", help="topic to delete")
    _client_options(delete)
    delete.set_defaults(func=topics_cmd.delete)
    alter = topics.add_parser("alter", help="add partitions or change configs")
    alter.add_argument("name", help="topic to change")
    alter.add_argument("--partitions", type=int, help="new total partition count (can only grow)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="set a config (KEY= removes it)")
    _client_options(alter)
    alter.set_defaults(func=topics_cmd.alter)


def _add_data_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog produce` and `kraftlog consume`: records from stdin and to stdout."""
    from cli import data_cmd

    produce = sub.add_parser("produce", help="send stdin lines as records")
    produce.add_argument("topic", help="topic to write to")
    produce.add_argument("--acks", choices=["all", "1", "0"], default="all", help="all: wait for the in-sync replicas, 1: the leader only, 0: do not wait (default: %(default)s)")
    produce.add_argument("--key-separator", help="split each line into key and value at the first SEP")
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument("--compression", choices=["none", "lz4", "zstd"], default="none", help="batch compression (default: %(default)s)")
    produce.add_argument("--max-request-size", type=at_least(1), default=data_cmd.MAX_REQUEST_SIZE_DEFAULT, metavar="BYTES",
                         help="the largest record (and request) the producer sends; a batch must also fit the topic's "
                              "max.message.bytes (default: %(default)s)")
    produce.add_argument("--producer-setting", action="append", default=[], metavar="NAME=VALUE",
                         help="any other producer setting, repeatable: " + ", ".join(data_cmd.PRODUCER_SETTINGS)
                              + " (data_plane/client/producer.py documents each)")
    produce.add_argument("--null-marker", metavar="MARK",
                         help="a value (or, with --key-separator, a key) exactly MARK is sent as null: a value of MARK is a "
                              "tombstone, which compaction uses to delete the key")
    _client_options(produce, json_flag=False)
    produce.set_defaults(func=data_cmd.produce)

    consume = sub.add_parser("consume", help="print record values, one per line (null for a null value, a tombstone)")
    consume.add_argument("topic", help="topic to read")
    consume.add_argument("--from-beginning", action="store_true", help="start at the log start (default: only records produced from now on)")
    consume.add_argument("--partition", type=int, help="read only this partition (default: every partition)")
    consume.add_argument("--offset", type=int, help="start offset (with --partition)")
    consume.add_argument("--max-messages", type=at_least(1), help="exit after printing this many records")
    consume.add_argument("--timeout-ms", type=at_least(0), help="exit when no record arrives for this long")
    consume.add_argument("--print-key", action="store_true", help="print each record as KEY<tab>VALUE (null for a null key)")
    consume.add_argument("--group", help="read as a member of this consumer group, committing what it printed every --commit-interval-ms "
                                         "(resumes at the group's committed offsets)")
    consume.add_argument("--commit-interval-ms", type=at_least(1), default=5000,
                         help="with --group: commit what was printed at least this often, however far behind (default: %(default)s)")
    consume.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted",
                         help="read_committed: only committed transactions' records, up to the last stable offset (default: %(default)s, as Kafka's console consumer)")
    _client_options(consume, json_flag=False)
    consume.set_defaults(func=data_cmd.consume)


def _add_quorum_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog quorum ...`: the controller quorum."""
    from cli import quorum_cmd, topics_cmd

    quorum = sub.add_parser("quorum", help="the controller quorum").add_subparsers(dest="action", required=True)
    qdescribe = quorum.add_parser("describe", help="controllers, active controller, term, commit index, lag")
    _client_options(qdescribe)
    qdescribe.set_defaults(func=topics_cmd.quorum_describe)
    quorum_cmd.register(quorum, _client_options)


def _add_admin_commands(sub: argparse._SubParsersAction) -> None:
    """The command groups that register themselves: brokers, groups, transactions, leaders,
    partitions, records, quotas, acls and users."""
    from cli import brokers_cmd, groups_cmd, leaders_cmd, partitions_cmd, records_cmd, transactions_cmd

    brokers_cmd.register(sub, _client_options)

    groups_cmd.register(sub, _client_options)
    transactions_cmd.register(sub, _client_options)
    leaders_cmd.register(sub, _client_options)
    partitions_cmd.register(sub, _client_options)
    records_cmd.register(sub, _client_options)

    from cli import quotas_cmd

    quotas_cmd.register(sub, _client_options)

    from cli import acls_cmd, users_cmd
    from cli.console.command import register as register_console

    acls_cmd.register(sub, _client_options)
    users_cmd.register(sub, _client_options)
    register_console(sub, _client_options)


def _add_perf_commands(sub: argparse._SubParsersAction) -> None:
    """`kraftlog perf ...`: throughput and latency measurements."""
    from cli import perf_cmd, perf_e2e, perf_latency

    perf = sub.add_parser("perf", help="measure throughput and latency").add_subparsers(dest="action", required=True)
    pprod = perf.add_parser("produce", help="producer throughput and latency")
    pprod.add_argument("--topic", required=True, help="an existing topic to write to")
    pprod.add_argument("--num-records", type=int, default=1_000_000, help="records to send (default: %(default)s)")
    pprod.add_argument("--record-size", type=int, default=100, help="bytes per record value (default: %(default)s)")
    pprod.add_argument("--acks", choices=["all", "1", "0"], default="1", help="all: wait for the in-sync replicas, 1: the leader only, 0: do not wait (default: %(default)s)")
    pprod.add_argument("--batch-records", type=int, default=8000, help="records per batch (keep batches under the topic's max.message.bytes)")
    pprod.add_argument("--compression", choices=["none", "lz4", "zstd"], default="none", help="batch compression (default: %(default)s)")
    pprod.add_argument("--transaction-records", type=int, default=0,
                       help="write transactionally, committing every N records (0: idempotent, no transactions; default: %(default)s)")
    _client_options(pprod)
    pprod.set_defaults(func=perf_cmd.produce)
    pcons = perf.add_parser("consume", help="consumer throughput from the earliest offset")
    pcons.add_argument("--topic", required=True, help="an existing topic to read from its earliest offset")
    pcons.add_argument("--num-records", type=int, default=1_000_000, help="records to read before stopping (default: %(default)s)")
    pcons.add_argument("--timeout-ms", type=int, default=30000, help="fail when no record arrives for this long (default: %(default)s)")
    pcons.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted",
                       help="read_committed: only committed transactions, below the LSO (default: %(default)s)")
    pcons.add_argument("--group", help="read as this consumer group, one process per member (cli/perf_group.py), and time its rebalances")
    pcons.add_argument("--members", type=int, default=3, help="with --group: member processes (default: %(default)s)")
    pcons.add_argument("--joins", type=int, default=1, help="with --group: rounds of one more member joining then leaving, each timed (default: %(default)s)")
    _client_options(pcons)
    pcons.set_defaults(func=perf_cmd.consume)
    pcommit = perf.add_parser("commit", help="offset commits per second to one group's coordinator (admin commits to a group without members)")
    pcommit.add_argument("--topic", required=True, help="an existing topic: every request commits all its partitions")
    pcommit.add_argument("--group", default="perf-commit", help="a group without members (default: %(default)s)")
    pcommit.add_argument("--duration", type=float, default=10, help="seconds of committing (default: %(default)s)")
    pcommit.add_argument("--in-flight", type=int, default=8, help="requests outstanding at once (default: %(default)s)")
    _client_options(pcommit)
    pcommit.set_defaults(func=perf_group_commits)
    pe2e = perf.add_parser("e2e", help="end-to-end latency (send to consumer receipt) at a fixed rate")
    pe2e.add_argument("--topic", required=True, help="an existing topic to send through")
    pe2e.add_argument("--rate", type=float, default=1000, help="records per second")
    pe2e.add_argument("--duration", type=float, default=30, help="seconds of sending")
    pe2e.add_argument("--acks", choices=["all", "1", "0"], default="all", help="all: wait for the in-sync replicas, 1: the leader only, 0: do not wait (default: %(default)s)")
    pe2e.add_argument("--record-size", type=int, default=100, help="bytes per record value (default: %(default)s)")
    pe2e.add_argument("--linger-ms", type=float, default=None, help="producer linger (default: the producer's, 5 ms; it holds only records that arrive while their partition has a request in flight; 0 sends each record at once, as Kafka's latency tool does)")
    pe2e.add_argument("--max-in-flight-per-partition", type=int, default=None, help="requests that may carry one partition at once (default: the producer's, 5 with idempotence)")
    _client_options(pe2e)
    pe2e.set_defaults(func=perf_e2e.run)
    perf_latency.add_parser(perf, _client_options)
    pfail = perf.add_parser("failover", help="time from faulting a partition leader to the first acks=all write its successor acknowledges")
    pfail.add_argument("--kills", type=int, default=20, help="rounds (one fault of the current leader each)")
    pfail.add_argument("--mode", choices=["kill", "pause", "shutdown", "partition"], default="kill", help="SIGKILL, SIGSTOP (until a new leader acknowledges), SIGTERM (controlled shutdown) or partition (the leader's network namespace cut from every node and client until a new leader acknowledges; implies --namespaces)")
    pfail.add_argument("--namespaces", action="store_true", help="the throwaway cluster with each node in a network namespace and the chaos harness's 3 s session timeout (root, ip and tc needed), so every mode runs on the same cluster as partition")
    pfail.add_argument("--topic", default="perf-failover", help="one-partition topic, created if missing")
    pfail.add_argument("--replication-factor", type=int, default=3, help="replicas of the topic when this command creates it (default: %(default)s)")
    pfail.add_argument("--min-insync-replicas", type=int, help="default: 2, or 1 with replication factor 1")
    pfail.add_argument("--rate", type=float, default=500, help="records per second of the acks=all load producer")
    pfail.add_argument("--brokers", type=int, default=3, help="brokers of the throwaway cluster (without --data-dir)")
    pfail.add_argument("--round-timeout-s", type=float, default=120, help="limit on each wait of a round")
    pfail.add_argument("--data-dir", type=Path, help="a cluster started with 'kraftlog cluster up --detach' (default: start a throwaway one)")
    pfail.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    pfail.add_argument("--controller", action="store_true",
                       help="kill the active controller instead (SIGKILL; 3 controllers, 1 broker when throwaway): time until a running admin "
                            "client and a fresh CLI process create a topic, split into election, activation and the client's share")
    pfail.set_defaults(func=perf_failover_run)


def perf_failover_run(args: argparse.Namespace) -> int:
    from cli import perf_controller_failover, perf_failover

    return (perf_controller_failover.run if args.controller else perf_failover.run)(args)


def perf_group_commits(args: argparse.Namespace) -> int:
    from cli.perf_group import run_commits

    return run_commits(args)


def _run_controller(args: argparse.Namespace) -> int:
    from metadata_quorum.controller_main import run

    return run(args)


def _run_broker(args: argparse.Namespace) -> int:
    from data_plane.broker.server import run

    return run(args)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors a user can cause: shown as one line, never as a traceback."""
    from data_plane.client.errors import KraftlogError
    from metadata_quorum.controller_client import ControllerError
    from metadata_quorum.topic_config import InvalidConfigError

    return (BootstrapError, KraftlogError, ControllerError, InvalidConfigError, FileNotFoundError, TimeoutError, ValueError)


def _discard_stdout() -> None:
    """stdout's reader is gone: what is still buffered goes to /dev/null, so the interpreter's
    final flush cannot fail and print a traceback on the way out (stderr stays open)."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test capturing output)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if args.global_bootstrap is not None:
        if not hasattr(args, "bootstrap"):
            parser.error(f"'kraftlog {args.command}' does not talk to brokers: drop --bootstrap")
        if args.bootstrap is None:
            args.bootstrap = args.global_bootstrap
    if args.global_command_config is not None and getattr(args, "command_config", None) is None:
        args.command_config = args.global_command_config
    func: Callable[[argparse.Namespace], int] = args.func
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if args.command not in ("broker", "controller"):  # nodes take their TLS and logging from their own options
            from cli.client_config import apply_client_config
            from server_common.logging_setup import configure_logging

            configure_logging(level="WARNING")  # the clients' logs go to stderr, never among the records, tables or JSON on stdout
            # `timeout`, `kill` and a closed terminal stop a command as Ctrl-C does: a consume --group
            # member commits and leaves its group at once (killed, it would hold its partitions for
            # the whole session timeout), a producer delivers what it has taken
            for sig in handlers:
                signal.signal(sig, _interrupt)
            apply_client_config(args)
        code = func(args) or 0
        sys.stdout.flush()  # a reader that is gone (`| head`) shows here, not in the interpreter's final flush
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head and closed early: not an error
        _discard_stdout()
        return 0
    except _user_errors() as exc:
        from cli.bootstrap import stopped_local_cluster

        explained = stopped_local_cluster(exc, getattr(args, "bootstrap", None), getattr(args, "data_dir", None))
        print(f"kraftlog {args.command}: {explained or exc}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in handlers.items():  # main() called in-process (tests) leaves the caller's handlers as they were
            signal.signal(sig, handler)


