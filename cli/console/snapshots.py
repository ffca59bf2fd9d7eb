"""What the console's pages show, as JSON: pure functions from the admin clients' answers
(protobuf messages and the clients' named tuples) to plain dicts. No I/O, no clock: the
gateway (``gateway.py``) makes the calls and passes the answers and the time in.

The partition rows are ``cli/partition_view.describe_rows``, the same rows
``kraftlog topics describe`` prints, so the page and the CLI cannot disagree.
"""

from __future__ import annotations

import base64
from typing import Any, Iterable, Mapping, Sequence

from cli.brokers_cmd import broker_rows
from cli.partition_view import describe_rows
from kraftlog_proto import broker_pb2
from kraftlog_proto import controller_pb2 as pb

Json = dict[str, Any]


def quorum_rows(members: Sequence[pb.QuorumMember]) -> list[Json]:
    """One row per controller: Raft state, term, commit index, whether it serves reads."""
    return [{
        "controller_id": m.controller_id, "state": m.state or "unknown", "grpc_address": m.grpc_address,
        "raft_term": m.raft_term, "commit_index": m.commit_index, "last_applied": m.last_applied,
        "lag": m.lag if m.lag >= 0 else None, "reachable": m.connected, "serves_reads": m.caught_up,
        "status": "unreachable" if not m.connected else "running",
    } for m in sorted(members, key=lambda m: m.controller_id)]


def partition_health(rows: Iterable[Json], min_isr: Mapping[str, int]) -> Json:
    """Counts of under-replicated, under-min-ISR and offline partitions (``min_isr``: each
    topic's min.insync.replicas; 1 when unknown)."""
    under = under_min = offline = 0
    for r in rows:
        under += r["under_replicated"]
        offline += r["offline"]
        under_min += len(r["isr"]) < min_isr.get(r["topic"], 1)
    return {"under_replicated": under, "under_min_isr": under_min, "offline": offline}


def overview(cluster: pb.DescribeClusterResponse, members: Sequence[pb.QuorumMember], rows: Sequence[Json],
             min_isr: Mapping[str, int], unreachable_brokers: Iterable[int]) -> Json:
    """The Overview page: brokers (running, fenced, shutting down, unreachable), controllers,
    the active controller and the partition health counts."""
    unreachable = set(unreachable_brokers)
    brokers = broker_rows(cluster)
    for b in brokers:
        if b["broker_id"] in unreachable and b["state"] == "active":
            b["state"] = "unreachable"
        elif b["state"] == "active":
            b["state"] = "running"
    controllers = quorum_rows(members)
    active = next((c["controller_id"] for c in controllers if c["state"] == "leader"), None)
    return {
        "cluster_id": cluster.cluster_id, "brokers": brokers, "controllers": controllers, "active_controller": active,
        "topics": len(cluster.topics), "partitions": len(rows), "health": partition_health(rows, min_isr),
    }


def topic_list(rows: Sequence[Json], sizes: Mapping[str, int], rates: Mapping[str, float]) -> list[Json]:
    """One row per topic: partitions, replication factor, size on the leaders, records/s,
    and how many of its partitions are under-replicated or offline."""
    topics: dict[str, Json] = {}
    for r in rows:
        t = topics.setdefault(r["topic"], {"name": r["topic"], "partitions": 0, "replication_factor": 0, "under_replicated": 0, "offline": 0})
        t["partitions"] += 1
        t["replication_factor"] = max(t["replication_factor"], len(r["replicas"]))
        t["under_replicated"] += r["under_replicated"]
        t["offline"] += r["offline"]
    for name, t in topics.items():
        t["size_bytes"] = sizes.get(name)
        t["records_per_s"] = rates.get(name)
    return sorted(topics.values(), key=lambda t: t["name"])


def leader_sizes(logs: Mapping[int, broker_pb2.DescribeLogsResponse], rows: Sequence[Json]) -> dict[str, int]:
    """Each topic's bytes on its leaders (one copy of the data, as a person counts size)."""
    leaders = {(r["topic"], r["partition"]): r["leader"] for r in rows}
    sizes: dict[str, int] = {}
    for broker_id, answer in logs.items():
        for p in answer.partitions:
            if leaders.get((p.topic, p.partition)) == broker_id:
                sizes[p.topic] = sizes.get(p.topic, 0) + p.size_bytes
    return sizes


def topic_page(name: str, topics: Sequence[pb.TopicDescription], logs: Mapping[int, broker_pb2.DescribeLogsResponse],
               configs: Sequence[pb.ConfigEntry]) -> Json:
    """A topic's partitions (leader, epoch, ISR, ELR, HW, LEO, lag per replica) and configs
    with their sources."""
    return {
        "name": name,
        "partitions": describe_rows(topics, logs),
        "configs": [{"key": e.key, "value": e.value, "source": "default" if e.is_default else "topic override"} for e in configs],
    }


def _text(data: bytes | None) -> Json | None:
    """Bytes for the page: base64 (the page shows text, JSON or hex from it)."""
    return None if data is None else {"b64": base64.b64encode(data).decode(), "size": len(data)}


def record_json(record: Any) -> Json:
    """One consumed record (``ConsumerRecord``) for the page."""
    return {
        "partition": record.partition, "offset": record.offset, "timestamp_ms": record.timestamp_ms,
        "key": _text(record.key), "value": _text(record.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers],
    }


def matches(record: Any, key_filter: str, value_filter: str, header_filter: str = "") -> bool:
    """The browser's filter: the key contains ``key_filter``, the value contains
    ``value_filter``, and with ``header_filter`` ("name=text", or "name" alone) a header of
    that name whose value contains the text (substrings of the UTF-8 text; empty filters
    match everything)."""
    def contains(data: bytes | None, needle: str) -> bool:
        return not needle or (data is not None and needle.encode() in data)

    name, _, text = header_filter.partition("=")
    header_ok = not header_filter or any(k == name and contains(v, text) for k, v in record.headers)
    return contains(record.key, key_filter) and contains(record.value, value_filter) and header_ok


def group_page(d: Any) -> Json:
    """A described group (``GroupDescription``): members with client id, host and assignment,
    and per partition the committed offset, log end and lag."""
    return {
        "group_id": d.group_id, "state": d.state, "group_epoch": d.group_epoch, "assignor": d.assignor, "coordinator_id": d.coordinator_id,
        "members": [{
            "member_id": m.member_id, "client_id": m.client_id, "host": m.client_host, "member_epoch": m.member_epoch,
            "assignment": [f"{t.topic}-{p}" for t in m.assignment for p in sorted(t.partitions)],
        } for m in d.members],
        "partitions": [p._asdict() for p in d.partitions],
        "total_lag": sum(p.lag or 0 for p in d.partitions),
    }


def transaction_json(d: Any, now_ms: int) -> Json:
    """A described transaction; ``open_for_ms``: how long the open one has been going."""
    return {
        "transactional_id": d.transactional_id, "state": d.state, "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
        "timeout_ms": d.transaction_timeout_ms, "coordinator_id": d.coordinator_id,
        "open_for_ms": now_ms - d.transaction_start_ms if d.transaction_start_ms >= 0 else None,
        "partitions": [f"{t.topic}-{p}" for t in d.topics for p in sorted(t.partitions)],
    }
