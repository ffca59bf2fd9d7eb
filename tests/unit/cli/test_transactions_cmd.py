"""``kraftlog transactions list | describe`` against in-process fakes of a broker and a
transaction coordinator: an open transaction is listed and described with its partitions,
the state filter hides it, and an unknown id is an error naming what to check."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

import pytest

from cli.main import main
from cli.transactions_cmd import utc_time
from data_plane.client import Producer
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_txn_coordinator import FakeTxnCoordinator

pytestmark = pytest.mark.timeout(60)


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@contextmanager
def open_transaction(transactional_id: str, partitions: int, partition: int) -> Iterator[tuple[FakeBroker, Producer]]:
    """A fake broker and coordinator, and a producer with a transaction open on ``t``-``partition``."""
    broker = FakeBroker({"t": partitions})
    FakeTxnCoordinator(broker)
    with broker, Producer(broker.address, transactional_id=transactional_id, linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"v", partition=partition).result()
        yield broker, producer


def test_list_and_describe_an_open_transaction(capsys):
    with open_transaction("tx-cli", 2, 1) as (broker, producer):
        code, out, _ = run(capsys, "transactions", "list", "--bootstrap", broker.address)
        assert code == 0 and "tx-cli" in out and "Ongoing" in out
        code, out, _ = run(capsys, "transactions", "list", "--state", "CompleteCommit", "--json", "--bootstrap", broker.address)
        assert code == 0 and json.loads(out) == []
        code, out, _ = run(capsys, "transactions", "describe", "tx-cli", "--json", "--bootstrap", broker.address)
        described = json.loads(out)
        assert code == 0 and described["state"] == "Ongoing" and described["partitions"] == {"t": [1]}
        assert described["producer_epoch"] == 0 and described["transaction_timeout_ms"] == 60_000
        code, _, err = run(capsys, "transactions", "describe", "nope", "--bootstrap", broker.address)
        assert code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err
        producer.commit_transaction()


def test_the_table_shows_a_transactions_start_as_a_utc_time(capsys):
    with open_transaction("tx-start", 1, 0) as (broker, _):
        code, out, _ = run(capsys, "transactions", "describe", "tx-start", "--json", "--bootstrap", broker.address)
        start_ms = json.loads(out)["transaction_start_ms"]
        code, out, _ = run(capsys, "transactions", "describe", "tx-start", "--bootstrap", broker.address)
    assert code == 0 and "STARTED (UTC)" in out
    assert utc_time(start_ms) in out.splitlines()[2]
    assert utc_time(1795766804897) == "2026-11-27T08:06:44.897Z" and utc_time(-1) is None
