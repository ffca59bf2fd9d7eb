"""What ``kraftlog produce`` and ``consume`` say before sending or reading
(cli/partition_check.py): which partitions refuse them now, and why."""

from __future__ import annotations

from data_plane.client.admin import PartitionDescription
from cli.partition_check import refusal_message, refusals, unread_message, warning_message


def partition(number: int, leader: int, isr: tuple[int, ...]) -> PartitionDescription:
    return PartitionDescription(number, leader, 0, (1, 2, 3), isr, ())


PARTITIONS = {0: partition(0, 1, (1,)), 1: partition(1, -1, ()), 2: partition(2, 2, (2, 3))}


def test_acks_all_is_refused_below_min_insync_replicas_and_without_a_leader() -> None:
    refused = refusals(PARTITIONS, [0, 1, 2], min_insync_replicas=2)
    assert set(refused) == {0, 1}
    assert refused[0].startswith("has 1 in-sync replica(s) (broker 1), fewer than min.insync.replicas=2")
    assert refused[1] == "has no leader"


def test_other_acks_are_refused_only_without_a_leader() -> None:
    assert refusals(PARTITIONS, [0, 1, 2], min_insync_replicas=None) == {1: "has no leader"}


def test_only_the_targets_are_looked_at() -> None:
    assert refusals(PARTITIONS, [2], min_insync_replicas=2) == {}
    assert set(refusals(PARTITIONS, [0], min_insync_replicas=2)) == {0}


def test_the_messages_name_each_partition_and_what_to_do() -> None:
    refused = refusals(PARTITIONS, [0, 1], min_insync_replicas=2)
    line = refusal_message("events", refused)
    assert line.startswith("nothing can be written now: events-0 has 1 in-sync replica(s)") and "; events-1 has no leader" in line
    assert "kraftlog cluster up" in line and line.endswith("or produce with --acks 1")
    assert not refusal_message("events", {1: "has no leader"}).endswith("--acks 1")  # a lower acks would not help
    assert warning_message("events", {1: "has no leader"}).startswith("warning: events-1 has no leader: records sent there")


def test_a_read_without_some_partitions_says_which_are_left_out() -> None:
    assert refusal_message("events", {1: "has no leader"}, "read").startswith("nothing can be read now: events-1 has no leader: start")
    line = unread_message("events", {1: "has no leader"})
    assert line.startswith("warning: events-1 has no leader: not read by this command (the other partitions are); start")
