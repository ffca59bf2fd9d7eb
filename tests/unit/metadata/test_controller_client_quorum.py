"""A write no controller takes says why: with most controllers unreachable there is no quorum,
and the message names them and what to start."""

from __future__ import annotations

import grpc
import pytest

from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb
from metadata_quorum.controller_client import ControllerClient, ControllerError

ADDRESSES = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "failed to connect to all addresses"


class _Controller:
    """A controller that is down, or up without an active controller to forward to."""

    def __init__(self, up: bool) -> None:
        self.up = up

    def CreateTopics(self, request, timeout):
        if not self.up:
            raise _Unavailable()
        return pb.CreateTopicsResponse(error_code=common.NOT_CONTROLLER, error_message="no active controller now")


def _create_fails(monkeypatch: pytest.MonkeyPatch, up: list[bool]) -> str:
    client = ControllerClient(",".join(ADDRESSES), timeout_s=2.0)  # time for a loaded machine to try all three
    controllers = {address: _Controller(u) for address, u in zip(ADDRESSES, up)}
    monkeypatch.setattr(client, "_stub", lambda endpoint: controllers[f"{endpoint[1]}:{endpoint[2]}"])
    monkeypatch.setattr(client._router, "_backoff", lambda: 0.01)  # the router still moves from controller to controller
    with client, pytest.raises(ControllerError) as failed:
        client.create_topic("t", 1, 1)
    assert failed.value.code == common.REQUEST_TIMED_OUT
    return str(failed.value)


def test_most_controllers_down_is_called_a_lost_quorum(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _create_fails(monkeypatch, [True, False, False])
    assert "2 of the 3 controllers do not answer (127.0.0.1:2, 127.0.0.1:3)" in message and "no quorum" in message
    assert "start the stopped controllers" in message


def test_a_minority_down_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _create_fails(monkeypatch, [True, True, False])
    assert "no quorum" not in message and "kraftlog quorum describe" in message
