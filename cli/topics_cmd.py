"""``kraftlog topics ...`` and ``kraftlog quorum describe``.

Writes go to the active controller (found through any broker's metadata answer). ``topics
describe`` takes leaders, epochs, replica sets and reassignments from the controllers and the
per-replica log state (HW, LEO, lag) from the brokers themselves (see cli/partition_view.py).
"""

from __future__ import annotations

import argparse

from cli.admin_clients import open_clients, replica_logs
from cli.bootstrap import resolve_bootstrap
from cli.output import emit, plural, table
from cli.partition_view import describe_rows, ids, replica_cell, status_notes
from server_common.internal_topics import deletion_refusal, repartition_refusal

def _parse_configs(pairs: list[str]) -> tuple[dict[str, str], list[str]]:
    """``KEY=VALUE`` sets a config, ``KEY=`` removes it."""
    set_configs: dict[str, str] = {}
    delete: list[str] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config '{pair}' is not KEY=VALUE (for example --config retention.ms=86400000)")
        if value == "":
            delete.append(key)
        else:
            set_configs[key] = value
    return set_configs, delete


def create(args: argparse.Namespace) -> int:
    configs, delete = _parse_configs(args.config)
    if delete:
        raise ValueError(f"--config {delete[0]}= has no value: give one, or leave the key out to use its default")
    admin, controller = open_clients(args)
    with admin, controller:
        topic_id = controller.create_topic(args.name, args.partitions, args.replication_factor, configs)
    emit(args.json, {"name": args.name, "topic_id": topic_id, "partitions": args.partitions, "replication_factor": args.replication_factor},
         f"created topic {args.name} ({plural(args.partitions, 'partition')}, replication factor {args.replication_factor})")
    return 0


def delete(args: argparse.Namespace) -> int:
    if (refusal := deletion_refusal(args.name)) is not None:
        raise ValueError(refusal)
    admin, controller = open_clients(args)
    with admin, controller:
        controller.delete_topics([args.name])
    emit(args.json, {"deleted": args.name}, f"deleted topic {args.name}")
    return 0


def alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config:
        raise ValueError("nothing to change: give --partitions N and/or --config KEY=VALUE")
    if args.partitions is not None and (refusal := repartition_refusal(args.name)) is not None:
        raise ValueError(refusal)
    set_configs, delete_keys = _parse_configs(args.config)
    admin, controller = open_clients(args)
    with admin, controller:
        if args.partitions is not None:
            controller.create_partitions({args.name: args.partitions})
        if set_configs or delete_keys:
            controller.alter_configs(args.name, set_configs, delete_keys)
    changes = ([f"partitions={args.partitions}"] if args.partitions is not None else []) + args.config
    emit(args.json, {"topic": args.name, "changes": changes}, f"altered topic {args.name}: {', '.join(changes)}")
    return 0


def list_topics(args: argparse.Namespace) -> int:
    from data_plane.client import Admin

    with Admin(resolve_bootstrap(args.bootstrap, args.data_dir)) as admin:
        topics = admin.describe_topics()
    rows = [{"name": t.name, "partitions": len(t.partitions), "replication_factor": _rf(t)} for t in sorted(topics.values(), key=lambda t: t.name)]
    emit(args.json, rows, table(["TOPIC", "PARTITIONS", "RF"], [[r["name"], r["partitions"], r["replication_factor"]] for r in rows]) if rows else "no topics")
    return 0


def _rf(topic) -> int:
    return max((len(p.replicas) for p in topic.partitions.values()), default=0)


def describe(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    with admin, controller:
        cluster = controller.describe_cluster()
        topics = [t for t in cluster.topics if args.name in (None, t.name)]
        if args.name and not topics:
            raise ValueError(f"topic '{args.name}' does not exist; list topics with `kraftlog topics list`")
        logs = replica_logs(cluster.brokers, [args.name] if args.name else ())
    rows = [
        r for r in describe_rows(topics, logs)
        if (not args.under_replicated or r["under_replicated"]) and (not args.offline or r["offline"])
    ]
    human = table(
        ["TOPIC", "PARTITION", "LEADER", "EPOCH", "P.EPOCH", "REPLICAS", "ISR", "HW", "LSO", "LEO", "REPLICA LEO(LAG)", "STATUS"],
        [[r["topic"], r["partition"], r["leader"] if r["leader"] >= 0 else "none", r["leader_epoch"], r["partition_epoch"], ids(r["replicas"]), ids(r["isr"]),
          r["high_watermark"], r["last_stable_offset"], r["log_end_offset"], " ".join(replica_cell(s) for s in r["replica_state"]), status_notes(r)]
         for r in rows],
    ) if rows else "no topics"
    if rows or args.json or not (args.under_replicated or args.offline):
        emit(args.json, rows, human)
    # else: a healthy cluster prints nothing for --under-replicated / --offline, as Kafka's
    # --under-replicated-partitions does, so scripts and watch loops can test for empty output
    return 0


def describe_configs(args: argparse.Namespace) -> int:
    """Every config key of the topic(s) with its effective value and where it comes from."""
    if args.name and args.topic_option and args.name != args.topic_option:
        raise ValueError(f"two topics given ({args.name} and --topic {args.topic_option}): give one")
    name = args.name or args.topic_option
    admin, controller = open_clients(args)
    with admin, controller:
        configs = controller.describe_configs([name] if name else [])
    rows = [
        {"topic": topic, "key": e.key, "value": e.value, "source": "default" if e.is_default else "topic override"}
        for topic, entries in sorted(configs.items()) for e in entries
    ]
    human = table(["TOPIC", "CONFIG", "VALUE", "SOURCE"], [[r["topic"], r["key"], r["value"], r["source"]] for r in rows]) if rows else "no topics"
    emit(args.json, rows, human)
    return 0


def quorum_describe(args: argparse.Namespace) -> int:
    admin, controller = open_clients(args)
    from metadata_quorum.controller_client import ControllerError

    with admin, controller:
        members = controller.describe_quorum()
        try:  # new controllers need it (--cluster-id); a read, refused while no controller has caught up
            cluster_id = controller.describe_cluster().cluster_id
        except ControllerError:
            cluster_id = None
    rows = [{
        "controller_id": m.controller_id, "role": m.role or "voter", "state": m.state, "raft_address": m.raft_address, "grpc_address": m.grpc_address,
        "raft_term": m.raft_term, "commit_index": m.commit_index, "last_applied": m.last_applied,
        "lag": m.lag if m.lag >= 0 else None, "reachable": m.connected, "serves_reads": m.caught_up,
    } for m in sorted(members, key=lambda m: m.controller_id)]
    leader = next((r["controller_id"] for r in rows if r["state"] == "leader"), None)
    human = f"cluster id: {cluster_id or 'unknown'}\nactive controller: {leader if leader is not None else 'none (no quorum?)'}\n" + table(
        ["ID", "ROLE", "STATE", "RAFT ADDRESS", "GRPC ADDRESS", "TERM", "COMMIT INDEX", "APPLIED", "LAG", "REACHABLE", "SERVES READS"],
        [[r["controller_id"], r["role"], r["state"], r["raft_address"], r["grpc_address"], r["raft_term"], r["commit_index"], r["last_applied"], r["lag"],
          r["reachable"], r["serves_reads"]] for r in rows],
    )
    emit(args.json, {"cluster_id": cluster_id, "active_controller": leader, "controllers": rows}, human)
    return 0
