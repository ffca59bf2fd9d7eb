"""``kraftlog groups`` against in-process fakes of a broker and a coordinator: list,
describe with lag, reset-offsets as a dry run (nothing changes), refused with members,
executed without, and delete."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from data_plane.client import Consumer, Producer
from server_common.logging_setup import configure_logging
from server_common.waiting import wait_for
from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.fake_coordinator import FakeCoordinator

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fakes():
    configure_logging(level="WARNING")  # as the CLI does: the member's rebalance logs stay out of the captured stdout
    broker = FakeBroker({"t": 2})
    coordinator = FakeCoordinator({"t": 2})
    coordinator.serve_on(broker._server, broker.address)
    with broker:
        with Producer(broker.address) as producer:
            for i in range(30):
                producer.send("t", b"v", partition=0 if i < 10 else 1)
            producer.flush(10)
        yield coordinator, broker.address


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_describe_reset_and_delete(fakes, capsys):
    coordinator, bootstrap = fakes
    member = Consumer(bootstrap, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False, fetch_mode="fetch")
    member.subscribe(["t"])
    wait_for(lambda: member.poll(10) is not None and len(member.assignment()) == 2, 10, "the member owning both partitions")
    member.commit({("t", 0): 4, ("t", 1): 5})
    code, out, _ = run(capsys, "groups", "describe", "g", "--json", "--bootstrap", bootstrap)
    described = json.loads(out)
    assert code == 0 and described["state"] == "stable" and len(described["members"]) == 1
    assert [(p["partition"], p["committed"], p["log_end"], p["lag"]) for p in described["partitions"]] == [(0, 4, 10, 6), (1, 5, 20, 15)]
    code, out, _ = run(capsys, "groups", "describe", "g", "--bootstrap", bootstrap)
    assert code == 0 and out.splitlines()[0].endswith(", 1 member")  # not "1 members"
    code, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
    assert code == 0 and "g" in out and "stable" in out
    code, _, err = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute", "--bootstrap", bootstrap)
    assert code == 1 and "has 1 member: stop its consumers" in err
    code, out, _ = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--shift-by", "-2", "--bootstrap", bootstrap)
    assert code == 0 and "dry run: nothing changed" in out and "refused while the group has 1 member: stop" in out
    assert coordinator.offsets == {("t", 0): 4, ("t", 1): 5}
    code, _, err = run(capsys, "groups", "delete", "g", "--bootstrap", bootstrap)
    assert code == 1 and "NON_EMPTY_GROUP" in err and "stop its consumers" in err
    member.close()
    code, out, _ = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--shift-by", "-2", "--execute", "--json", "--bootstrap", bootstrap)
    assert code == 0 and [(s["current"], s["target"]) for s in json.loads(out)["plan"]] == [(4, 2), (5, 3)]
    assert coordinator.offsets == {("t", 0): 2, ("t", 1): 3}
    code, out, _ = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-offset", "100", "--execute", "--bootstrap", bootstrap)
    assert code == 0 and coordinator.offsets == {("t", 0): 10, ("t", 1): 20}  # clamped to the log end
    assert run(capsys, "groups", "delete", "g", "--bootstrap", bootstrap)[0] == 0
    code, out, _ = run(capsys, "groups", "list", "--bootstrap", bootstrap)
    assert code == 0 and "no consumer groups" in out


def test_bad_datetime_is_a_clear_error(fakes, capsys):
    _, bootstrap = fakes
    code, _, err = run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday", "--bootstrap", bootstrap)
    assert code == 1 and "is not an ISO date-time: write e.g." in err


def test_owners_that_share_a_client_and_host_are_told_apart_by_their_member_id() -> None:
    from types import SimpleNamespace

    from cli.groups_cmd import owner_labels

    member = lambda member_id, client, host: SimpleNamespace(member_id=member_id, client_id=client, client_host=host)  # noqa: E731
    labels = owner_labels([member("aaaaaaaa-1", "kraftlog-console", "127.0.0.1"), member("bbbbbbbb-2", "kraftlog-console", "127.0.0.1"),
                           member("cccccccc-3", "billing", "10.0.0.2")])
    assert labels == {"aaaaaaaa-1": "kraftlog-console@127.0.0.1 (aaaaaaaa)", "bbbbbbbb-2": "kraftlog-console@127.0.0.1 (bbbbbbbb)",
                      "cccccccc-3": "billing@10.0.0.2"}
