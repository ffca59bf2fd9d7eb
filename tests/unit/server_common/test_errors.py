from kraftlog_proto import common_pb2
from server_common.errors import ErrorCode, error_code_name, from_wire_code


def test_the_enum_is_the_protos() -> None:
    assert {code.name: code.value for code in ErrorCode} == dict(common_pb2.ErrorCode.items())


def test_known_codes_are_named_and_unknown_ones_stay_visible_as_numbers() -> None:
    assert error_code_name(common_pb2.NOT_LEADER_OR_FOLLOWER) == "NOT_LEADER_OR_FOLLOWER"
    assert error_code_name(9999) == "ERROR_CODE_9999"


def test_a_wire_code_this_version_does_not_know_reads_as_an_unknown_server_error() -> None:
    assert from_wire_code(common_pb2.NOT_LEADER_OR_FOLLOWER) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert from_wire_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
