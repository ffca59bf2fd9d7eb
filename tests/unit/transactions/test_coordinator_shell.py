"""The transaction coordinator's shell over a fake replica manager (a log in memory) and a fake
marker writer: each decision is durable before it is acted on (PrepareCommit before the first
marker, CompleteCommit only once every partition has one); markers are retried until every
partition has its marker; a coordinator that takes the partition over resumes a decided
transaction's markers; a failed write changes nothing; the timer aborts a transaction past its
timeout and fences its producer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from data_plane.partition_errors import PartitionError
from data_plane.requests import ProduceResult
from data_plane.coordination import Refused
from server_common.internal_topics import TRANSACTION_STATE_TOPIC
from data_plane.record_batch import decode_batches
from server_common.errors import ErrorCode
from data_plane.transactions import record_codec
from data_plane.transactions import coordinator as coordinator_module
from data_plane.transactions.coordinator import TransactionCoordinator, TxnSettings
from data_plane.transactions.markers import MarkerWriter, marker_requests, written
from data_plane.transactions.state_machine import MarkerPlan, TopicPartition, TxnState
from kraftlog_proto import broker_pb2
from tests.unit.groups.test_coordinator_shell import FakePartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
S = TxnState


class FakeReplicas:
    def __init__(self) -> None:
        self.partition = FakePartition()
        self.partitions = {(TRANSACTION_STATE_TOPIC, 0): self.partition}
        self.image = SimpleNamespace(topics={TRANSACTION_STATE_TOPIC: SimpleNamespace(partitions={0: None})})
        self.fail_with: ErrorCode | None = None
        self.events: list[str] = []  # durable states and markers, in the order they happened
        self.writes = 0  # batches written to the log

    async def produce(self, acks, timeout_ms, items):
        [item] = items
        result = ProduceResult(item.topic, item.partition)
        if self.fail_with is not None:
            result.error = PartitionError(self.fail_with, "injected")
            return [result]
        self.partition.append(item.batches)
        self.writes += 1
        for batch in decode_batches(item.batches):
            self.events += [f"log {record_codec.decode(k, v)[1].state.value}" for k, v in zip(batch.keys, batch.values)]
        return [result]

    def leader_hint(self, topic, index):
        return SimpleNamespace(leader_id=-1)


class FakeMarkers:
    """Writes markers into ``replicas.events``; a partition in ``failing`` is refused that many
    more rounds; one in ``lose`` has its first marker appended but its leader moves before the HW
    covers it (the leader answers NOT_LEADER_OR_FOLLOWER, not committed)."""

    def __init__(self, replicas: FakeReplicas) -> None:
        self.replicas = replicas
        self.failing: dict[TopicPartition, int] = {}
        self.lose: set[TopicPartition] = set()
        self.rounds = 0
        self.gate: asyncio.Event | None = None  # set: every round waits for it (markers slow to replicate)

    async def write_round(self, plan: MarkerPlan, missing, coordinator_epoch, transactional_id):
        self.rounds += 1
        if self.gate is not None:
            await self.gate.wait()
        done = set()
        for tp in sorted(missing):
            if self.failing.get(tp, 0) > 0:
                self.failing[tp] -= 1
                continue
            self.replicas.events.append(f"marker {'commit' if plan.commit else 'abort'} {tp.topic}-{tp.partition} epoch {plan.producer_epoch}")
            if tp in self.lose:
                self.lose.discard(tp)
                continue
            done.add(tp)
        return done


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


async def allocate():
    allocate.next += 1
    return broker_pb2.InitProducerIdResponse(producer_id=allocate.next, producer_epoch=0)
allocate.next = 100


async def loaded(replicas: FakeReplicas, markers: FakeMarkers | None = None, clock: Clock | None = None) -> TransactionCoordinator:
    coordinator = TransactionCoordinator(1, replicas, TxnSettings(max_timeout_ms=60_000, id_expiration_ms=10**9),
                                         allocate, markers or FakeMarkers(replicas), clock or Clock())
    coordinator.sync_leadership()
    await coordinator.shards[0].task
    assert coordinator.shards[0].loaded
    return coordinator


async def until(condition, timeout_s: float = 5.0) -> None:
    """Wait for ``condition`` on the event loop, failing after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


