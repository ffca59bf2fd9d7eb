"""Where client commands find the cluster: ``--bootstrap``, then ``KRAFTLOG_BOOTSTRAP``, then the
``cluster.json`` of a local cluster (``--data-dir``, ``KRAFTLOG_DATA_DIR`` or ``./kraftlog-data``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from data_plane.client.metadata_cache import parse_bootstrap
from server_common.errors import ErrorCode

DEFAULT_DATA_DIR = Path("kraftlog-data")


class BootstrapError(Exception):
    """No way to find the cluster; the message says how to give one."""


def data_dir(explicit: Path | None) -> Path:
    return explicit or Path(os.environ.get("KRAFTLOG_DATA_DIR", DEFAULT_DATA_DIR))


def resolve_bootstrap(explicit: str | None, data_dir_arg: Path | None) -> str:
    """``explicit`` is the --bootstrap value (None when not given); an empty one is an error,
    never a silent fall back to another cluster."""
    if explicit is not None:
        if not explicit.strip(" ,"):
            raise BootstrapError("--bootstrap is empty: pass host:port[,host:port...] of one or more brokers, or leave it out to use the local cluster")
        try:
            parse_bootstrap(explicit)
        except ValueError as exc:
            raise BootstrapError(f"--bootstrap {explicit!r}: {exc}") from None
        return explicit
    env = os.environ.get("KRAFTLOG_BOOTSTRAP")
    if env:
        return env
    layout = data_dir(data_dir_arg) / "cluster.json"
    try:
        return json.loads(layout.read_text())["bootstrap"]
    except FileNotFoundError:
        raise BootstrapError(
            f"no cluster to talk to: pass --bootstrap host:port[,...], set KRAFTLOG_BOOTSTRAP, "
            f"or start a local cluster with 'kraftlog cluster up' (looked for {layout})"
        ) from None
    except (KeyError, json.JSONDecodeError):
        raise BootstrapError(f"{layout} is not a kraftlog cluster file: pass --bootstrap host:port instead") from None


def stopped_local_cluster(error: BaseException, explicit: str | None, data_dir_arg: Path | None) -> str | None:
    """For a command that found no broker at the addresses of the local cluster's
    cluster.json: when that cluster's brokers are all down, the one thing to say (it is
    stopped, and how to start it) instead of a connection error per address. None otherwise."""
    from server_common.local_cluster import CLUSTER_FILE, LocalCluster

    if getattr(error, "code", None) != "NO_BROKER_REACHABLE" or explicit is not None or os.environ.get("KRAFTLOG_BOOTSTRAP"):
        return None
    directory = data_dir(data_dir_arg)
    if not (directory / CLUSTER_FILE).exists():
        return None
    cluster = LocalCluster.load(directory)
    if any(cluster.is_running(b) for b in cluster.brokers):
        return None
    return (f"the local cluster in {directory} is stopped (no broker answers at {cluster.bootstrap}): "
            f"start it with 'kraftlog cluster up --data-dir {directory}' (it keeps its data)")


def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The topic's partition numbers, sorted; a missing topic is a BootstrapError saying how
    to create it (instead of a producer waiting max_block_ms for it to appear)."""
    return sorted(topic_partitions(bootstrap, topic))


def topic_partitions(bootstrap: str, topic: str) -> dict:
    """The topic's partitions (``PartitionDescription`` by number: leader, replicas, ISR) as
    a broker knows them; a missing topic is a BootstrapError saying how to create it."""
    from data_plane.client import Admin, KraftlogError

    with Admin(bootstrap) as admin:
        try:
            return admin.describe_topics([topic])[topic].partitions
        except KraftlogError as exc:
            if exc.error is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
    raise BootstrapError(f"topic {topic!r} does not exist: create it with 'kraftlog topics create {topic} --partitions N', or check the name ('kraftlog topics list')")


def check_partition(topic: str, partition: int | None, partitions: list[int]) -> None:
    """A --partition the topic does not have is an error naming the ones it has."""
    if partition is not None and partition not in partitions:
        raise ValueError(f"{topic} has no partition {partition}; it has partitions 0..{len(partitions) - 1}")
