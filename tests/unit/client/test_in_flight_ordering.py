"""Up to five requests in flight per partition, against the leader's real sequence rules
(data_plane/replication/producer_state.py), explored over Hypothesis interleavings.

The accumulator is the pure core the sender drives (record_accumulator.py, idempotence.py);
here a simulated network drives it instead: requests reach the leader in any order (gRPC does
not promise otherwise), the leader may refuse a batch before appending it, append it and lose
the answer, or never see the request; answers come back in any order; queued batches expire;
and, with nothing in flight, a transaction ends (its markers bump the producer's epoch on the
partitions it wrote, KIP-890) or the producer gets a new id (InitProducerId).
`Client.receive` does with an answer what Sender._settle does: asks the producer's pure
decision (produce_answers.decide) and carries it out.
Whatever the interleaving, every partition's log holds its records in send order, each once,
every acknowledged record at the offset its acknowledgement named, and nothing already
numbered is sent again under other numbers while it may be in the log. After the faults
stop, every record is delivered or failed, and a record that failed with a definite answer
is not in the log.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_plane.client.errors import KraftlogError
from data_plane.client.idempotence import BATCHES_UNRESOLVED_MAX
from data_plane.client.produce_answers import Appended, Complete, Fail, ResetSequence, Retry, RetryRules, decide
from data_plane.client.producer_batch import ProducerBatch, record_size_bytes
from data_plane.client.producer_options import ProducerOptions
from data_plane.client.record_accumulator import RecordAccumulator
from data_plane.client.sender import batch_state
from server_common.errors import ErrorCode
from data_plane.replication.producer_state import Duplicate, ProducerState, Rejected

TPS = [("t", 0), ("t", 1)]
MARKER = -1  # a marker's place in a simulated log (values are never negative)
DELIVERY_TIMEOUT_MS = 1_000
RETRIES = 50
RULES = RetryRules(retries=RETRIES, retry_backoff_ms=0, retry_backoff_max_ms=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS, idempotent=True)


@dataclass(frozen=True)
class Sent:
    """A batch as it left in one request: its numbers then, and its records."""

    batch: ProducerBatch
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class Header:
    """What ProducerState.check_run reads of a batch header."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    is_transactional: bool = False


class Leader:
    """The leader of every partition: the broker's sequence check, a log of values."""

    def __init__(self) -> None:
        self.state: dict[tuple, ProducerState] = defaultdict(ProducerState)
        self.log: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # (value, producer id)

    def handle(self, tp: tuple, sent: list[Sent], fault: str) -> tuple[str | None, int]:
        """One partition's part of a request: (error code or None, base offset)."""
        if fault == "refuse":  # refused before anything is appended (no outcome doubt)
            return "NOT_ENOUGH_REPLICAS", -1
        headers = [Header(s.producer_id, s.producer_epoch, s.base_sequence, s.record_count) for s in sent]
        verdict = self.state[tp].check_run(headers)
        if isinstance(verdict, Rejected):
            assert verdict.error == ErrorCode.OUT_OF_ORDER_SEQUENCE, verdict
            return "OUT_OF_ORDER_SEQUENCE", -1
        if isinstance(verdict, Duplicate):
            return ("REQUEST_TIMED_OUT" if fault == "lose" else None), verdict.first_offset
        base = len(self.log[tp])
        for s in sent:
            first = len(self.log[tp])
            self.log[tp].extend((v, s.producer_id) for v in s.values)
            self.state[tp].on_appended(s.producer_id, s.producer_epoch, s.base_sequence, first, first + s.record_count - 1)
        return ("REQUEST_TIMED_OUT" if fault == "lose" else None), base

    def write_marker(self, tp: tuple, producer_id: int, producer_epoch: int) -> None:
        """A transaction marker with the producer's next epoch (the coordinator's, at a
        transaction's end): one offset in the log, no value."""
        self.state[tp].on_marker(producer_id, producer_epoch, len(self.log[tp]))
        self.log[tp].append((MARKER, producer_id))


