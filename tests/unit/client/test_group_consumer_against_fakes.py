"""The group consumer's shell (heartbeats, reconciliation inside poll, commits, rediscovery)
against in-process fakes of a broker and a coordinator: two members share a topic with no
partition owned twice, a closed member's partitions move and resume at the committed offsets,
a fenced member loses its partitions and rejoins, NOT_COORDINATOR answers are ridden out, a
read_committed member waits out UNSTABLE_OFFSET_COMMIT (OffsetFetch require_stable)."""

from __future__ import annotations

import time

import pytest

from data_plane.client import Consumer, KraftlogError, Producer
from server_common.waiting import wait_for
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_coordinator import FakeCoordinator

pytestmark = pytest.mark.timeout(60)
PARTITIONS = 4


@pytest.fixture
def cluster():
    with FakeBroker({"t": PARTITIONS}) as broker:
        coordinator = FakeCoordinator({"t": PARTITIONS})
        server = coordinator.start()
        try:
            yield broker, coordinator, f"{broker.address},{coordinator.address}"
        finally:
            server.stop(grace=None)


def produce(address: str, count: int) -> None:
    with Producer(address, linger_ms=5) as producer:
        for i in range(count):
            producer.send("t", b"%d" % i, partition=i % PARTITIONS)
        producer.flush(10)


def member(bootstrap: str, **kwargs) -> Consumer:
    return Consumer(bootstrap, group_id="g", auto_offset_reset="earliest", fetch_mode="fetch", fetch_max_wait_ms=50, **kwargs)