async def settled(coordinator: TransactionCoordinator) -> None:
    """Wait for every marker task the coordinator started."""
    for shard in list(coordinator.shards.values()):
        await asyncio.gather(*(completion.task for completion in shard.completing.values()))


async def open_txn(coordinator: TransactionCoordinator, partitions=frozenset({TP0, TP1})):
    init = await coordinator.init_producer_id("tx", 5000)
    assert init.error == ErrorCode.NONE
    added = await coordinator.add_partitions("tx", init.answer.producer_id, init.answer.producer_epoch, partitions)
    assert added.error == ErrorCode.NONE and added.answer.state is S.ONGOING
    return init.answer


async def committed_with_markers_held(partitions=frozenset({TP0, TP1})):
    """A transaction over ``partitions`` whose commit is durable and whose markers are held
    (``markers.gate``) until the test lets them go."""
    replicas = FakeReplicas()
    markers = FakeMarkers(replicas)
    markers.gate = asyncio.Event()
    coordinator = await loaded(replicas, markers)
    meta = await open_txn(coordinator, partitions)
    end = await coordinator.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=True)
    return replicas, markers, coordinator, meta, end


def test_commit_is_durable_before_its_markers_and_complete_after_all_of_them():
    async def scenario():
        replicas = FakeReplicas()
        markers = FakeMarkers(replicas)
        markers.failing[TP1] = 2  # the second partition's leader refuses twice: retried
        coordinator = await loaded(replicas, markers)
        meta = await open_txn(coordinator)
        end = await coordinator.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=True)
        assert end.error == ErrorCode.NONE and end.answer.producer_epoch == meta.producer_epoch + 1
        await settled(coordinator)
        assert replicas.events == ["log Empty", "log Ongoing", "log PrepareCommit",
                                   "marker commit t-0 epoch 1", "marker commit t-1 epoch 1", "log CompleteCommit"]
        assert markers.rounds == 3 and coordinator.describe("tx").state is S.COMPLETE_COMMIT
    asyncio.run(scenario())


def test_a_coordinator_taking_over_resumes_the_markers_of_a_decided_transaction():
    async def scenario():
        replicas = FakeReplicas()
        markers = FakeMarkers(replicas)
        markers.failing[TP0] = 10**6  # the first coordinator never gets its markers through
        first = await loaded(replicas, markers)
        meta = await open_txn(first)
        await first.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=False)
        await until(lambda: markers.rounds >= 2)
        replicas.partition.is_leader = False
        first.sync_leadership()  # leadership moves: the first coordinator stops, its markers unwritten
        await asyncio.sleep(0)
        assert "log CompleteAbort" not in replicas.events and not first.shards
        replicas.partition.is_leader, replicas.partition.leader_epoch = True, 2
        markers.failing.clear()
        successor = await loaded(replicas, markers)  # the same log, a new leader epoch
        await settled(successor)
        assert successor.describe("tx").state is S.COMPLETE_ABORT
        assert replicas.events[-3:] == ["marker abort t-0 epoch 1", "marker abort t-1 epoch 1", "log CompleteAbort"]
    asyncio.run(scenario())


def test_a_failed_write_changes_nothing_and_answers_retriable():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        meta = await open_txn(coordinator)
        replicas.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        try:
            await coordinator.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=True)
            raise AssertionError("the write failed: the request must be refused")
        except Refused as refused:
            assert refused.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert coordinator.describe("tx").state is S.ONGOING and not any(e.startswith("marker") for e in replicas.events)
    asyncio.run(scenario())


