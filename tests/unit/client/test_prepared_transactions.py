"""Two-phase transactions (data_plane/client/prepared_transactions.py) against the fake broker
and the fake coordinator running the real state machine: a transaction prepared by one
producer, which then closes, is committed or aborted by `end_prepared` with nothing but its
ids; a newer producer with the same id aborts and fences an unended one; a retried decision
is answered as the first."""

from __future__ import annotations

import pytest

from data_plane.client import KraftlogError, Producer
from data_plane.client.prepared_transactions import PreparedTransaction, end_prepared
from data_plane.client.transactions import ProducerFencedError
from data_plane.transactions import state_machine as sm
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_txn_coordinator import FakeTxnCoordinator


@pytest.fixture
def cluster():
    broker = FakeBroker({"t": 2})
    coordinator = FakeTxnCoordinator(broker)
    with broker:
        yield broker, coordinator


def producer(broker: FakeBroker) -> Producer:
    return Producer(broker.address, transactional_id="tx", linger_ms=0, max_block_ms=5000, delivery_timeout_ms=5000)


def prepare(broker: FakeBroker, values: int = 3) -> PreparedTransaction | None:
    """A transaction of ``values`` records prepared by a producer that is then closed."""
    with producer(broker) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(values):
            p.send("t", b"%d" % i, partition=i % 2)
        return p.prepare_transaction()


@pytest.mark.parametrize("commit", [True, False])
def test_a_closed_producers_prepared_transaction_is_ended_by_its_ids(cluster, commit):
    broker, coordinator = cluster
    prepared = prepare(broker)
    assert prepared == PreparedTransaction("tx", coordinator.meta.producer_id, coordinator.meta.producer_epoch)
    assert coordinator.meta.state is sm.TxnState.ONGOING  # closing the producer did not end it
    assert sum(len(list(broker.stored(("t", p)))) for p in range(2)) >= 2  # its records were delivered before prepare returned
    end_prepared(broker.address, [prepared], commit=commit)
    assert coordinator.meta.state is (sm.TxnState.COMPLETE_COMMIT if commit else sm.TxnState.COMPLETE_ABORT)
    assert coordinator.events[-1] == f"end {'commit' if commit else 'abort'}"
    end_prepared(broker.address, [prepared], commit=commit)  # a retried decision: the same answer


def test_a_transaction_that_wrote_nothing_has_nothing_to_end(cluster):
    broker, coordinator = cluster
    assert prepare(broker, values=0) is None
    assert not any(e.startswith("end") for e in coordinator.events)


def test_the_next_incarnation_aborts_an_unended_prepared_transaction_and_fences_it(cluster):
    broker, coordinator = cluster
    prepared = prepare(broker)
    with producer(broker) as successor:
        successor.init_transactions()
    assert coordinator.meta.state is sm.TxnState.EMPTY and not coordinator.meta.partitions  # aborted, then registered anew
    assert coordinator.meta.producer_epoch > prepared.producer_epoch
    with pytest.raises(ProducerFencedError):
        end_prepared(broker.address, [prepared], commit=True)


def test_a_prepared_producer_must_register_again_before_its_next_transaction(cluster):
    broker, _ = cluster
    with producer(broker) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"x", partition=0)
        p.prepare_transaction()
        with pytest.raises(KraftlogError, match="init_transactions"):
            p.begin_transaction()
        with pytest.raises(KraftlogError, match="no transaction open"):
            p.prepare_transaction()