def poll_until(consumers, seen: dict, count: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(len(v) for v in seen.values()) < count and time.monotonic() < deadline:
        for c in consumers:
            for r in c.poll(20):
                seen.setdefault(c.group.member_id, []).append((r.partition, r.offset))
    assert sum(len(v) for v in seen.values()) >= count, seen


def test_members_share_partitions_never_owning_one_twice_and_a_leaver_hands_over(cluster):
    broker, coordinator, bootstrap = cluster
    produce(broker.address, 200)
    a, b = member(bootstrap), member(bootstrap)
    assigned, revoked = [], []
    a.subscribe(["t"], on_assigned=assigned.append, on_revoked=revoked.append)
    wait_for(lambda: a.poll(0) is not None and len(a.assignment()) == PARTITIONS, 10, "the first member owning everything")
    a.seek(("t", 0), 0)  # whatever that poll returned, read it again below
    for p in range(1, PARTITIONS):
        a.seek(("t", p), 0)
    b.subscribe(["t"])
    seen: dict = {}
    poll_until([a, b], seen, 200)
    wait_for(lambda: [a.poll(10), b.poll(10)] and len(a.assignment()) == len(b.assignment()) == PARTITIONS // 2, 10, "an even split")
    assert all(len(owners) == 1 for snapshot in coordinator.ownership_log for owners in snapshot.values())
    records = [r for rs in seen.values() for r in rs]
    assert set(records) == {(i % PARTITIONS, i // PARTITIONS) for i in range(200)}
    assert assigned and revoked  # a got everything first, then gave half to b
    assert {tp: o.offset for tp, o in a.commit().items()} == {tp: 50 for tp in a.assignment()}
    b.close()  # commits its positions and leaves at once
    assert coordinator.offsets == {("t", p): 50 for p in range(PARTITIONS)}
    assert b.group.member_id not in coordinator.members
    produce(broker.address, 8)
    more: dict = {}
    poll_until([a], more, 8)
    assert sorted(more[a.group.member_id]) == [(p, o) for p in range(PARTITIONS) for o in (50, 51)]
    a.close()


def test_a_fenced_member_loses_its_partitions_and_rejoins(cluster):
    broker, coordinator, bootstrap = cluster
    produce(broker.address, 40)
    lost = []
    with member(bootstrap, enable_auto_commit=False) as c:
        c.subscribe(["t"], on_lost=lost.append)
        poll_until([c], {}, 40)
        first_id = c.group.member_id
        coordinator.forget(first_id)
        wait_for(lambda: c.poll(10) is not None and lost, 10, "the lost callback")
        assert lost[0] == {("t", p) for p in range(PARTITIONS)}
        wait_for(lambda: c.poll(10) is not None and len(c.assignment()) == PARTITIONS, 10, "rejoined with every partition")
        assert c.group.member_epoch > 0 and first_id in coordinator.members


def test_not_coordinator_answers_are_ridden_out_and_a_stale_commit_is_refused(cluster):
    broker, coordinator, bootstrap = cluster
    produce(broker.address, 20)
    with member(bootstrap) as c:
        coordinator.not_coordinator = 5
        c.subscribe(["t"])
        poll_until([c], {}, 20)
        c.commit()
        assert coordinator.offsets == {("t", p): 5 for p in range(PARTITIONS)}
        coordinator.members[c.group.member_id].epoch += 1  # the coordinator moved on without this member
        with pytest.raises(KraftlogError, match="STALE_MEMBER_EPOCH"):
            c.commit()


def test_a_commit_that_crossed_an_epoch_bump_goes_again_at_the_new_epoch(cluster):
    """The coordinator moved the member to a newer epoch (a rebalance elsewhere in the group)
    while its commit was on the way: refused as stale, it is sent again once the member's
    heartbeat has the new epoch, for the partitions it still owns, and lands."""
    broker, coordinator, bootstrap = cluster
    produce(broker.address, 20)
    with member(bootstrap, enable_auto_commit=False) as c:
        c.subscribe(["t"])
        poll_until([c], {}, 20)
        epoch = c.group.member_epoch
        coordinator.bump_before_commits = 2
        c.commit()
        assert coordinator.offsets == {("t", p): 5 for p in range(PARTITIONS)}
        assert c.group.member_epoch == epoch + 2 and coordinator.bump_before_commits == 0


def test_assign_is_refused_for_a_group_member_and_group_calls_without_group(cluster):
    _, _, bootstrap = cluster
    with member(bootstrap) as c, pytest.raises(KraftlogError, match="subscribe"):
        c.assign([("t", 0)])
    with Consumer(bootstrap) as plain, pytest.raises(KraftlogError, match="group_id"):
        plain.commit()


def test_close_lands_queued_async_commits_before_leaving(cluster):
    broker, coordinator, bootstrap = cluster
    produce(broker.address, 8)
    c = member(bootstrap, enable_auto_commit=False)
    c.subscribe(["t"])
    poll_until([c], {}, 8)
    coordinator.not_coordinator = 3  # the async commit needs a few retries: it is still queued at close
    c.commit_async({("t", p): 2 for p in range(PARTITIONS)})
    c.close()
    assert coordinator.offsets == {("t", p): 2 for p in range(PARTITIONS)}


def test_a_read_committed_member_waits_out_unstable_offsets(cluster):
    _, coordinator, bootstrap = cluster
    coordinator.offsets[("t", 1)] = 7
    coordinator.unstable_answers = 2
    with member(bootstrap, isolation_level="read_committed", retry_backoff_ms=10) as c:
        assert c.committed([("t", 1)])[("t", 1)].offset == 7
    assert coordinator.require_stable_seen == [True, True, True] and coordinator.unstable_answers == 0
    coordinator.unstable_answers = 1
    with member(bootstrap, isolation_level="read_committed", retry_backoff_ms=1000) as c:
        with pytest.raises(KraftlogError) as refused:  # a backoff past the deadline: raised, retriable
            c.group.committed([("t", 1)], timeout_s=0.5)
    assert refused.value.code == "UNSTABLE_OFFSET_COMMIT" and refused.value.retriable
    coordinator.require_stable_seen.clear()
    with member(bootstrap) as c:  # negative control: read_uncommitted does not ask for stable offsets
        assert c.committed([("t", 1)])[("t", 1)].offset == 7
    assert coordinator.require_stable_seen == [False]