class Client:
    """The accumulator plus what the sender does around it, with a clock and a network."""

    def __init__(self, in_flight: int, leader: Leader) -> None:
        self.leader = leader
        self.acc = RecordAccumulator(ProducerOptions(batch_size=100, linger_ms=0, max_request_size=10_000, max_in_flight_per_partition=in_flight))  # one 100-byte record fills a batch
        self.acc.new_producer_id(1, 0)
        self.in_flight = in_flight
        self.next_producer_id = 2
        self.now = 0.0
        self.next_value: dict[tuple, int] = defaultdict(int)
        self.on_wire: list[list[Sent]] = []  # requests not yet at the leader
        self.answers: list[tuple[list[Sent], dict[tuple, tuple[str | None, int]]]] = []
        self.acked: dict[int, tuple[tuple, int]] = {}  # value -> (tp, offset); values unique across tps
        self.failed: dict[int, bool] = {}  # value -> outcome unknown
        self.numbers_of: dict[int, tuple[int, int, int]] = {}  # id(batch) -> numbers of its last attempt
        self.first_sequences: dict[tuple, list[int]] = defaultdict(list)

    def send(self, tp: tuple) -> None:
        value = self.next_value[tp] * len(TPS) + TPS.index(tp)  # unique, increasing per partition
        self.next_value[tp] += 1
        payload = str(value).encode().ljust(84, b".")
        self.acc.append(tp, payload, None, None, value, record_size_bytes(payload, None, None), self.now)

    def drain(self) -> None:
        for batches in self.acc.drain({1}, lambda tp: 1, self.now).values():
            self.on_wire.append([self._sent(b) for b in batches])

    def _sent(self, batch: ProducerBatch) -> Sent:
        numbers = (batch.producer_id, batch.producer_epoch, batch.base_sequence)
        before = self.numbers_of.get(id(batch))
        if before is None:
            self.first_sequences[(batch.tp, batch.producer_id, batch.producer_epoch)].append(batch.base_sequence)
        elif before != numbers:  # renumbered: only once it cannot be in the log under the old ones
            assert not any(v in self.logged_values(batch.tp) for v in self.values(batch)), (batch.tp, before, numbers)
        self.numbers_of[id(batch)] = numbers
        return Sent(batch, batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.record_count, self.values(batch))

    @staticmethod
    def values(batch: ProducerBatch) -> tuple[int, ...]:
        return tuple(batch.timestamps)  # the test stores each record's value as its timestamp

    def logged_values(self, tp: tuple) -> set[int]:
        return {v for v, _ in self.leader.log[tp] if v != MARKER}

    def deliver(self, pick: int, fault: str) -> None:
        """The request `pick` reaches the leader (or is lost on the way)."""
        request = self.on_wire.pop(pick % len(self.on_wire))
        by_tp: dict[tuple, list[Sent]] = defaultdict(list)
        for s in request:
            by_tp[s.batch.tp].append(s)
        if fault == "unreachable":  # a transport error: the client cannot tell whether it arrived
            answers = {tp: ("UNAVAILABLE", -1) for tp in by_tp}
        else:
            answers = {tp: self.leader.handle(tp, sent, fault) for tp, sent in by_tp.items()}
        self.answers.append((request, answers))

    def receive(self, pick: int) -> None:
        """An answer comes back: the sender's settling of each batch (sender.py)."""
        request, answers = self.answers.pop(pick % len(self.answers))
        next_offset: dict[tuple, int] = {}
        pending = []
        for s in request:
            code, base = answers[s.batch.tp]
            if code is None:
                offset = next_offset.get(s.batch.tp, base)
                next_offset[s.batch.tp] = offset + s.record_count
                answer: Appended | KraftlogError = Appended(offset, -1)
            elif code == "UNAVAILABLE":  # the request may have reached the leader
                s.batch.outcome_unknown = True
                answer = KraftlogError(ErrorCode.BROKER_NOT_AVAILABLE, "unreachable")
            else:
                answer = KraftlogError(ErrorCode[code], "refused")
            decision = decide(batch_state(s.batch), answer, self.now, RULES)
            match decision:
                case Complete(base_offset=offset):
                    for i, v in enumerate(s.values):
                        self.acked[v] = (s.batch.tp, offset + i)
                    self.acc.completed(s.batch, delivered=True)
                    continue
                case ResetSequence() | Fail(reset_sequence=True):
                    self.acc.out_of_order(s.batch, reset=True)
                case Retry(not_appended=True):
                    self.acc.out_of_order(s.batch, reset=False)
                case Retry(outcome_unknown=unknown) | Fail(outcome_unknown=unknown):
                    s.batch.outcome_unknown = unknown
            pending.append((s.batch, decision))
        for batch, decision in reversed(pending):
            if isinstance(decision, Fail):
                self.fail(batch)
            else:
                self.acc.reenqueue(batch, self.now, decision.backoff_ms)
        for tp in {s.batch.tp for s in request}:
            self.acc.request_done(tp)

    def fail(self, batch: ProducerBatch) -> None:
        self.acc.batch_failed(batch)
        self.acc.completed(batch)
        for v in self.values(batch):
            self.failed[v] = batch.outcome_unknown

    def idle(self) -> bool:
        return not self.acc.has_incomplete() and not self.on_wire and not self.answers

    def end_transaction(self, marked: int) -> None:
        """The transaction ends: markers with the next epoch go to the partitions picked by the
        bits of ``marked`` that the leader knows the producer on, then the accumulator starts
        the epoch (TransactionManager._end)."""
        producer_id, epoch = self.acc.producer_id, self.acc.producer_epoch + 1
        for i, tp in enumerate(TPS):
            if marked >> i & 1 and self.leader.state[tp].epoch_of(producer_id) is not None:
                self.leader.write_marker(tp, producer_id, epoch)
        self.acc.start_epoch(producer_id, epoch)

    def init_producer_id(self) -> None:
        """InitProducerId answered with a new producer id."""
        self.acc.start_epoch(self.next_producer_id, 0)
        self.next_producer_id += 1

    def tick(self, ms: float) -> None:
        self.now += ms
        for batch in self.acc.expire(self.now, DELIVERY_TIMEOUT_MS):
            self.fail(batch)
        if self.acc.needs_new_producer_id():
            self.acc.new_producer_id(self.next_producer_id, 0)
            self.next_producer_id += 1