def test_the_timer_aborts_a_transaction_past_its_timeout_and_fences_its_producer():
    async def scenario():
        replicas, clock = FakeReplicas(), Clock()
        coordinator = await loaded(replicas, clock=clock)
        meta = await open_txn(coordinator)
        clock.now += 5000  # exactly the timeout: not yet past it
        coordinator.tick()
        assert not coordinator.shards[0].busy and coordinator.describe("tx").state is S.ONGOING  # nothing started
        clock.now += 1
        coordinator.tick()
        await until(lambda: coordinator.describe("tx").state is S.COMPLETE_ABORT)
        assert replicas.events[2:] == ["log PrepareEpochFence", "log PrepareAbort", "marker abort t-0 epoch 1",
                                       "marker abort t-1 epoch 1", "log CompleteAbort"]
        late = await coordinator.add_partitions("tx", meta.producer_id, meta.producer_epoch, frozenset({TP0}))
        assert late.error == ErrorCode.PRODUCER_FENCED
    asyncio.run(scenario())


def test_marker_requests_group_partitions_by_leader_and_results_are_read_per_partition():
    plan = MarkerPlan(7, 3, True, frozenset({TP0, TP1, TopicPartition("u", 0)}))
    leaders = {TP0: 1, TP1: 2, TopicPartition("u", 0): -1}
    requests, leaderless = marker_requests(plan, plan.partitions, 4, leaders.__getitem__)
    assert leaderless == {TopicPartition("u", 0)} and set(requests) == {1, 2}
    [marker] = requests[1].markers
    assert (marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, marker.topic, list(marker.partitions)) \
        == (7, 3, True, 4, "t", [0])
    answer = broker_pb2.WriteTxnMarkersResponse(results=[
        broker_pb2.TxnMarkerResult(topic="t", partition=0, error_code=ErrorCode.NONE),
        broker_pb2.TxnMarkerResult(topic="t", partition=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, error_message="moved")])
    done, failed = written(answer)
    assert done == {TP0} and failed == {TP1: "NOT_LEADER_OR_FOLLOWER: moved"}


def test_markers_to_this_brokers_own_partitions_are_written_in_process_the_others_through_grpc():
    """One request per leader either way; the partitions this broker leads go to its own
    broker service in process. Negative control: t-1's leader is another broker (unreachable
    here), so its marker never reaches the in-process call and stays missing."""
    asked = []

    async def own(request):
        asked.append(request)
        return broker_pb2.WriteTxnMarkersResponse(results=[
            broker_pb2.TxnMarkerResult(topic=m.topic, partition=p) for m in request.markers for p in m.partitions])

    image = SimpleNamespace(topics={"t": SimpleNamespace(partitions={0: None, 1: None})})
    replicas = SimpleNamespace(image=image, leader_hint=lambda topic, index: SimpleNamespace(leader_id=1 + index))
    writer = MarkerWriter(1, replicas, lambda broker: None, None, own)
    plan = MarkerPlan(7, 2, True, frozenset({TP0, TP1}))
    done = asyncio.run(writer.write_round(plan, {TP0, TP1}, 5, "tx"))
    assert done == {TP0}
    [request] = asked
    assert [(m.topic, list(m.partitions), m.producer_epoch, m.commit, m.coordinator_epoch) for m in request.markers] == [("t", [0], 2, True, 5)]


def test_a_marker_lost_to_a_leader_change_is_written_again_before_the_transaction_completes():
    async def scenario():
        replicas = FakeReplicas()
        markers = FakeMarkers(replicas)
        markers.lose.add(TP0)
        coordinator = await loaded(replicas, markers)
        meta = await open_txn(coordinator)
        await coordinator.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=True)
        await settled(coordinator)
        assert replicas.events[2:] == ["log PrepareCommit", "marker commit t-0 epoch 1", "marker commit t-1 epoch 1",
                                       "marker commit t-0 epoch 1", "log CompleteCommit"]
    asyncio.run(scenario())


