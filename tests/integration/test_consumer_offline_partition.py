"""A consumer reads the partitions it can while another has no reachable leader, on real
processes: an RF=1 topic with three partitions over three brokers, the broker leading one of
them (not the group's coordinator) SIGKILLed. A group member (Consume streams) and an
assign() consumer (Fetch), both from earliest, read every record of the other partitions
within a deadline, and position() of the offline one raises after its timeout; once the
broker is back, both read the offline partition's records too. Before, each poll raised
REQUEST_TIMED_OUT ('ListOffsets unanswered') for the one partition and returned nothing.
"""

from __future__ import annotations

import time

import pytest

from data_plane.client import Consumer, KraftlogError, Producer
from data_plane.client.group_admin import GroupAdmin
from tests.cluster import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "p3"
PARTITIONS = 3
PER_PARTITION = 20
GROUP = "offline-readers"
READ_OTHERS_S = 10  # the others' records, from a cold consumer, with one leader down
READ_AFTER_RESTART_S = 30  # the broker starts, registers and leads its partition again


def read_until(consumers: list[Consumer], seen: list[set], wanted: set, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(not wanted <= s for s in seen) and time.monotonic() < deadline:
        for consumer, s in zip(consumers, seen):
            s.update((r.partition, r.offset, r.value) for r in consumer.poll(50))
    for s in seen:
        assert wanted <= s, f"unread after {timeout_s}s: {sorted(wanted - s)[:10]}"


def test_consumers_read_the_other_partitions_while_one_has_no_leader(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 1)
        leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
        with GroupAdmin(cluster.bootstrap, security=cluster.client_security) as admin:
            link = admin.link(GROUP)
            link.find(10)
            coordinator = link.coordinator_id
        victim = next(b for b in leaders.values() if b != coordinator)  # the group itself stays reachable
        offline = {p for p, b in leaders.items() if b == victim}
        assert offline and len(offline) < PARTITIONS, leaders
        with Producer(cluster.bootstrap, security=cluster.client_security) as producer:
            for p in range(PARTITIONS):
                for i in range(PER_PARTITION):
                    producer.send(TOPIC, b"%d-%d" % (p, i), partition=p)
            producer.flush(10)
        records = {(p, i, b"%d-%d" % (p, i)) for p in range(PARTITIONS) for i in range(PER_PARTITION)}
        others = {r for r in records if r[0] not in offline}

        cluster.kill(cluster.broker(victim))
        member = Consumer(cluster.bootstrap, group_id=GROUP, auto_offset_reset="earliest", security=cluster.client_security)
        assigned = Consumer(cluster.bootstrap, auto_offset_reset="earliest", fetch_mode="fetch", security=cluster.client_security)
        try:
            member.subscribe([TOPIC])
            assigned.assign([(TOPIC, p) for p in range(PARTITIONS)])
            seen: list[set] = [set(), set()]
            read_until([member, assigned], seen, others, READ_OTHERS_S)
            assert all(r[0] not in offline for s in seen for r in s)
            stuck = (TOPIC, min(offline))
            with pytest.raises(KraftlogError) as err:
                assigned.position(stuck, timeout_ms=500)
            assert err.value.code == "REQUEST_TIMED_OUT" and f"no position for {TOPIC}-{stuck[1]}" in str(err.value)

            cluster.restart(cluster.broker(victim))
            read_until([member, assigned], seen, records, READ_AFTER_RESTART_S)
            assert all(s == records for s in seen), "nothing beyond what was produced"
            assert assigned.position(stuck) == PER_PARTITION
        finally:
            member.close()
            assigned.close()
