"""KIP-890 parts 1 and 2 on the partition leader, over a real replica manager and partition log with a
fake coordinator: a transactional producer's first batch on a partition is verified once per
transaction, an unverified one is refused without touching the log or the LSO, a zombie is
fenced with PRODUCER_FENCED; a producer that leaves the add to the leader has the
partition added once per transaction; pipelined questions share one answer; and retention (the log
start moving) trims the aborted-transaction index, across a restart too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from data_plane import record_batch
from data_plane.partition_errors import PartitionError
from data_plane.requests import ProduceItem
from data_plane.broker.txn_verification import TxnVerifier, coordinator_partition, produce_error
from data_plane.control_batch import ControlType
from server_common.internal_topics import TRANSACTION_STATE_TOPIC, offsets_partition
from kraftlog_proto import transaction_pb2
from server_common.errors import ErrorCode
from data_plane.replication.transaction_index import AbortedTxn
from tests.unit.broker.test_read_committed import T0, TP, latest, leader_alone, mark

PID = 11


class FakeVerifier:
    """The coordinator's answer: (producer id, epoch) pairs whose transaction includes the partition."""

    def __init__(self, ongoing: set[tuple[int, int]], before_answer=lambda: None) -> None:
        self.ongoing = ongoing
        self.asked: list[tuple] = []
        self.before_answer = before_answer  # what the coordinator finishes first (the last transaction's markers)

    async def verify(self, transactional_id: str, topic: str, partition: int, producer_id: int, epoch: int,
                     add: bool = False) -> PartitionError | None:
        self.asked.append((transactional_id, producer_id, epoch) + (("add",) if add else ()))
        self.before_answer()
        if add:  # the coordinator adds the partition (KIP-890 part 2)
            self.ongoing.add((producer_id, epoch))
        if (producer_id, epoch) in self.ongoing:
            return None
        return produce_error(f"{topic}-{partition}", producer_id, epoch, ErrorCode.INVALID_TXN_STATE, "add the partition first")


def txn(epoch: int, seq: int, transactional: bool = True) -> bytes:
    return record_batch.encode_batch([b"v"], timestamps_ms=T0, producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                                     transactional=transactional)


def produce(replicas, data: bytes, transactional_id: str = "tx", add: bool = False):
    [answer] = asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, data)], transactional_id, add))
    return answer