def test_the_next_transaction_waits_for_the_markers_instead_of_being_refused():
    async def scenario():
        replicas, markers, coordinator, meta, end = await committed_with_markers_held()
        epoch = end.answer.producer_epoch
        add = asyncio.ensure_future(coordinator.add_partitions("tx", meta.producer_id, epoch, frozenset({TP0})))
        await until(lambda: markers.rounds >= 1)
        assert not add.done()  # held while the markers are written, not answered CONCURRENT_TRANSACTIONS
        writes = replicas.writes
        markers.gate.set()
        added = await add
        await settled(coordinator)
        assert added.error == ErrorCode.NONE and added.answer.state is S.ONGOING
        assert replicas.events[2:] == ["log PrepareCommit", "marker commit t-0 epoch 1", "marker commit t-1 epoch 1",
                                       "log CompleteCommit", "log Ongoing"]
        assert replicas.writes == writes + 1  # CompleteCommit went in the add's own write
    asyncio.run(scenario())


def test_the_next_transaction_on_other_partitions_starts_while_the_markers_are_written():
    async def scenario():
        replicas, markers, coordinator, meta, end = await committed_with_markers_held(frozenset({TP0}))
        epoch = end.answer.producer_epoch
        added = await coordinator.add_partitions("tx", meta.producer_id, epoch, frozenset({TP1}))
        assert added.error == ErrorCode.NONE and added.answer.owed == end.markers  # answered, the marker still unwritten
        assert replicas.events[2:] == ["log PrepareCommit", "log Ongoing"]
        ending = asyncio.ensure_future(coordinator.end_txn("tx", meta.producer_id, epoch, commit=True))
        await until(lambda: markers.rounds >= 1)
        assert not ending.done()  # its markers must follow the owed ones
        writes = replicas.writes
        markers.gate.set()
        assert (await ending).error == ErrorCode.NONE
        await settled(coordinator)
        assert replicas.events[4:] == ["marker commit t-0 epoch 1", "log Ongoing", "log PrepareCommit",
                                       "marker commit t-1 epoch 2", "log CompleteCommit"]
        assert replicas.writes == writes + 2  # the owed markers recorded in EndTxn's own write, then CompleteCommit
        assert coordinator.describe("tx").owed is None
    asyncio.run(scenario())


def test_the_markers_owed_are_recorded_by_the_next_write_not_their_own():
    async def scenario():
        replicas, markers, coordinator, meta, end = await committed_with_markers_held(frozenset({TP0}))
        await coordinator.add_partitions("tx", meta.producer_id, end.answer.producer_epoch, frozenset({TP1}))
        markers.gate.set()
        await settled(coordinator)
        writes = replicas.writes
        assert replicas.events[-2:] == ["log Ongoing", "marker commit t-0 epoch 1"]  # no write of its own: the shard stays free
        assert coordinator.describe("tx").owed == end.markers
        again = await coordinator.add_partitions("tx", meta.producer_id, end.answer.producer_epoch, frozenset({TP0}))
        assert again.error == ErrorCode.NONE and again.answer.owed is None and again.answer.partitions == {TP0, TP1}
        assert replicas.events[-2:] == ["log Ongoing", "log Ongoing"] and replicas.writes == writes + 1  # cleared, then TP0 added
    asyncio.run(scenario())