def check(client: Client, leader: Leader) -> None:
    """What must hold after every step."""
    for tp in TPS:
        values = [v for v, _ in leader.log[tp] if v != MARKER]
        assert values == sorted(set(values)), f"{tp}: reordered or duplicated: {values}"
        state = client.acc._sequences.get(tp)
        if state is not None:
            assert len(state.window) <= BATCHES_UNRESOLVED_MAX
        assert client.acc._in_flight.get(tp, 0) <= client.in_flight
    for (tp, producer_id, epoch), firsts in client.first_sequences.items():
        assert firsts == sorted(firsts), f"{tp}: first attempts under {producer_id} (epoch {epoch}) out of order: {firsts}"
    for v, (tp, offset) in client.acked.items():
        assert leader.log[tp][offset][0] == v, (v, tp, offset)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "send", "drain", "drain", "deliver", "deliver", "receive", "receive", "tick", "end", "init"]),
        st.integers(0, 7),
        st.sampled_from(["ok", "ok", "refuse", "lose", "unreachable"]),
    ),
    min_size=20,
    max_size=150,
)


def run(ops, in_flight: int) -> tuple[Client, Leader]:
    leader = Leader()
    client = Client(in_flight, leader)
    for op, pick, fault in ops:
        if op == "send":
            client.send(TPS[pick % len(TPS)])
        elif op == "drain":
            client.drain()
        elif op == "deliver" and client.on_wire:
            client.deliver(pick, fault)
        elif op == "receive" and client.answers:
            client.receive(pick)
        elif op == "tick":
            client.tick(pick * 100)
        elif op == "end" and client.idle():
            client.end_transaction(pick)
        elif op == "init" and client.idle():
            client.init_producer_id()
        check(client, leader)
    # the faults stop: everything settles (new producer ids, retries, expiry)
    for _ in range(10_000):
        if not client.acc.has_incomplete():
            break
        client.drain()
        while client.on_wire:
            client.deliver(0, "ok")
        while client.answers:
            client.receive(0)
        client.tick(10)
        check(client, leader)
    assert not client.acc.has_incomplete(), "records neither delivered nor failed"
    for v, unknown in client.failed.items():
        tp = TPS[v % len(TPS)]
        assert unknown or v not in client.logged_values(tp), f"{v} failed as not written, yet it is in the log"
    for tp in TPS:
        logged = client.logged_values(tp)
        sent = {v * len(TPS) + TPS.index(tp) for v in range(client.next_value[tp])}
        assert sent - logged <= set(client.failed), "a record neither in the log nor failed"
    return client, leader


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(1, 5))
def test_any_interleaving_keeps_every_partition_in_send_order_once(ops, in_flight):
    run(ops, in_flight)


