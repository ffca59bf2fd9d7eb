"""How admin commands show partitions: the controller's PartitionState joined with the log
state each broker reports for its replicas. Pure: protobuf messages in, rows out.

Definitions (as Kafka's tools use them):

- a replica's **lag** is the leader's log end offset minus the replica's own (never below
  0), the figure Kafka's replica fetcher reports; the leader's is 0. It is unknown ("-")
  when the leader's or the replica's broker did not answer.
- **under-replicated**: the ISR is smaller than the replication factor, which during a
  reassignment counts the target replicas only (``replicas - adding``), as kafka-topics does.
- **offline**: no leader.
- **eligible** (ELR, KIP-966): replicas out of the ISR that hold everything up to the HW,
  elected when the ISR is empty; **last-known eligible**: replicas that lost that standing
  through an unclean shutdown (see docs/operations.md).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from kraftlog_proto import broker_pb2
from kraftlog_proto import controller_pb2 as pb
from server_common.errors import ErrorCode

Row = dict[str, Any]


def ids(values: Sequence[int]) -> str:
    return ",".join(map(str, values)) or "-"


def partition_fields(state: pb.PartitionState) -> Row:
    """The controller's view of one partition as plain JSON-able fields."""
    return {
        "topic": state.topic,
        "partition": state.partition,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "partition_epoch": state.partition_epoch,
        "replicas": list(state.replicas),
        "isr": list(state.isr),
        "adding_replicas": list(state.adding_replicas),
        "removing_replicas": list(state.removing_replicas),
        "unclean_leader_elections": state.unclean_leader_elections,
        "eligible_leader_replicas": list(state.eligible_leader_replicas),
        "last_known_elr": list(state.last_known_elr),
    }


def _replica_status(answered: bool, log: broker_pb2.PartitionLogState | None) -> str:
    if not answered:
        return "unreachable"
    if log is None:
        return "no log"
    return "storage error" if log.error_code == ErrorCode.STORAGE_ERROR else "ok"


def describe_rows(topics: Sequence[pb.TopicDescription], logs: Mapping[int, broker_pb2.DescribeLogsResponse]) -> list[Row]:
    """One row per partition: the controller's state, the leader's HW/LEO/log start, and per
    replica its own LEO and lag behind the leader (``logs``: the brokers that answered)."""
    hosted = {(p.topic, p.partition, broker_id): p for broker_id, answer in logs.items() for p in answer.partitions}
    rows = []
    for topic in sorted(topics, key=lambda t: t.name):
        for state in sorted(topic.partitions, key=lambda s: s.partition):
            row = partition_fields(state)
            leader_log = hosted.get((topic.name, state.partition, state.leader))
            leader_leo = leader_log.log_end_offset if leader_log else None
            replica_state = []
            for broker_id in state.replicas:
                log = hosted.get((topic.name, state.partition, broker_id))
                leo = log.log_end_offset if log else None
                replica_state.append({
                    "broker_id": broker_id,
                    "log_end_offset": leo,
                    "lag": max(0, leader_leo - leo) if leader_leo is not None and leo is not None else None,
                    "in_sync": broker_id in state.isr,
                    "status": _replica_status(broker_id in logs, log),
                    "damaged_ranges": list(log.damaged_ranges) if log else [],
                })
            replication_factor = len(state.replicas) - len(state.adding_replicas)
            row |= {
                "high_watermark": leader_log.high_watermark if leader_log else None,
                "last_stable_offset": leader_log.last_stable_offset if leader_log else None,
                "log_end_offset": leader_leo,
                "log_start_offset": leader_log.log_start_offset if leader_log else None,
                "replica_state": replica_state,
                "offline": state.leader < 0,
                "under_replicated": len(state.isr) < replication_factor,
            }
            rows.append(row)
    return rows


def status_notes(row: Row) -> str:
    """What needs attention, in a few words: offline, under-replicated, reassigning, unclean,
    damaged ranges of a replica (``broker 1 repairing 4-7``, ``broker 1 corrupt 4-7`` when lost)."""
    notes = []
    if row["offline"]:
        notes.append("offline")
    if row["under_replicated"]:
        notes.append("under-replicated")
    if row["adding_replicas"] or row["removing_replicas"]:
        notes.append(f"reassigning +{ids(row['adding_replicas'])} -{ids(row['removing_replicas'])}")
    if row["eligible_leader_replicas"]:
        notes.append(f"eligible: {ids(row['eligible_leader_replicas'])}")
    if row["last_known_elr"]:
        notes.append(f"last-known eligible: {ids(row['last_known_elr'])}")
    if row["unclean_leader_elections"]:
        notes.append(f"unclean elections: {row['unclean_leader_elections']}")
    notes.extend(f"broker {r['broker_id']} {damage}" for r in row["replica_state"] for damage in r.get("damaged_ranges", ()))
    return ", ".join(notes)


def replica_cell(replica: Row) -> str:
    """``broker:LEO(lag)``, or ``broker:status`` when the LEO is unknown."""
    if replica["log_end_offset"] is None:
        return f"{replica['broker_id']}:{replica['status']}"
    lag = "-" if replica["lag"] is None else replica["lag"]
    return f"{replica['broker_id']}:{replica['log_end_offset']}({lag})"
