"""``kraftlog transactions list | describe`` against in-process fakes of a broker and a
transaction coordinator: an open transaction is listed and described with its partitions,
the state filter hides it, and an unknown id is an error naming what to check."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from data_plane.client import Producer
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_txn_coordinator import FakeTxnCoordinator

pytestmark = pytest.mark.timeout(60)


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_and_describe_an_open_transaction(capsys):
    broker = FakeBroker({"t": 2})
    FakeTxnCoordinator(broker)
    with broker, Producer(broker.address, transactional_id="tx-cli", linger_ms=0) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"v", partition=1)
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
