"""Elections, reassignment and `topics describe` on real processes, driven through the CLI.

One module cluster (3 controllers, 4 brokers, automatic rebalancing off so that elections
happen only when a test asks, 3 s sessions) serves most tests; each restores what it
stopped. Automatic rebalancing gets its own cluster with a 1 s check interval.

Checks: a reassignment moves data and leadership and its progress is visible and can be
cancelled; a SIGKILLed broker is fenced and loses every leadership and ISR membership in the
entry that fences it; `leaders elect` reports what it did and fails where the preferred
replica is not available; a partition whose last in-sync replica is gone (into the ELR) stays
offline until the topic allows an unclean election, which is then logged and counted; consumers
that read records the unclean election then truncated detect it (KIP-320); after a controlled
shutdown and restart, leadership returns to the preferred replica on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Iterator

import pytest

from kraftlog_proto import controller_pb2 as pb
from server_common.waiting import wait_for
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = "3000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[TestCluster]:
    with local_cluster(
        tmp_path_factory.mktemp("elections"),
        controllers=3,
        brokers=4,
        controller_args=["--auto-leader-rebalance-enable", "false", "--session-timeout-ms", SESSION_MS],
        broker_args=["--session-timeout-ms", SESSION_MS],
    ) as c:
        yield c


def kraftlog(cluster: TestCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--bootstrap", cluster.bootstrap], capture_output=True, timeout=60, text=True)


def kraftlog_json(cluster: TestCluster, *args: str):
    done = kraftlog(cluster, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def state(cluster: TestCluster, topic: str, partition: int = 0) -> pb.PartitionState:
    """The partition as a controller describes it. Any controller may answer, and a follower
    controller applies committed entries a moment after the active one: a topic just created
    may not be in its answer yet, so wait for it to appear."""

    def described() -> pb.PartitionState | None:
        with cluster.controller_client() as client:
            topics = [t for t in client.describe_cluster().topics if t.name == topic]
        return next((p for t in topics for p in t.partitions if p.partition == partition), None)

    return wait_for(described, 10, f"{topic}-{partition} in a controller's description")


def brokers(cluster: TestCluster) -> dict[int, pb.BrokerRegistration]:
    with cluster.controller_client() as client:
        return {b.endpoint.broker_id: b for b in client.describe_cluster().brokers}


def restore(cluster: TestCluster, broker_id: int) -> None:
    cluster.restart(cluster.broker(broker_id))
    cluster.wait_ready()


def produce(cluster: TestCluster, topic: str, count: int, first: int = 0) -> list[bytes]:
    """acks=all writes of ``topic-<first>`` ... to partition 0; returns the values."""
    from data_plane.client import Producer

    values = [f"{topic}-{i}".encode() for i in range(first, first + count)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for future in [producer.send(topic, value=v, partition=0) for v in values]:
            future.result(timeout=30)
    return values


def consume(cluster: TestCluster, topic: str, count: int) -> list[bytes]:
    from data_plane.client import Consumer

    got: list[bytes] = []
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning([(topic, 0)])
        wait_for(lambda: got.extend(r.value for r in consumer.poll(timeout_ms=200)) or len(got) >= count, 30, f"{count} records of {topic}")
    return got


def test_reassignment_moves_the_data_and_the_leadership(cluster: TestCluster) -> None:
    cluster.create_topic("moves", 1, 3)
    values = produce(cluster, "moves", 50)
    before = state(cluster, "moves")
    a, b, c = before.replicas
    d = next(x for x in brokers(cluster) if x not in before.replicas)

    started = kraftlog_json(cluster, "partitions", "reassign", "--topic", "moves", "--partition", "0", "--replicas", f"{d},{b},{c}")
    assert (started["replicas"], started["adding_replicas"], started["removing_replicas"]) == ([d, b, c, a], [d], [a])
    assert started["status"] == f"in progress: adding {d}, removing {a}"

    done = wait_for(lambda: (s := state(cluster, "moves")).replicas == [d, b, c] and not s.adding_replicas and s, 60, "the reassignment to complete")
    assert done.leader in (b, c, d) and done.leader_epoch > before.leader_epoch
    assert consume(cluster, "moves", len(values)) == values
    described = wait_for(lambda: (row := kraftlog_json(cluster, "topics", "describe", "moves")[0])["replica_state"][0]["log_end_offset"] == 50 and row, 30, f"broker {d} to report its copy")
    assert [(r["broker_id"], r["lag"]) for r in described["replica_state"]] == [(d, 0), (b, 0), (c, 0)]

    # replace a follower: the leader stays, in a new leader epoch that fences the removed replica
    leader, (follower, other) = done.leader, [x for x in done.replicas if x != done.leader]
    kraftlog_json(cluster, "partitions", "reassign", "--topic", "moves", "--partition", "0", "--replicas", f"{leader},{other},{a}")
    again = wait_for(lambda: (s := state(cluster, "moves")).replicas == [leader, other, a] and not s.adding_replicas and s, 60, "the second reassignment to complete")
    assert (again.leader, again.leader_epoch) == (leader, done.leader_epoch + 1) and follower not in again.isr
    more = produce(cluster, "moves", 20, first=50)
    assert consume(cluster, "moves", 70) == values + more


def test_reassignment_progress_is_visible_and_can_be_cancelled(cluster: TestCluster) -> None:
    cluster.create_topic("stuck", 1, 2)
    a, b = state(cluster, "stuck").replicas
    spare = next(x for x in sorted(brokers(cluster)) if x not in (a, b))
    cluster.stop_node(cluster.broker(spare))  # registered but fenced: it cannot catch up
    try:
        kraftlog_json(cluster, "partitions", "reassign", "--topic", "stuck", "--partition", "0", "--replicas", f"{a},{spare}")
        # reads may come from a controller a few milliseconds behind the one that wrote
        ongoing = wait_for(lambda: kraftlog_json(cluster, "partitions", "reassignments"), 10, "the reassignment to be listed")
        assert [(r["topic"], r["adding_replicas"], r["removing_replicas"]) for r in ongoing] == [("stuck", [spare], [b])]
        shown = kraftlog(cluster, "topics", "describe", "stuck")
        assert f"reassigning +{spare} -{b}" in shown.stdout and f"{spare}:unreachable" in shown.stdout

        cancelled = kraftlog_json(cluster, "partitions", "reassign", "--topic", "stuck", "--partition", "0", "--cancel")
        assert (cancelled["status"], cancelled["replicas"], cancelled["adding_replicas"]) == ("cancelled", [a, b], [])
        wait_for(lambda: kraftlog(cluster, "partitions", "reassignments").stdout.strip() == "no reassignments in progress", 10, "the listing to empty")
        again = kraftlog(cluster, "partitions", "reassign", "--topic", "stuck", "--partition", "0", "--cancel")
        assert again.returncode == 1 and "no reassignment of stuck-0 is in progress" in again.stderr
    finally:
        restore(cluster, spare)


def test_fenced_broker_loses_leaderships_and_isr_memberships_in_one_entry(cluster: TestCluster) -> None:
    cluster.create_topic("fence", 4, 3)
    victim = state(cluster, "fence", 0).leader
    cluster.kill(cluster.broker(victim))
    try:
        wait_for(lambda: brokers(cluster)[victim].endpoint.fenced, 30, f"broker {victim} to be fenced")
        # no further waiting: the moves commit in the entry that fences the broker
        states = [state(cluster, "fence", n) for n in range(4)]
        assert all(s.leader != victim and set(s.isr) == set(s.replicas) - {victim} for s in states), states
        under = kraftlog_json(cluster, "topics", "describe", "fence", "--under-replicated")
        assert [r["partition"] for r in under] == [s.partition for s in states if victim in s.replicas]
        assert kraftlog_json(cluster, "topics", "describe", "fence", "--offline") == []
        assert kraftlog(cluster, "topics", "describe", "fence", "--offline").stdout == ""  # nothing matches: nothing printed

        refused = kraftlog(cluster, "leaders", "elect", "--topic", "fence", "--partition", "0")
        assert refused.returncode == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in refused.stdout
    finally:
        restore(cluster, victim)
    wait_for(lambda: victim in state(cluster, "fence", 0).isr, 60, f"broker {victim} back in the ISR")
    elected = kraftlog_json(cluster, "leaders", "elect", "--topic", "fence", "--partition", "0")
    assert [(r["result"], r["leader"]) for r in elected] == [("elected", victim)]
    unknown = kraftlog(cluster, "leaders", "elect", "--topic", "no-such-topic")
    assert unknown.returncode == 1 and unknown.stdout == "" and "topic 'no-such-topic' does not exist" in unknown.stderr


def test_offline_partition_waits_for_the_topic_to_allow_an_unclean_election(cluster: TestCluster) -> None:
    cluster.create_topic("unclean", 1, 2)
    first, second = state(cluster, "unclean").replicas
    cluster.stop_node(cluster.broker(second))  # controlled shutdown: out of the ISR
    cluster.stop_node(cluster.broker(first))  # the last in-sync replica: the partition goes offline
    try:
        offline = wait_for(lambda: (s := state(cluster, "unclean")).leader == -1 and s, 10, "the partition to go offline")
        assert (list(offline.isr), list(offline.eligible_leader_replicas)) == ([], [first]), "the last in-sync replica leaves the ISR for the ELR"
        cluster.restart(cluster.broker(second))
        wait_for(lambda: not brokers(cluster)[second].endpoint.fenced, 30, f"broker {second} to be unfenced")
        # unfencing elects offline partitions in the same entry: nothing happened, as it must not
        assert state(cluster, "unclean").leader == -1
        assert [(r["topic"], r["partition"]) for r in kraftlog_json(cluster, "topics", "describe", "unclean", "--offline")] == [("unclean", 0)]

        altered = kraftlog(cluster, "topics", "alter", "unclean", "--config", "unclean.leader.election.enable=true")
        assert altered.returncode == 0, altered.stderr
        after = wait_for(lambda: (s := state(cluster, "unclean")).leader == second and s, 10, "the unclean election")
        assert (list(after.isr), after.unclean_leader_elections) == ([second], 1)
        assert "unclean elections: 1" in kraftlog(cluster, "topics", "describe", "unclean").stdout
        warnings = [json.loads(line) for c in cluster.controllers for line in cluster.log_path(c).read_text().splitlines() if "unclean leader election" in line]
        assert [(w["level"], w["topic"], w["leader"], w["previous_isr"], w["previous_eligible_leader_replicas"]) for w in warnings] == [("warning", "unclean", second, [], [first])]
    finally:
        restore(cluster, first)


def test_leadership_returns_to_the_preferred_replica_after_a_controlled_shutdown(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=3, brokers=3, controller_args=["--leader-imbalance-check-interval-seconds", "1"]) as c:
        c.create_topic("balanced", 3, 3)
        victim = state(c, "balanced", 0).replicas[0]
        c.stop_node(c.broker(victim))
        wait_for(lambda: all(state(c, "balanced", n).leader != victim and victim not in state(c, "balanced", n).isr for n in range(3)), 10, f"broker {victim} out of every ISR and leadership")
        c.restart(c.broker(victim))
        started = time.monotonic()
        wait_for(lambda: all((s := state(c, "balanced", n)).leader == s.replicas[0] for n in range(3)), 60, "every partition led by its preferred replica")
        print(f"\nleadership back on broker {victim} {time.monotonic() - started:.1f} s after its restart")


def test_consumers_detect_the_truncation_an_unclean_election_makes(cluster: TestCluster) -> None:
    """KIP-320: records read from the last replica standing are lost when an out-of-sync
    replica is elected uncleanly, and new records reuse their offsets. A consumer with an
    offset reset policy continues at the first divergent offset (neither re-reading from the
    start nor skipping the new records); one with "none" raises LogTruncationError until it
    seeks."""
    from data_plane.client import Consumer
    from data_plane.client.truncation import LogTruncationError

    topic, tp = "truncated", ("truncated", 0)
    cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "1"})
    first, second = state(cluster, topic).replicas
    kept = produce(cluster, topic, 10)
    cluster.stop_node(cluster.broker(second))  # out of the ISR: what follows is on `first` alone
    wait_for(lambda: list(state(cluster, topic).isr) == [first], 30, f"{topic}-0's ISR to shrink to [{first}]")
    lost = produce(cluster, topic, 20, first=10)
    resetting = Consumer(cluster.bootstrap, auto_offset_reset="earliest")
    strict = Consumer(cluster.bootstrap, auto_offset_reset="none", fetch_mode="fetch")
    try:
        for consumer in (resetting, strict):
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            read: list[bytes] = []
            wait_for(lambda: read.extend(r.value for r in consumer.poll(200)) or len(read) >= 30, 30, "30 records")
            assert read == kept + lost and consumer.position(tp) == 30

        cluster.stop_node(cluster.broker(first))
        cluster.restart(cluster.broker(second))
        wait_for(lambda: not brokers(cluster)[second].endpoint.fenced, 30, f"broker {second} to be unfenced")
        assert kraftlog(cluster, "topics", "alter", topic, "--config", "unclean.leader.election.enable=true").returncode == 0
        wait_for(lambda: state(cluster, topic).leader == second, 30, "the unclean election")
        replacing = produce(cluster, topic, 5, first=100)  # offsets 10..14 of the new leader's log

        got: list[tuple[int, bytes]] = []
        wait_for(lambda: got.extend((r.offset, r.value) for r in resetting.poll(200)) or len(got) >= 5, 30, "the records after the truncation")
        assert got == list(zip(range(10, 15), replacing)), got

        def reported() -> LogTruncationError | None:
            try:
                strict.poll(200)
            except LogTruncationError as err:
                return err
            return None

        error = wait_for(reported, 30, "the truncation to be reported")
        assert (error.tp, error.divergent_offset, error.position.offset) == (tp, 10, 30)
        with pytest.raises(LogTruncationError):
            strict.poll(200)  # reported again until the application seeks
        strict.seek(tp, error.divergent_offset)
        after: list[bytes] = []
        wait_for(lambda: after.extend(r.value for r in strict.poll(200)) or len(after) >= 5, 30, "the records after the seek")
        assert after == replacing
    finally:
        resetting.close()
        strict.close()
        restore(cluster, first)
