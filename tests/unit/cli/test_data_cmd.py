"""``kraftlog produce`` and ``consume`` against an in-process fake broker: what they print
where. stdout carries only records (a pipeline's data); the clients' logs go to stderr."""

from __future__ import annotations

import io
import sys

import pytest
import structlog

from cli.main import main
from kraftlog_proto import common_pb2
from tests.unit.client.fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def unconfigured_logging():
    """structlog as a fresh process has it (printing to stdout), as the command starts."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def test_a_retried_produce_logs_to_stderr_not_stdout(capsys, monkeypatch, unconfigured_logging) -> None:
    broker = FakeBroker({"t": 1})
    broker.fail_produce[("t", 0)].append(common_pb2.NOT_LEADER_OR_FOLLOWER)  # one retry, then stored
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\n")))
    with broker:
        code = main(["produce", "t", "--acks", "1", "--bootstrap", broker.address])
    captured = capsys.readouterr()
    assert code == 0 and len(broker.stored(("t", 0))) == 1
    assert captured.out == ""
    assert "sent 1 record to t" in captured.err


def test_the_check_sees_a_log_line_on_stdout(capsys, unconfigured_logging) -> None:
    """Negative control: without the command's logging set up, a client log line lands on stdout."""
    structlog.get_logger("probe").warning("retrying batch")
    assert "retrying batch" in capsys.readouterr().out


def test_a_line_without_the_key_separator_stops_the_command_saying_what_was_sent(capsys, monkeypatch) -> None:
    broker = FakeBroker({"t": 1})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"k1:a\nk2:b\nno separator\nk3:c\n")))
    with broker:
        code = main(["produce", "t", "--acks", "1", "--key-separator", ":", "--bootstrap", broker.address])
        stored = [key for batch in broker.stored(("t", 0)) for key in batch.keys]
    assert code == 1 and stored == [b"k1", b"k2"]
    assert capsys.readouterr().err == ("kraftlog produce: line 3 has no key separator ':': write KEY:VALUE; "
                                       "the 2 line(s) before it were sent, nothing from it on\n")


def test_producer_settings_are_read_as_their_types_and_a_wrong_one_says_what_is_accepted() -> None:
    from cli.data_cmd import producer_settings

    assert producer_settings(["linger_ms=0", "batch_size=1024", "enable_idempotence=false", "client_id=loader"]) == {
        "linger_ms": 0.0, "batch_size": 1024, "enable_idempotence": False, "client_id": "loader"}
    with pytest.raises(ValueError, match="NAME one of linger_ms"):
        producer_settings(["lingerms=5"])
    with pytest.raises(ValueError, match="batch_size=.big.: the value must be an integer"):
        producer_settings(["batch_size=big"])
