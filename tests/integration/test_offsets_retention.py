"""Committed offsets expire (Kafka's offsets.retention.minutes) on real processes: a broker
with a 3 s retention checked every 200 ms. A group whose consumer closed leaves ListGroups
and OffsetFetch once the retention has passed since it became empty; a group whose member is
still live keeps its offsets past the retention (the negative control)."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from data_plane.client import Consumer
from data_plane.client.group_admin import GroupAdmin
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RETENTION_S = 3.0
BROKER_ARGS = ["--offsets-topic-partitions", "1", "--offsets-retention-minutes", str(RETENTION_S / 60),
               "--offsets-retention-check-interval-ms", "200"]
TOPIC = "retained"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(tmp_path_factory.mktemp("retention"), controllers=1, brokers=1, broker_args=BROKER_ARGS) as c:
        yield c


def member_with_commit(cluster: TestCluster, group: str, offset: int) -> Consumer:
    consumer = Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.subscribe([TOPIC])
    wait_for(lambda: consumer.poll(50) is not None and consumer.assignment(), 30, f"a member of {group} owning {TOPIC}-0")
    consumer.commit({(TOPIC, 0): offset})
    return consumer


def listed(admin: GroupAdmin) -> set[str]:
    groups, unanswered = admin.list_groups()
    assert not unanswered, unanswered
    return {g.group_id for g in groups}


def test_an_empty_group_expires_after_the_retention_while_a_live_group_keeps_its_offsets(cluster):
    cluster.create_topic(TOPIC, 1)
    live = member_with_commit(cluster, "g-live", 2)
    try:
        gone = member_with_commit(cluster, "g-gone", 3)
        with GroupAdmin(cluster.bootstrap) as admin:
            left_before = time.monotonic()
            gone.close()  # leaves the group: empty from now
            assert admin.committed_offsets("g-gone") == {(TOPIC, 0): 3}
            assert {"g-live", "g-gone"} <= listed(admin)

            def expired() -> bool:
                live.poll(50)  # the live member keeps heartbeating
                return "g-gone" not in listed(admin)

            wait_for(expired, 20, "g-gone to leave ListGroups")
            assert time.monotonic() - left_before >= RETENTION_S  # not before the retention
            assert admin.committed_offsets("g-gone") == {}
            # The negative control: committed before g-gone's, older than the retention, kept.
            assert "g-live" in listed(admin)
            assert admin.committed_offsets("g-live") == {(TOPIC, 0): 2}
    finally:
        live.close()
