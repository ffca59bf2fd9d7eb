"""Leader-epoch fencing table (KIP-320 / docs/architecture.md) and the error enum's match with the proto."""

import pytest

from server_common.errors import ErrorCode
from data_plane.replication.fetch_validation import check_leader_epoch
from kraftlog_proto import common_pb2

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


def test_error_codes_match_the_proto_contract() -> None:
    """One vocabulary from the cores to the wire: every proto code, same name and number."""
    assert {code.name: code.value for code in ErrorCode} == dict(common_pb2.ErrorCode.items())
