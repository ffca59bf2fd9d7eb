"""``kraftlog topics``: the internal topics keep their partitions, refused before any broker
is asked (the address below has nothing listening)."""

from __future__ import annotations

import pytest

from cli.main import main
from server_common.local_cluster import free_ports


@pytest.fixture
def nowhere() -> str:
    (port,) = free_ports(1)
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize("topic, holds", [
    ("__consumer_offsets", "every consumer group's state and committed offsets"),
    ("__transaction_state", "every transactional id's state"),
])
def test_an_internal_topics_partition_count_cannot_change(capsys, nowhere: str, topic: str, holds: str) -> None:
    assert main(["topics", "alter", topic, "--partitions", "60", "--bootstrap", nowhere]) == 1
    line = capsys.readouterr().err
    assert line.startswith(f"kraftlog topics: the partition count of the internal topic {topic} cannot change: it holds {holds}")


def test_an_internal_topic_cannot_be_deleted(capsys, nowhere: str) -> None:
    assert main(["topics", "delete", "__consumer_offsets", "--bootstrap", nowhere]) == 1
    assert capsys.readouterr().err == (
        "kraftlog topics: __consumer_offsets is an internal topic and cannot be deleted: it holds every consumer group's state "
        "and committed offsets (one group goes with 'kraftlog groups delete GROUP')\n")


def test_other_topics_and_internal_configs_go_to_the_cluster(capsys, nowhere: str) -> None:
    """Negative control: the refusal is for internal partition counts and deletion only."""
    assert main(["topics", "alter", "orders", "--partitions", "60", "--bootstrap", nowhere]) == 1
    assert main(["topics", "alter", "__consumer_offsets", "--config", "retention.ms=1000", "--bootstrap", nowhere]) == 1
    err = capsys.readouterr().err
    assert err.count("NO_BROKER_REACHABLE") == 2 and "internal topic" not in err