def test_a_coordinator_taking_over_writes_the_markers_the_next_transaction_owes():
    async def scenario():
        replicas = FakeReplicas()
        markers = FakeMarkers(replicas)
        markers.failing[TP0] = 10**6
        first = await loaded(replicas, markers)
        meta = await open_txn(first, frozenset({TP0}))
        end = await first.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=False)
        await first.add_partitions("tx", meta.producer_id, end.answer.producer_epoch, frozenset({TP1}))
        replicas.partition.is_leader = False
        first.sync_leadership()
        await asyncio.sleep(0)
        replicas.partition.is_leader, replicas.partition.leader_epoch = True, 2
        markers.failing.clear()
        successor = await loaded(replicas, markers)
        await settled(successor)
        assert replicas.events[-1] == "marker abort t-0 epoch 1"
        ended = await successor.end_txn("tx", meta.producer_id, end.answer.producer_epoch, commit=True)
        assert ended.error == ErrorCode.NONE
        await settled(successor)
        assert replicas.events[-4:] == ["log Ongoing", "log PrepareCommit", "marker commit t-1 epoch 2", "log CompleteCommit"]
    asyncio.run(scenario())


def test_markers_slower_than_the_wait_still_answer_concurrent_transactions(monkeypatch):
    monkeypatch.setattr(coordinator_module, "MARKERS_WAIT_MS", 20)

    async def scenario():
        replicas, markers, coordinator, meta, end = await committed_with_markers_held()
        added = await coordinator.add_partitions("tx", meta.producer_id, end.answer.producer_epoch, frozenset({TP0}))
        assert added.error == ErrorCode.CONCURRENT_TRANSACTIONS and coordinator.describe("tx").state is S.PREPARE_COMMIT
        markers.gate.set()
        await settled(coordinator)
    asyncio.run(scenario())


def test_decisions_waiting_for_a_write_go_out_together_and_are_answered_only_once_durable():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        gate = asyncio.Event()
        write = replicas.produce

        async def slow_produce(acks, timeout_ms, items):  # the write replicates only once the gate opens
            await gate.wait()
            return await write(acks, timeout_ms, items)
        replicas.produce = slow_produce
        first = asyncio.ensure_future(coordinator.init_producer_id("a", 5000))
        await until(lambda: coordinator.shards[0].writer is not None)
        later = [asyncio.ensure_future(coordinator.init_producer_id(tid, 5000)) for tid in ("b", "c", "b")]
        await until(lambda: len(coordinator.shards[0].queue) == 3)
        assert not any(f.done() for f in [first, *later]) and replicas.writes == 0  # nothing answered before durable
        gate.set()
        answers = [await f for f in [first, *later]]
        assert [a.error for a in answers] == [ErrorCode.NONE] * 4
        assert replicas.writes == 2  # "a" alone, then "b", "c", "b" in one batch
        b1, b2 = answers[1].answer, answers[3].answer
        assert b2.producer_id == b1.producer_id and b2.producer_epoch == b1.producer_epoch + 1  # in order, on the first's result
        assert coordinator.describe("b") == b2
    asyncio.run(scenario())


def test_a_failed_batch_write_refuses_every_decision_in_it_and_changes_nothing():
    async def scenario():
        replicas = FakeReplicas()
        coordinator = await loaded(replicas)
        meta = await open_txn(coordinator)
        before = coordinator.describe("tx")
        gate = asyncio.Event()
        write = replicas.produce

        async def failing_produce(acks, timeout_ms, items):
            await gate.wait()
            replicas.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
            return await write(acks, timeout_ms, items)
        replicas.produce = failing_produce
        calls = [coordinator.init_producer_id("other", 5000),
                 coordinator.add_partitions("tx", meta.producer_id, meta.producer_epoch, frozenset({TopicPartition("t", 2)})),
                 coordinator.end_txn("tx", meta.producer_id, meta.producer_epoch, commit=True)]
        futures = [asyncio.ensure_future(c) for c in calls]
        await until(lambda: coordinator.shards[0].writer is not None)
        gate.set()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(o, Refused) and o.code == ErrorCode.COORDINATOR_NOT_AVAILABLE for o in outcomes), outcomes
        assert coordinator.describe("tx") == before and coordinator.describe("other") is None
        assert not coordinator.shards[0].completing  # no marker for a decision that never became durable
    asyncio.run(scenario())
