"""Leader-epoch fencing table (KIP-320 / docs/architecture.md) and the error enum's match with the proto."""

import pytest

from data_plane.replication.errors import ErrorCode
from data_plane.replication.fetch_validation import check_leader_epoch, check_leader_request
from proto import common_pb2

E = ErrorCode


@pytest.mark.parametrize(
    "request_epoch, local_epoch, expected",
    [
        (5, 5, E.NONE),
        (4, 5, E.FENCED_LEADER_EPOCH),
        (6, 5, E.UNKNOWN_LEADER_EPOCH),
        (-1, 5, E.NONE),
        (0, 0, E.NONE),
    ],
)
def test_check_leader_epoch(request_epoch: int, local_epoch: int, expected: ErrorCode) -> None:
    assert check_leader_epoch(request_epoch, local_epoch) == expected


@pytest.mark.parametrize(
    "request_epoch, local_epoch, is_leader, expected",
    [
        (5, 5, True, E.NONE),
        (5, 5, False, E.NOT_LEADER_OR_FOLLOWER),
        (4, 5, False, E.FENCED_LEADER_EPOCH),  # stale view wins over "wrong broker"
        (6, 5, False, E.UNKNOWN_LEADER_EPOCH),
        (-1, 5, False, E.NOT_LEADER_OR_FOLLOWER),
        (5, None, False, E.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_check_leader_request(request_epoch, local_epoch, is_leader, expected) -> None:
    assert check_leader_request(
        request_leader_epoch=request_epoch, local_leader_epoch=local_epoch, is_leader=is_leader
    ) == expected


def test_error_codes_match_the_proto_contract() -> None:
    for code in ErrorCode:
        assert common_pb2.ErrorCode.Value(code.name) == code.value, code