def test_five_requests_go_out_before_the_first_answer_once_the_leader_knows_the_producer():
    leader = Leader()
    client = Client(5, leader)
    client.send(TPS[0])
    client.drain()
    client.send(TPS[0])
    client.drain()
    assert len(client.on_wire) == 1  # the first batch of a producer id goes alone
    client.deliver(0, "ok")
    client.receive(0)
    client.drain()
    for _ in range(4):
        client.send(TPS[0])
        client.drain()
    assert len(client.on_wire) == 5
    client.send(TPS[0])
    client.drain()
    assert len(client.on_wire) == 5  # a sixth waits: the leader checks a retry against five batches


def one_batch_acknowledged() -> tuple[Leader, Client]:
    """A client (five in flight) whose first batch on TPS[0] the leader has acknowledged."""
    leader = Leader()
    client = Client(5, leader)
    client.send(TPS[0])
    client.drain()
    client.deliver(0, "ok")
    client.receive(0)
    return leader, client


def test_a_new_producer_id_starts_every_partition_over_with_one_batch():
    _, client = one_batch_acknowledged()
    client.init_producer_id()
    client.send(TPS[0])
    client.drain()
    client.send(TPS[0])
    client.drain()
    assert len(client.on_wire) == 1  # the leader does not know the new id: any sequence would do for it


def test_carrying_what_the_leader_knows_to_a_new_producer_id_reorders(monkeypatch):
    """Negative control: a new producer id that starts with five in flight, as if the leader
    knew it, lets a batch that went out behind a refused first one be written ahead of it."""
    from data_plane.client import record_accumulator
    from data_plane.client.idempotence import PartitionSequence

    def start_epoch(self, producer_id, producer_epoch):
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._sequences = {tp: PartitionSequence(producer_id, producer_epoch, acknowledged=s.acknowledged)
                           for tp, s in self._sequences.items()}

    monkeypatch.setattr(record_accumulator.RecordAccumulator, "start_epoch", start_epoch)
    ops = [("send", 0, "ok"), ("drain", 0, "ok"), ("deliver", 0, "ok"), ("receive", 0, "ok"), ("init", 0, "ok"),
           ("send", 0, "ok"), ("drain", 0, "ok"), ("send", 0, "ok"), ("drain", 0, "ok"),
           ("deliver", 0, "refuse"), ("deliver", 0, "ok"), ("receive", 0, "ok"), ("receive", 0, "ok")]
    with pytest.raises(AssertionError, match="reordered"):
        run(ops, 5)


def test_a_batch_that_overtook_an_earlier_one_is_retried_without_a_reset():
    leader, client = one_batch_acknowledged()
    for _ in range(2):
        client.send(TPS[0])
        client.drain()
    client.deliver(1, "ok")  # the second request reaches the leader first
    client.receive(0)
    assert not client.acc.needs_new_producer_id()
    client.deliver(0, "ok")
    client.receive(0)
    client.drain()
    client.deliver(0, "ok")
    client.receive(0)
    assert [v for v, _ in leader.log[TPS[0]]] == [0, 2, 4]
    assert {pid for _, pid in leader.log[TPS[0]]} == {1}  # no new producer id was needed


def test_the_checker_catches_a_reordered_log():
    """Negative control: the invariants fail on a log written out of send order."""
    leader = Leader()
    client = Client(5, leader)
    leader.log[TPS[0]] = [(2, 1), (0, 1)]
    with pytest.raises(AssertionError, match="reordered"):
        check(client, leader)


def test_without_sequence_order_on_retry_the_interleavings_reorder(monkeypatch):
    """Negative control: a retry that goes back to the head of its queue regardless of
    sequence order, sent without waiting for earlier batches, must break an invariant."""
    from data_plane.client import record_accumulator

    monkeypatch.setattr(record_accumulator.RecordAccumulator, "_blocked",
                        lambda self, tp, queue: self._in_flight.get(tp, 0) >= self.in_flight_per_partition_max)
    ops = [("send", 0, "ok"), ("drain", 0, "ok"), ("send", 0, "ok"), ("drain", 0, "ok"), ("send", 0, "ok"),
           ("drain", 0, "ok"), ("deliver", 0, "refuse"), ("receive", 0, "ok"), ("deliver", 0, "ok"),
           ("receive", 0, "ok"), ("drain", 0, "ok"), ("deliver", 0, "ok"), ("deliver", 0, "ok")]
    with pytest.raises(AssertionError):
        run(ops, 5)
