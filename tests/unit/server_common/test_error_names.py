from server_common.error_names import error_code_name
from kraftlog_proto import common_pb2


def test_known_codes_are_named_and_unknown_ones_stay_visible_as_numbers() -> None:
    assert error_code_name(common_pb2.NOT_LEADER_OR_FOLLOWER) == "NOT_LEADER_OR_FOLLOWER"
    assert error_code_name(9999) == "ERROR_CODE_9999"
