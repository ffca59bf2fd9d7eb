"""`topics describe` rows: the controller's partition state joined with each broker's log
state; lag, replica status and the attention notes, including while brokers are down."""

from __future__ import annotations

from cli.partition_view import describe_rows, replica_cell, status_notes
from kraftlog_proto import broker_pb2, common_pb2
from kraftlog_proto import controller_pb2 as pb


def topic(*states: pb.PartitionState) -> pb.TopicDescription:
    return pb.TopicDescription(name="t", topic_id="id", partitions=list(states))


def logs(broker_id: int, leo: int, hw: int = 0, error: int = common_pb2.NONE) -> broker_pb2.DescribeLogsResponse:
    state = broker_pb2.PartitionLogState(topic="t", partition=0, log_end_offset=leo, high_watermark=hw, log_start_offset=0, error_code=error)
    return broker_pb2.DescribeLogsResponse(broker_id=broker_id, partitions=[state])


def test_lag_is_leader_leo_minus_replica_leo_and_unknown_when_a_broker_is_missing():
    state = pb.PartitionState(topic="t", partition=0, leader=1, replicas=[1, 2, 3, 4], isr=[1, 2])
    answers = {1: logs(1, 100, hw=90), 2: logs(2, 90), 3: broker_pb2.DescribeLogsResponse(broker_id=3)}  # broker 4 did not answer
    (row,) = describe_rows([topic(state)], answers)
    assert (row["high_watermark"], row["log_end_offset"]) == (90, 100)
    assert [(r["broker_id"], r["log_end_offset"], r["lag"], r["status"]) for r in row["replica_state"]] == [
        (1, 100, 0, "ok"), (2, 90, 10, "ok"), (3, None, None, "no log"), (4, None, None, "unreachable"),
    ]
    assert [replica_cell(r) for r in row["replica_state"]] == ["1:100(0)", "2:90(10)", "3:no log", "4:unreachable"]
    assert row["under_replicated"] and not row["offline"]


def test_a_follower_ahead_of_a_new_leader_shows_no_negative_lag_and_storage_errors_show():
    state = pb.PartitionState(topic="t", partition=0, leader=1, replicas=[1, 2], isr=[1, 2])
    (row,) = describe_rows([topic(state)], {1: logs(1, 50), 2: logs(2, 60, error=common_pb2.STORAGE_ERROR)})
    assert [(r["lag"], r["status"]) for r in row["replica_state"]] == [(0, "ok"), (0, "storage error")]


def test_under_replicated_counts_the_target_replicas_during_a_reassignment():
    in_sync = pb.PartitionState(topic="t", partition=0, leader=1, replicas=[1, 2, 4, 3], isr=[1, 2, 3], adding_replicas=[4], removing_replicas=[3])
    lagging = pb.PartitionState(topic="t", partition=1, leader=1, replicas=[1, 2, 4, 3], isr=[1, 3], adding_replicas=[4], removing_replicas=[3])
    rows = describe_rows([topic(in_sync, lagging)], {})
    assert [r["under_replicated"] for r in rows] == [False, True]
    assert status_notes(rows[0]) == "reassigning +4 -3"
    assert status_notes(rows[1]) == "under-replicated, reassigning +4 -3"


def test_offline_partition_and_unclean_count_are_noted():
    state = pb.PartitionState(topic="t", partition=0, leader=-1, replicas=[1, 2], isr=[1], unclean_leader_elections=2)
    (row,) = describe_rows([topic(state)], {2: logs(2, 5)})
    assert row["offline"] and row["high_watermark"] is None
    assert status_notes(row) == "offline, under-replicated, unclean elections: 2"
    assert row["replica_state"][1]["lag"] is None, "no leader: no lag"


def test_eligible_and_last_known_eligible_replicas_are_noted():
    state = pb.PartitionState(topic="t", partition=0, leader=-1, replicas=[1, 2, 3], isr=[], eligible_leader_replicas=[2], last_known_elr=[1])
    (row,) = describe_rows([topic(state)], {})
    assert (row["eligible_leader_replicas"], row["last_known_elr"]) == ([2], [1])
    assert status_notes(row) == "offline, under-replicated, eligible: 2, last-known eligible: 1"