def test_the_first_batch_of_each_transaction_is_verified_once(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    verifier = replicas.txn_verifier = FakeVerifier({(PID, 0), (PID, 1)})
    assert not produce(replicas, txn(0, 0)).failed
    assert not produce(replicas, txn(0, 1)).failed and not produce(replicas, txn(0, 2)).failed
    assert verifier.asked == [("tx", PID, 0)]  # the open transaction is the cached answer
    mark(replicas, PID, ControlType.COMMIT)  # epoch 1: the next transaction
    assert not produce(replicas, txn(1, 0)).failed
    assert verifier.asked == [("tx", PID, 0), ("tx", PID, 1)]
    plain = record_batch.encode_batch([b"p"], timestamps_ms=T0, producer_id=PID + 1, producer_epoch=0, base_sequence=0)
    assert not produce(replicas, plain, "").failed and len(verifier.asked) == 2  # not transactional: nothing to ask


def test_a_producer_that_leaves_the_add_to_the_leader_has_it_asked_for_once_per_transaction(tmp_path: Path) -> None:
    """KIP-890 part 2: with ``add_to_transaction`` the leader asks the coordinator to add the
    partition (not only to confirm it), once per transaction, even with verification off."""
    replicas = leader_alone(tmp_path)
    verifier = replicas.txn_verifier = FakeVerifier(set())
    replicas.verify_transactions = False
    assert not produce(replicas, txn(0, 0), add=True).failed and not produce(replicas, txn(0, 1), add=True).failed
    assert verifier.asked == [("tx", PID, 0, "add")]
    assert (latest(replicas, False), latest(replicas, True)) == (2, 0)  # open: the coordinator knows it, a marker closes it
    mark(replicas, PID, ControlType.COMMIT)
    assert not produce(replicas, txn(1, 0)).failed  # an older client, verification off: nothing asked
    assert verifier.asked == [("tx", PID, 0, "add")]


def test_the_next_transactions_first_batch_before_the_last_ones_marker_waits_for_the_coordinator(tmp_path: Path) -> None:
    """A producer whose leader adds its partitions sends its next transaction's first batch
    (a newer epoch) at once, maybe before the last transaction's marker is here: the leader
    asks (the coordinator answers once that marker is written) rather than appending it into
    the transaction the marker closes."""
    replicas = leader_alone(tmp_path)
    markers: list[int] = []
    verifier = replicas.txn_verifier = FakeVerifier(set(), lambda: markers and mark(replicas, PID, ControlType.COMMIT))
    assert not produce(replicas, txn(0, 0), add=True).failed
    markers.append(1)  # committed (epoch bumped to 1), its marker not written yet
    assert not produce(replicas, txn(1, 0), add=True).failed
    assert verifier.asked == [("tx", PID, 0, "add"), ("tx", PID, 1, "add")]
    assert (latest(replicas, True), latest(replicas, False)) == (2, 3)  # the marker at 1 closed only the first; the next is open


def test_an_unverified_batch_is_refused_and_leaves_the_lso_alone(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    verifier = replicas.txn_verifier = FakeVerifier(set())
    refused = produce(replicas, txn(0, 0))
    assert refused.error.code is ErrorCode.INVALID_TXN_STATE and "add the partition first" in refused.error.message
    assert latest(replicas, False) == latest(replicas, True) == 0
    assert len(verifier.asked) == 1
    replicas.txn_verifier = None  # negative control: without verification the batch hangs a transaction
    assert not produce(replicas, txn(0, 0)).failed
    assert (latest(replicas, False), latest(replicas, True)) == (1, 0)


def test_a_zombie_is_fenced_at_the_partition_without_asking(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    verifier = replicas.txn_verifier = FakeVerifier({(PID, 0)})
    assert not produce(replicas, txn(0, 0)).failed
    mark(replicas, PID, ControlType.ABORT)  # the abort bumps the epoch to 1
    late = produce(replicas, txn(0, 1))
    assert late.error.code is ErrorCode.PRODUCER_FENCED and "close this producer" in late.error.message
    assert verifier.asked == [("tx", PID, 0)]
    idempotent = produce(replicas, txn(0, 1, transactional=False), "")
    assert idempotent.error.code is ErrorCode.INVALID_PRODUCER_EPOCH  # as Kafka: only transactional batches get 81


def test_the_group_coordinators_transactional_offsets_write_is_verified_too(tmp_path: Path) -> None:
    """TxnOffsetCommit's batch (``from_coordinator``: always sequence 0, checked by epoch) is
    asked about once per transaction, as a client's first batch is."""
    def coordinator_write(replicas):
        [answer] = asyncio.run(replicas.produce(1, 1000, [ProduceItem(*TP, txn(0, 0), from_coordinator=True)], "tx"))
        return answer

    replicas = leader_alone(tmp_path)
    verifier = replicas.txn_verifier = FakeVerifier(set())
    refused = coordinator_write(replicas)
    assert refused.error.code is ErrorCode.INVALID_TXN_STATE and latest(replicas, False) == 0  # nothing written
    verifier.ongoing.add((PID, 0))  # the producer added the offsets partition to its transaction
    assert not coordinator_write(replicas).failed and not coordinator_write(replicas).failed  # a second group's offsets
    assert verifier.asked == [("tx", PID, 0)] * 2 and (latest(replicas, False), latest(replicas, True)) == (2, 0)
    fresh = leader_alone(tmp_path / "unverified")  # negative control: unverified, the same write opens a transaction
    assert not coordinator_write(fresh).failed and (latest(fresh, False), latest(fresh, True)) == (1, 0)


async def _never(request):
    raise AssertionError("not this broker's coordinator")


class Gated(TxnVerifier):
    """The real verifier (its sharing of in-flight questions) over a coordinator that answers
    ``code`` once ``gate`` opens, counting the calls."""

    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        super().__init__(None, lambda broker: None, None, 1, _never)
        self.code = code
        self.calls = 0
        self.gate = asyncio.Event()

    async def _ask(self, *key) -> tuple[ErrorCode, str]:
        self.calls += 1
        await self.gate.wait()
        return self.code, "moving"


def test_a_pipelining_producers_next_batch_waits_for_the_first_ones_answer(tmp_path: Path) -> None:
    """Sequence 1 arrives while sequence 0 awaits its verification: it shares the question and
    appends after it, instead of being refused as out of order."""
    replicas = leader_alone(tmp_path)

    async def scenario():
        verifier = replicas.txn_verifier = Gated()
        verifier.gate.set()
        [done] = await replicas.produce(1, 1000, [ProduceItem(*TP, txn(0, 0))], "tx")  # 0
        assert not done.failed
        mark(replicas, PID, ControlType.COMMIT)  # 1: epoch 1 known here, no batch: the next must start at 0
        verifier.gate.clear()
        first = asyncio.ensure_future(replicas.produce(1, 1000, [ProduceItem(*TP, txn(1, 0))], "tx"))
        second = asyncio.ensure_future(replicas.produce(1, 1000, [ProduceItem(*TP, txn(1, 1))], "tx"))
        plain = await replicas.produce(1, 1000, [ProduceItem(*TP, record_batch.encode_batch([b"p"], timestamps_ms=T0))])
        assert plain[0].base_offset == 2  # another producer of the partition does not wait
        verifier.gate.set()
        [[a], [b]] = await asyncio.gather(first, second)
        assert not a.failed and not b.failed, (a.error, b.error)
        assert (a.base_offset, b.base_offset) == (3, 4) and verifier.calls == 2
    asyncio.run(scenario())


def test_pipelined_questions_share_one_answer() -> None:
    async def scenario():
        verifier = Gated(ErrorCode.NOT_COORDINATOR)
        asks = [asyncio.ensure_future(verifier.verify("tx", "t", 0, PID, 0)) for _ in range(3)]
        other = asyncio.ensure_future(verifier.verify("tx", "t", 1, PID, 0))
        await asyncio.sleep(0)
        verifier.gate.set()
        answers = await asyncio.gather(*asks, other)
        assert verifier.calls == 2 and not verifier._in_flight
        assert {a.code for a in answers} == {ErrorCode.NOT_ENOUGH_REPLICAS}  # retriable for every producer
        assert all("retry" in a.message for a in answers)
        no_id = await verifier.verify("", "t", 0, PID, 0)
        assert no_id.code is ErrorCode.INVALID_TXN_STATE and "transactional_id" in no_id.message and verifier.calls == 2
    asyncio.run(scenario())


def test_the_question_goes_in_process_to_this_brokers_own_coordinator_and_through_grpc_to_another() -> None:
    """The same request either way; only the transport follows where the coordinator is. The
    negative control: the same question when another broker coordinates never reaches the
    in-process one (and with that broker unreachable it is answered retriable)."""
    asked = []

    async def own(request):
        asked.append(request)
        return transaction_pb2.AddPartitionsToTxnResponse(error_code=ErrorCode.PRODUCER_FENCED, error_message="close it")

    def replicas(coordinator: int):
        image = SimpleNamespace(topics={TRANSACTION_STATE_TOPIC: SimpleNamespace(partitions={i: None for i in range(3)})})
        return SimpleNamespace(image=image, leader_hint=lambda topic, index: SimpleNamespace(leader_id=coordinator))

    async def scenario():
        here = TxnVerifier(replicas(1), lambda broker: None, None, 1, own)
        fenced = await here.verify("tx", "t", 0, PID, 0, add=True)
        assert fenced.code is ErrorCode.PRODUCER_FENCED and fenced.message.endswith("close it")
        [request] = asked
        assert (request.transactional_id, request.producer_id, request.add_for_produce, request.verify_only) == ("tx", PID, True, False)
        assert [(t.topic, list(t.partitions)) for t in request.topics] == [("t", [0])]
        elsewhere = TxnVerifier(replicas(2), lambda broker: None, None, 1, own)
        unreachable = await elsewhere.verify("tx", "t", 0, PID, 0, add=True)
        assert unreachable.code is ErrorCode.NOT_ENOUGH_REPLICAS and len(asked) == 1
    asyncio.run(scenario())


def test_answers_map_to_produce_errors() -> None:
    assert produce_error("t-0", PID, 0, ErrorCode.NONE, "") is None
    for code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
        error = produce_error("t-0", PID, 0, code, "what to do")
        assert error.code is code and error.message.endswith("what to do")
    assert coordinator_partition("tx", 0) is None and coordinator_partition("tx", 7) == offsets_partition("tx", 7)


def test_the_log_start_moving_trims_the_aborted_index_and_the_trim_survives_a_restart(tmp_path: Path) -> None:
    replicas = leader_alone(tmp_path)
    assert not produce(replicas, txn(0, 0)).failed                  # 0
    mark(replicas, PID, ControlType.ABORT)                          # 1
    assert not produce(replicas, txn(1, 0)).failed                  # 2
    mark(replicas, PID, ControlType.ABORT)                          # 3
    partition = replicas.partitions[TP]
    partition.delete_records_before(1)  # the first abort's marker stays: its entry is not wholly below
    assert partition.aborted_transactions(0, 10) == [AbortedTxn(0, 1, PID), AbortedTxn(2, 3, PID)]
    partition.delete_records_before(2)
    assert partition.aborted_transactions(0, 10) == [AbortedTxn(2, 3, PID)]
    replicas.logs.close()
    restarted = leader_alone(tmp_path)
    assert restarted.partitions[TP].log_start_offset == 2
    assert restarted.partitions[TP].aborted_transactions(0, 10) == [AbortedTxn(2, 3, PID)]
